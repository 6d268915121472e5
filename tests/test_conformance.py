"""One conformance suite over every operator (issue 28, item 6): what each op, bundled or a user's, must satisfy.

Every bundled op (aclnn_cli.ops.OPS) and the worked user op (tests/user_ops/my_hardtanh_backward.py, loaded as
`--ops` loads it) is checked here for what is the same check for all of them: its entry in tests/conformance.py
(an oracle and an independent kernel, or a reasoned opt-out), its variants' declared kinds, its prototype against
the stub CANN header, its bundled cases' size and contract cases, `exact_at` against `exact` on its bundled
cases, and, for the ops whose kernels run through a shared runner, the oracle and the independent kernel over
its bundled cases. The per-op files (tests/test_op_<key>.py) keep what is particular to an op: hand-computed
kernel points, its contract table, its edges. The bundled cases are the session's (conftest.py's bundled_gen
and bundled_produced): nothing here generates them again.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from pathlib import Path

import pytest

from aclnn_cli.device.defects import variant_kind
from aclnn_cli.ops import OPS

import conformance as C
from helpers import restored_registry

BUNDLED_KEYS = sorted(op.key for op in OPS.values())
USER_KEY = C.USER_KEY
KEYS = [*BUNDLED_KEYS, USER_KEY]
EXACT_AT = sorted(op.key for op in OPS.values() if op.exact_at is not None)
CONTRACT_STATUSES = {161001, 161002}  # ACLNN_ERR_PARAM_NULLPTR, ACLNN_ERR_PARAM_INVALID (the ops' documents)


@pytest.fixture(scope="module")
def user_op():
    """The worked user op, loaded in this process as `aclnn-cli --ops FILE` loads it (aclnn_cli.ops.user), the
    registry restored afterwards."""
    from aclnn_cli.ops import user

    with restored_registry():
        user.load_paths([C.USER_OP])
        yield next(op for op in OPS.values() if op.key == C.USER_OP.stem)
    user._loaded.discard(str(C.USER_OP.resolve()))  # (so that another test may load it again)


@pytest.fixture(params=KEYS)
def op(request):
    if request.param == USER_KEY:
        return request.getfixturevalue("user_op")
    return next(o for o in OPS.values() if o.key == request.param)


def key_of(op) -> str:
    """The op's key in the tables of tests/conformance.py."""
    return op.key if op.key in BUNDLED_KEYS else USER_KEY


# ---------------------------------------------------------------- every op has its entry


def test_every_bundled_op_has_a_conformance_entry():
    """A new op cannot come without an oracle and an independent kernel: the entry names where each is, and the
    place exists (the declared textbook, the shared kernel file, a runner of this suite, a test of its own)."""
    from independent_kernels import covers

    assert sorted(C.ENTRIES) == BUNDLED_KEYS, "ops without an entry in tests/conformance.py: " + ", ".join(
        sorted(set(BUNDLED_KEYS) - set(C.ENTRIES))) + "; entries of no op: " + ", ".join(
        sorted(set(C.ENTRIES) - set(BUNDLED_KEYS)))
    ops = {op.key: op for op in OPS.values()}
    for key, (oracle, independent) in C.ENTRIES.items():
        for place in (oracle, independent):
            named = C.test_names(place)
            if named:
                path, test = named
                assert path.is_file() and f"def {test}(" in path.read_text(), f"{key}: {place} is gone"
        assert oracle != C.TEXTBOOK or ops[key].textbook is not None, f"{key}: no textbook declared"
        assert oracle != C.LOSS_RUN or C.LOSS[key][1], f"{key}: no oracle check in conformance.LOSS"
        assert independent != C.KERNELS or covers(ops[key].name), f"{key}: not in tests/independent_kernels.py"
        assert independent != C.LOSS_RUN or key in C.LOSS, key
        assert independent != C.ROWS_RUN or key in C.ROWS, key
    for check, ops_let_off in C.OPT_OUT.items():
        assert set(ops_let_off) <= set(BUNDLED_KEYS) and all(len(why) > 40 for why in ops_let_off.values()), check


# ---------------------------------------------------------------- declarations


def test_variants_are_declared_and_classified(op):
    """Each variant's kind is declared (@defect or @legitimate), as the table has it; named in lower-case words
    joined by hyphens; every op brings a defect for the gate to catch (tests/test_defects.py's matrix runs each
    on the bundled cases)."""
    kinds = {name: variant_kind(name, fn) for name, fn in op.variants.items()}
    assert None not in kinds.values(), f"{op.name}: kind undeclared: {[n for n, k in kinds.items() if k is None]}"
    assert key_of(op) in C.VARIANTS, f"{op.name}: its variants are not in tests/conformance.py's VARIANTS"
    defects, legit = (set(s.split()) for s in C.VARIANTS[key_of(op)])
    assert {n for n, k in kinds.items() if not k} == defects and {n for n, k in kinds.items() if k} == legit
    assert defects and all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", n) for n in kinds), sorted(kinds)


def test_the_prototype_is_the_stub_headers(op):
    """api_header is a header of the stub CANN toolkit (the user op's: its own include folder), and its
    GetWorkspaceSize takes api_params in order, each of its kind's C type, then workspaceSize and executor."""
    let_off = C.OPT_OUT.get("stub header", {})
    if op.key in let_off:
        pytest.skip(let_off[op.key])
    include = C.STUB_INCLUDE if key_of(op) != USER_KEY else C.USER_OPS / "include"
    assert (include / op.api_header).is_file(), f"{op.name}: no {op.api_header} in {include}"
    params = C.prototype(op, include)
    assert [n for _, n in params] == [n for n, _ in op.api_params] + ["workspaceSize", "executor"]
    for (c_type, name), (_, kind) in zip(params, op.api_params):
        assert c_type in C.C_TYPES[kind], (op.name, name, kind, c_type)


# ---------------------------------------------------------------- the bundled cases


def test_bundled_cases_stay_small(op):
    """The op's case file stays within its size (the suite's time): its number of cases and output elements."""
    from aclnn_cli.cases.loader import load_file
    from aclnn_cli.cli.main import BUNDLED

    path = C.USER_OP.with_suffix(".yaml") if key_of(op) == USER_KEY else BUNDLED / f"{op.key}.yaml"
    cases = load_file(path)
    fewest, most, elements = C.SMALL.get(key_of(op), C.SMALL["*"])
    size = sum(math.prod(t.layout.shape) for c in cases for t in c.tensors if t.role == "output")
    assert fewest <= len(cases) <= most and size < elements, (len(cases), size)
    assert {c.op.name for c in cases} == {op.name}


@pytest.fixture(scope="module")
def statuses(bundled_produced) -> dict[str, dict[str, tuple[int, str]]]:
    """{op key: {case: (its expected status, the session's verify verdict)}} of the bundled suite."""
    verdict = {c["case_id"]: c["status"] for c in json.loads((bundled_produced / "verify.json").read_text())["cases"]}
    out: dict[str, dict] = {}
    for case in sorted(p.parent for p in bundled_produced.glob("*/case.json")):
        m = json.loads((case / "case.json").read_text())
        out.setdefault(Path(m["source"]).stem, {})[case.name] = (m["expect_status"], verdict[case.name])
    return out


@pytest.mark.parametrize("key", BUNDLED_KEYS)
def test_contract_cases_get_their_documented_status(statuses, key):
    """Every op brings contract cases beside its precision cases; each expects a documented status and got it."""
    mine = statuses[key]
    contract = {n: s for n, (s, _) in mine.items() if s != 0}
    assert len(contract) >= 7 and set(contract.values()) <= CONTRACT_STATUSES, contract
    assert len(mine) - len(contract) >= 30
    assert {v for _, v in mine.values()} == {"PASS"}, {n: v for n, (_, v) in mine.items() if v != "PASS"}


@pytest.mark.parametrize("key", EXACT_AT)
def test_exact_at_equals_exact_everywhere(bundled_gen, key):
    """`exact_at` (what gen asks for the few elements a long block leaves open) gives the values `exact` gives
    for the whole block, at every element of every output, on the op's small finite float32 bundled cases (the
    other dtypes' cases are the same blocks rounded: nothing new for the two ways in; an op without attributes: one
    case of each shape)."""
    from aclnn_cli.casedir import manifest as M

    from loss_oracle import own_cases

    op = next(o for o in OPS.values() if o.key == key)
    compared, seen = 0, set()
    for case in own_cases(bundled_gen, key):
        m = M.load(case)
        inputs = sum(t.layout.numel for t in m.inputs if not t.null)
        attrs = repr(sorted(m.attribute_values.items()))
        if not attrs.strip("[]"):  # (an op without attributes or case values: one case of each driver shape)
            attrs = repr(m.tensors[0].layout.shape)
        if (m.expect_status != 0 or not m.judged or not 0 < m.judged[0].layout.numel <= 1000 or inputs > 4096 or "special" in case.name
                or m.judged[0].dtype.name != "float32" or attrs in seen):
            continue  # (small, finite, one dtype, one case of each attribute set: Fractions over whole blocks)
        seen.add(attrs)
        n, wrong = C.exact_at_disagreements(op, m)
        assert not wrong, (case.name, wrong[:3])
        compared += n
    assert len(seen) >= 3 and compared >= 100, (len(seen), compared)


# ---------------------------------------------------------------- oracle and independent kernel, shared runners


def _loss(key: str):
    module, check, fewest, kernel, judged = C.LOSS[key]
    return importlib.import_module(module), check, fewest, kernel, judged


@pytest.mark.parametrize("key", sorted(k for k, v in C.LOSS.items() if v[1]))
def test_bundled_goldens_are_the_oracle_rounded_once(bundled_gen, key):
    """Every golden element of the op's positive bundled cases is its file's oracle rounded once (the file's
    check of one case), over a million of them."""
    from loss_oracle import oracle_checked

    module, check, fewest, _, _ = _loss(key)
    assert oracle_checked(bundled_gen, key, getattr(module, check)) > fewest


@pytest.mark.parametrize("key", sorted(C.LOSS))
def test_an_independent_kernel_passes_every_bundled_case(bundled_gen, tmp_path, key):
    """The op file's ATen formula in float32, from the manifest alone, written as the dumps of every positive
    bundled case (tests/harness.py): verify passes them all."""
    from loss_oracle import independent_run

    module, _, _, kernel, judged = _loss(key)
    bad, n = independent_run(bundled_gen, key, tmp_path / "out", getattr(module, kernel))
    assert not bad and n > judged, (bad[:3], n)


@pytest.mark.parametrize("key", sorted(C.ROWS))
def test_an_independent_rows_kernel_passes_every_bundled_case(tmp_path_factory, tmp_path, key):
    """The op file's float32 kernel (another summation order) on every bundled case's whole rows, through
    verify (tests/independent_rows.py)."""
    import independent_rows
    from rowblocks import bundled_suite

    module, kernel = C.ROWS[key]
    suite = bundled_suite(tmp_path_factory, key)
    wrote, records = independent_rows.run_suite(suite, tmp_path, getattr(importlib.import_module(module), kernel))
    assert wrote >= 40 and not independent_rows.not_passing(records)
