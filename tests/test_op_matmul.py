"""aclnnMatmul (the contraction family with torch.matmul's shapes): goldens against an oracle of Fractions that shares
nothing with the op or the family (numpy.matmul of Fractions over the operands read through the manifest's numbers:
1-d operands, broadcast batch dims of every rank, transposed views), numpy's float32 matmul as an independent kernel
over every bundled case, correct float32 orders passing at K = 65,536, each defect failing where it changes the
result, the contract's rules, and ops-nn's ATK and TTK suites for the op imported as they are.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

import harness
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.contraction.matmul import SPEC
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, SUCCESS
from contraction_kernels import ORDERS, goldens_against_the_oracle, logical, numpy_float32
from helpers import read_yaml, run_cli
from rowblocks import (bundled_emulated, generated_yaml, independent_dumps, not_passing,
                       variant_statuses, write_dump, passing_bundled_records)

ORACLE_YAML = """\
op: aclnnMatmul
defaults: {product: "950", seed: 43, dtype: [float32, float16, bfloat16]}
cases:
  - {name: dot, shape: [70]}
  - {name: vec_mat, shape: [33], tensors: {mat2: {shape: [33, 7]}}}
  - {name: mat_vec, shape: [2, 9, 40], tensors: {mat2: {shape: [40]}}}
  - {name: vec_batched, shape: [24], tensors: {mat2: {shape: [3, 24, 5]}}}
  - {name: square, shape: [24, 40]}
  - {name: folded, shape: [3, 5, 33], tensors: {mat2: {shape: [33, 14]}}}
  - {name: broadcast, shape: [2, 1, 5, 20], tensors: {mat2: {shape: [1, 3, 20, 7]}}}
  - {name: ranks, shape: [4, 3, 16], tensors: {mat2: {shape: [2, 1, 3, 4, 16, 2]}}}
  - {name: six, shape: [2, 1, 2, 1, 3, 17], tensors: {mat2: {shape: [1, 2, 1, 2, 17, 4]}}}
  - {name: k1, shape: [16, 1], tensors: {mat2: {shape: [1, 16]}}}
  - {name: cancel_exact, shape: [8, 32], inputs: {self: {values: [1, -1, 0.5, -0.5]}, mat2: {constant: 3}}}
  - {name: wide, shape: [8, 48], inputs: {self: {values: [1.0e-3, -7.5, 250.0, 3.0e-2]}, mat2: {normal: [0, 10]}}}
  - {name: t_self, shape: [3, 12, 40], tensors: {self: {layout: transposed}, mat2: {shape: [40, 10]}}}
  - {name: t_mat2_bcast, shape: [3, 2, 12, 40], tensors: {mat2: {shape: [2, 40, 10], layout: transposed}, out: {layout: {gap: 2}}}}
  - {name: mixed, dtype: float16, shape: [8, 40], tensors: {mat2: {shape: [40, 6], dtype: [float32, bfloat16]}}}
  - {name: narrow_out, dtype: float32, shape: [8, 40], tensors: {out: {dtype: [float16, bfloat16]}}}
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_yaml(tmp_path_factory, ORACLE_YAML, "matmul_oracle")


def test_goldens_equal_the_oracle_rounded_once(generated):
    """Every golden (1-d operands, broadcast batches of 3 to 6 dims, transposed views, K = 1, cancelling sums,
    exact zeros, values over many binades, mixed dtypes) is the exact sum of products rounded once to out's dtype,
    bit for bit; some elements through the exact path."""
    goldens_against_the_oracle(generated)


def _in_tiles(cases_file: Path, out: Path, tile: int, monkeypatch) -> list[int]:
    """gen of a case file in this process with families.contraction.TILE = tile; the tiles of each chunk (0: whole)."""
    from aclnn_cli.cases.loader import load_cases
    from aclnn_cli.golden.gen import generate_case
    from aclnn_cli.ops.families import contraction

    cut, tiles = [], contraction.Contraction.golden_tiles

    def counted(self, blocks):
        got = tiles(self, blocks)
        cut.append(0 if got is None else len(got[1]))
        return got

    monkeypatch.setattr(contraction, "TILE", tile)
    monkeypatch.setattr(contraction.Contraction, "golden_tiles", counted)
    for case in load_cases([cases_file]):
        generate_case(case, out)
    return cut


def _same_files(a: Path, b: Path) -> int:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert [f for f in files if (a / f).read_bytes() != (b / f).read_bytes()] == []
    return len(files)


def test_goldens_made_in_tiles_are_the_same_bytes(generated, tmp_path, monkeypatch):
    """gen's golden in tiles of out (families.contraction.TILE; here 8 operand elements a side, so all but the
    oracle file's dot products are cut, in rows and columns, some tiles ragged): every file of every case, manifests
    too, the bytes of the whole-block gen, and so the oracle's goldens. A tile placed at another row or column fails."""
    cut = _in_tiles(generated.parent / "matmul_oracle.yaml", tmp_path, 8, monkeypatch)
    assert len(cut) == 46 and sorted(cut)[:4] == [0, 0, 0, 4], sorted(cut)  # (dot: 1 x 1)
    assert _same_files(generated, tmp_path) > 200


NONFINITE_YAML = """\
op: aclnnMatmul
cases:
  - {name: inf_row, dtype: bfloat16, shape: [2, 3], tensors: {mat2: {shape: [3, 1]}},
     inputs: {self: {values: [1, 0.00390625, 2.9103830456733704e-11, .inf, 1, 1]}, mat2: {values: [1, 1, 2.9103830456733704e-11]}}}
"""


def test_a_block_with_a_non_finite_input_stays_whole(tmp_path, monkeypatch):
    """A block holding an infinity takes the IEEE path whole (golden/rows.reference_blocks): its finite row's golden
    is the float64 sum rounded, 1 + 2^-8 (+ 2^-70, lost) to bfloat16's 1.0, not the certified 1 + 2^-7 a tile of
    that row alone would give. Cut in rows (TILE = 3), the block must stay whole: the bytes of the whole-block gen."""
    from helpers import write_yaml

    cases = write_yaml(tmp_path, NONFINITE_YAML, "nonfinite.yaml")
    whole = run_cli("gen", cases, "-o", tmp_path / "whole")
    assert whole.exit_code == 0, whole.output
    cut = _in_tiles(cases, tmp_path / "tiles", 3, monkeypatch)
    assert cut == [2]
    golden = np.fromfile(next((tmp_path / "whole").glob("*/out.golden.bin")), D.BFLOAT16.np_dtype).astype(float)
    assert golden[0] == 1.0 and golden[1] == np.inf
    assert _same_files(tmp_path / "whole", tmp_path / "tiles") == 5


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    return bundled_emulated(tmp_path_factory, bundled_produced, "matmul")


def test_the_emulated_kernel_passes_every_bundled_case(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "matmul")
    assert len(cases) >= 150 and sum(c["kind"] == "contract" for c in cases) >= 20


def sgemm(case, m, matmul=numpy_float32):
    """numpy's float32 matmul of the logical operands (its own broadcast of the batch dims), USE_FP16's float16
    operands and result where the case asks for them on float32 operands. `matmul`: another float32 product of the
    same rules (tests/torch_device.py's torch.matmul)."""
    a, b = logical(case, m, "self"), logical(case, m, "mat2")
    dtypes = {t["name"]: t["dtype"] for t in m["tensors"]}
    attrs = {x["name"]: x["value"] for x in m["attributes"]}
    fp16 = (attrs.get("cubeMathType") == 2 and a.ndim + b.ndim > 2
            and ("float32" in (dtypes["self"], dtypes["mat2"]) or dtypes["self"] != dtypes["mat2"]))
    if not fp16:
        return matmul(a, b)
    half = lambda x: np.asarray(x, np.float32).astype(np.float16).astype(np.float32)
    return half(matmul(half(a), half(b)))


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    wrote = independent_dumps(suite, tmp_path / "sgemm", sgemm)
    assert wrote >= 120
    bad = not_passing(tmp_path / "sgemm", tmp_path / "sgemm.json")
    assert not bad, bad


# ------------------------------------------------------------------ the allowance from K, both sides

GATE_YAML = """\
op: aclnnMatmul
defaults: {product: "950", seed: 17, dtype: [float32, float16, bfloat16]}
cases:
  - {name: k65536, shape: [4, 65536], tensors: {mat2: {shape: [65536, 3]}}}
  - {name: k65536_cancel, shape: [3, 65536], tensors: {mat2: {shape: [65536, 4]}},
     inputs: {self: {uniform: [-1, 1]}, mat2: {uniform: [-1, 1]}}}
  - {name: k65536_dw, shape: [2, 65536], tensors: {self: {layout: transposed}, mat2: {shape: [65536, 2]}},
     inputs: {self: {uniform: [0, 1]}, mat2: {uniform: [0, 1]}}}
  - {name: k4096, shape: [2, 16, 4096], tensors: {mat2: {shape: [4096, 8], layout: transposed}}}
  - {name: k100_bcast, shape: [2, 1, 6, 100], tensors: {mat2: {shape: [1, 3, 100, 5]}}}
  - {name: k17_dx, shape: [8, 17], tensors: {mat2: {shape: [17, 6], layout: transposed}}}
"""


@pytest.fixture(scope="module")
def gate_suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, GATE_YAML, "matmul_gate")


def as_blocks(a: np.ndarray, b: np.ndarray):
    """Logical operands as (k, M, K) and (k, K, N) stacks, the batch broadcast (the orders take 3-d blocks)."""
    a, b = (a[None] if a.ndim == 2 else a), (b[None] if b.ndim == 2 else b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, (*batch, *a.shape[-2:])).reshape(-1, *a.shape[-2:])
    b = np.broadcast_to(b, (*batch, *b.shape[-2:])).reshape(-1, *b.shape[-2:])
    return a, b


def test_correct_float32_orders_stay_within_the_allowance_and_pass(gate_suite, tmp_path):
    """Sequential, pairwise, blocks of 16, 48 split-K partials shuffled and sgemm: each order's largest
    |result - exact| / allowance over every element, and verify's verdict on its dumps (K up to 65,536, transposed
    and broadcast operands)."""
    margins = {}
    for name, kernel in ORDERS.items():
        work = tmp_path / name
        shutil.copytree(gate_suite, work)
        for case in sorted(p.parent for p in work.glob("*/case.json")):
            m = harness.load(case)
            a, b = as_blocks(logical(case, m, "self"), logical(case, m, "mat2"))
            got = kernel(a, b).astype(np.float64)
            ref = SPEC.reference({"self": a, "mat2": b, "cubeMathType": 0})
            margins[(name, case.name)] = float(np.max(np.abs(got - ref.value) / ref.allowance))
            out = harness.tensors(m)["out"]
            write_dump(case, out, got.reshape(out["shape"]))
        bad = not_passing(work, tmp_path / f"{name}.json")
        assert not bad, (name, bad)
    print("largest error / allowance:", {k: f"{v:.4f}" for k, v in margins.items() if "k65536" in k[1]})
    assert max(margins.values()) < 0.25, max(margins, key=margins.get)


DEFECTS = sorted(n for n, fn in SPEC.variants.items() if fn.variant_kind == "defect")


def _changes(variant: str, case_id: str) -> bool:
    """Whether the defect changes the result beyond what the standard forgives anywhere: a K tail exists only where
    K % 16 != 0; a 16-bit accumulator shows from K = 4,096 (docs/allowances.md); a transpose misread changes a view
    whose operand is not square, except mat2's on positive data at K = 65,536 in bfloat16 (a permutation of 65,536
    positive terms moves the sum by about 0.3%, inside 2^-7), and likewise self's there; a batch read at the wrong index only where a broadcast dim is not the last batch dim."""
    if variant == "matmul-not-transposed":
        return "-k65536_dw-bfloat16" not in case_id
    if variant == "matmul-self-not-transposed":
        return "-k65536_dw-bfloat16" not in case_id
    if variant == "matmul-k-tail-dropped":
        return "-k100_bcast-" in case_id or "-k17_dx-" in case_id
    if variant in ("matmul-fp16-accumulation", "matmul-bf16-accumulation"):
        return "-k65536" in case_id or "-k4096-" in case_id
    if variant == "matmul-wrong-batch":
        return "-k100_bcast-" in case_id
    return True


@pytest.mark.parametrize("variant", DEFECTS + ["matmul-split-k"])
def test_each_defect_fails_where_it_changes_the_result_and_split_k_passes(gate_suite, tmp_path, variant):
    status = variant_statuses(gate_suite, tmp_path, variant)
    assert len(status) == 18
    if variant == "matmul-split-k":
        assert set(status.values()) == {"PASS"}
        return
    changed = {k for k in status if _changes(variant, k)}
    assert changed and {k: status[k] for k in changed if status[k] != "FAIL"} == {}


# ------------------------------------------------------------------ the contract

def _status(s, m, o, dtype=D.FLOAT32, m_dtype=None, o_dtype=None, math_type=0, product="950"):
    descs = {"self": TensorDesc(dtype, tuple(s)), "mat2": TensorDesc(m_dtype or dtype, tuple(m)),
             "out": TensorDesc(o_dtype or dtype, tuple(o))}
    return check(SPEC, product, descs, {"cubeMathType": math_type}).status


def test_contract():
    """CheckShapeValid, the dtype rule and CheckCubeMathType (aclnn_matmul.cpp, matmul_util.cpp, cube_util.cpp)."""
    assert _status([3], [3], []) == SUCCESS  # dot: a 0-d out
    assert _status([3], [3, 4], [4]) == _status([5, 3], [3], [5]) == SUCCESS
    assert _status([2, 1, 4, 3], [1, 5, 3, 6], [2, 5, 4, 6]) == SUCCESS  # batch dims broadcast
    assert _status([4, 3], [2, 1, 3, 4, 3, 2], [2, 1, 3, 4, 4, 2]) == SUCCESS  # 6-d
    assert _status([1] * 7, [1, 1], [1] * 7) == INVALID  # more than 6 dims
    assert _status([], [3], [3]) == INVALID  # a 0-d operand
    assert _status([4, 3], [5, 2], [4, 2]) == INVALID  # K differs (mat2 2-d: its first dim)
    assert _status([2, 4, 3], [2, 5, 2], [2, 4, 2]) == INVALID  # K differs (mat2 3-d: its second-to-last)
    assert _status([4, 3], [4], [4]) == INVALID  # K differs (mat2 1-d)
    assert _status([2, 4, 3], [3, 3, 2], [3, 4, 2]) == INVALID  # batches 2 and 3
    assert _status([4, 3], [3, 2], [7, 7]) == SUCCESS  # out's shape is not checked in phase one
    assert _status([4, 3], [3, 2], [4, 2], m_dtype=D.FLOAT16) == SUCCESS  # promoted: float32
    assert _status([4, 3], [3, 2], [4, 2], dtype=D.FLOAT16, m_dtype=D.BFLOAT16, o_dtype=D.FLOAT32) == SUCCESS
    assert _status([4, 3], [3, 2], [4, 2], o_dtype=D.FLOAT16) == SUCCESS  # every float casts to out's
    assert _status([4, 3], [3, 2], [4, 2], m_dtype=D.lookup("float64")) == INVALID
    for math_type in range(5):
        assert _status([4, 3], [3, 2], [4, 2], dtype=D.BFLOAT16, math_type=math_type) == SUCCESS  # (warnings only)
    assert _status([4, 3], [3, 2], [4, 2], math_type=5) == _status([4, 3], [3, 2], [4, 2], math_type=-1) == INVALID


# ------------------------------------------------------------------ ops-nn's suites for the op

SUITES = Path(__file__).parent / "ops_nn_suites"
ATK = "atk_aclnnMatmul.json"  # matmul/mat_mul_v3/tests/st/aclnnMatmul/
TTK = "ttk_aclnn_mat_mul_v3_basic_st.csv"  # matmul/mat_mul_v3/tests/st/arch35/ (aclnnMatmul's rows among Mm's, Addmm's)
QUICK_MACS = 2_500_000  # the ATK cases run here: at most this many multiply-adds (the file's 9 smallest)


def _macs(case: dict) -> int:
    shapes = {"self": case["shape"], **{n: t["shape"] for n, t in case.get("tensors", {}).items() if "shape" in t}}
    mat2 = shapes.get("mat2", shapes["self"][::-1])  # (the family's default: self's dims swapped)
    return math.prod(shapes["self"]) * mat2[-1]


def test_ops_nn_suites_import_whole_and_their_small_cases_pass(tmp_path):
    """ops-nn's ATK file converts whole (all 290 cases, 2-d, cubeMathType 1; out listed among its inputs, as its
    executor hands that argument to the outputs); its 9 smallest cases (the rest hold 4 M to 3 G multiply-adds, the
    file 9.8 G elements) generate, emulate and verify PASS, and so do sgemm's dumps. The TTK CSV's 5 aclnnMatmul rows
    import (its aclnnMm, aclnnAddmm and aclnnInplaceAddmm rows are other APIs: skipped, named) and pass, the
    float16-in float32-out row included."""
    r = run_cli("convert", "--skip-unsupported", SUITES / ATK, SUITES / TTK, "-o", tmp_path / "yaml")
    assert r.exit_code == 0, r.output
    assert "skipped 6 unsupported" in r.output and "aclnnMm" in r.output, r.output
    docs = {p.stem: read_yaml(p) for p in (tmp_path / "yaml").glob("*.yaml")}
    atk, ttk = docs[ATK.split(".")[0]]["cases"], docs[TTK.split(".")[0]]["cases"]
    assert len(atk) == 290 and len(ttk) == 5
    picks = [c["name"] for c in atk if _macs(c) <= QUICK_MACS] + [c["name"] for c in ttk]
    assert len(picks) == 14
    out = tmp_path / "out"
    for args in (("gen", tmp_path / "yaml", "-o", out, *(a for n in picks for a in ("--case", f"matmul-{n}"))),
                 ("emulate", out)):
        r = run_cli(*args)
        assert r.exit_code == 0, r.output[-3000:]
    assert not not_passing(out, tmp_path / "v.json")
    assert len(json.loads((tmp_path / "v.json").read_text())["cases"]) == len(picks)
    assert independent_dumps(out, tmp_path / "sgemm", sgemm) == len(picks)
    assert not not_passing(tmp_path / "sgemm", tmp_path / "sgemm.json")
