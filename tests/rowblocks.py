"""Test helpers shared by the Rows ops' test files: a block (k, R, A0) in float64 or as Fractions (as
`exact` receives it), and an op's bundled cases generated and emulated, taken from the session's suite."""

from __future__ import annotations

import functools
import json
from exactq import PackageFraction
from pathlib import Path

import numpy as np

import harness
from aclnn_cli.tensor import dtypes as D
from helpers import read_yaml, run_cli, verify_records

CASES = Path(__file__).resolve().parent.parent / "aclnn_cli" / "cases" / "bundled"


def _float(v) -> bool:
    """A float array, bfloat16 included (its dtype kind is "V", not "f")."""
    return isinstance(v, np.ndarray) and (v.dtype.kind == "f" or v.dtype.name == "bfloat16")


def as_f64(t: dict) -> dict:
    """Float inputs widened (exactly) to float64; everything else as it is."""
    return {k: v.astype(np.float64) if _float(v) else v for k, v in t.items()}


def as_fractions(t: dict) -> dict:
    """A block as `exact` receives it: float inputs as object arrays of Fraction, integers as they are."""
    def conv(v):
        if _float(v):
            return np.array([PackageFraction(float(x)) for x in v.reshape(-1)] + [None], dtype=object)[:-1].reshape(v.shape)
        return v
    return {k: conv(v) for k, v in t.items()}


def bundled_suite(tmp_path_factory, key: str) -> Path:
    """aclnn_cli/cases/bundled/<key>.yaml generated and emulated, in a fresh directory: its cases taken from the
    session's bundled suite (shared.bundled_produced: gen, emulate --jobs 2, which writes the bytes one worker
    writes; test_bundled_bytes.py), gen's files hard-linked, the device's dumps copied (a test may rewrite them)."""
    import shared

    produced = shared.bundled_produced(tmp_path_factory)
    names = shared.cases_of(produced, [f"{key}.yaml"])
    assert names, f"no bundled case comes from {key}.yaml"
    return shared.linked_copy(produced, tmp_path_factory.mktemp(key) / "out", cases=names)


@functools.cache
def _bundled_index(out: Path) -> dict[str, list[str]]:
    """{case file name: its case directories} of a generated bundled OUT (a session fixture's, never changed), read
    once per process: shared.cases_of reads all its case.json files (a third of a CPU-second) at every call."""
    by_file: dict[str, list[str]] = {}
    for d in sorted(out.iterdir()):  # (shared.cases_of's order and test: case.json's source)
        if (d / "case.json").is_file():
            by_file.setdefault(Path(json.loads((d / "case.json").read_text())["source"]).name, []).append(d.name)
    return by_file


def bundled_of(out: Path, key: str, *names: str) -> list[str]:
    """The case directories of aclnn_cli/cases/bundled/<key>.yaml in the session's `out` (bundled_gen or
    bundled_produced), every one or those whose name starts with one of `names`."""
    cases = [c for c in _bundled_index(out).get(f"{key}.yaml", [])
             if not names or c.removeprefix(f"{key}-").startswith(names)]
    assert cases, f"no bundled case of {key}.yaml starts with {names}"
    return cases


def bundled_generated(tmp_path_factory, bundled_gen: Path, key: str, *names: str) -> Path:
    """<key>.yaml's bundled cases (bundled_of) as gen wrote them, no dumps, in a fresh directory: hard-linked from the
    session's bundled_gen instead of generated again (emulate and verify replace what they write: never through a
    link)."""
    import shared

    cases = bundled_of(bundled_gen, key, *names)
    return shared.linked_copy(bundled_gen, tmp_path_factory.mktemp(key) / "out", cases=cases)


def bundled_emulated(tmp_path_factory, bundled_produced: Path, key: str) -> Path:
    """bundled_suite's copy (<key>.yaml generated and emulated, the dumps copied), the cases found through the
    per-process index (bundled_of)."""
    import shared

    cases = bundled_of(bundled_produced, key)
    return shared.linked_copy(bundled_produced, tmp_path_factory.mktemp(key) / "out", cases=cases)


RECORD_FIELDS = ("case_id", "kind", "dtype", "status", "standard", "reason")


@functools.cache
def _verify_records(produced: Path) -> dict[str, dict]:
    """{case id: verify's record, RECORD_FIELDS of it} of the session's bundled_produced (its verify.json, 23 MB with
    the error data), parsed once per process."""
    return {c["case_id"]: {k: c[k] for k in RECORD_FIELDS}
            for c in json.loads((produced / "verify.json").read_text())["cases"]}


def bundled_records(bundled_produced: Path, key: str) -> list[dict]:
    """verify's record (verify --json's "cases": RECORD_FIELDS) of each case of aclnn_cli/cases/bundled/<key>.yaml,
    as the session's bundled suite judged the emulated kernel's dumps (bundled_produced's verify.json): the verdicts
    bundled_suite's copy would get again, read instead of judged twice."""
    records = _verify_records(bundled_produced)
    return [records[name] for name in bundled_of(bundled_produced, key)]


def passing_bundled_records(bundled_produced: Path, key: str) -> list[dict]:
    """bundled_records, each asserted PASS (every per-op file's proof that the emulated kernel passes its bundled
    cases; the file then pins what is particular to its op: how many of each kind)."""
    cases = bundled_records(bundled_produced, key)
    assert {c["status"] for c in cases} == {"PASS"}, [c["case_id"] for c in cases if c["status"] != "PASS"]
    return cases


def write_dump(case: Path, t: dict, values) -> None:
    """An independent kernel's float32 results (logical order) as the dump of output `t` (a manifest entry): rounded
    half to even into its dtype and written through its view over a copy of its initial storage."""
    buf = harness.storage(case, t).copy()
    with np.errstate(over="ignore"):  # (an infinity in 16 bits is the value, not an accident)
        harness.view(buf, t)[...] = D.round_from_f32(np.asarray(values, np.float32), D.lookup(t["dtype"]), "rint")
    buf.tofile(case / t["dump"])


def not_passing(out: Path, report: Path) -> list[tuple[str, str]]:
    """verify over `out` (helpers.verify_records): the (case id, reason) of every case that did not pass; the cases'
    records written to `report` as verify --json lists them (its "cases", without the error data)."""
    import json

    records = verify_records(out)[1]
    report.write_text(json.dumps({"cases": list(records.values())}))
    return [(cid, c["reason"][:300]) for cid, c in records.items() if c["status"] != "PASS"]


def generated_yaml(tmp_path_factory, text: str, name: str) -> Path:
    """A case file's text generated once into a fresh directory (a module fixture's suite)."""
    from helpers import write_yaml

    root = tmp_path_factory.mktemp(name)
    out = root / "out"
    r = run_cli("gen", write_yaml(root, text, f"{name}.yaml"), "-o", out)
    assert r.exit_code == 0, r.output[-2000:]
    return out


def variant_statuses(suite: Path, tmp_path: Path, variant: str) -> dict[str, str]:
    """case id -> verify's status of a copy of the suite emulated with a defect or legitimate variant."""
    from shared import linked_copy

    work = linked_copy(suite, tmp_path / "variant")  # (emulate and verify replace what they write: never through a link)
    # (-j 1: each variant judges the same suite's cases again in this process, where the relief's reference of a
    # case is kept (judge/rowrelief.py, decision 173); the workers' path is the bundled suite's, test_bundled_bytes)
    assert run_cli("emulate", work, "--defect", variant, "-j", 1).exit_code == 0
    return {cid: c["status"] for cid, c in verify_records(work, jobs=1)[1].items()}


def assert_variant_verdicts(suite: Path, tmp_path: Path, variant: str, changes: dict, legitimate, cases: int,
                            dtypes: int = 3) -> None:
    """A legitimate variant PASSes every case of `suite`; a defect FAILs every case whose name (the id's second
    part) `changes[variant]` lists, in each of the `dtypes` dtypes. `cases`: the suite's case count."""
    status = variant_statuses(suite, tmp_path, variant)
    assert len(status) == cases
    if variant in legitimate:
        assert set(status.values()) == {"PASS"}, status
        return
    changed = {k: v for k, v in status.items() if k.split("-")[1] in changes[variant]}
    assert len(changed) == dtypes * len(changes[variant])
    assert set(changed.values()) == {"FAIL"}, changed


def assert_named_cases_fail(suite: Path, tmp_path: Path, variant: str, fails: dict, cases: int) -> None:
    """A variant not in `fails` (legitimate) PASSes every case of `suite`; a defect FAILs at least the cases whose
    name (the id's second part) fails[variant] lists. `cases`: the suite's case count."""
    status = variant_statuses(suite, tmp_path, variant)
    assert len(status) == cases
    if variant not in fails:
        assert set(status.values()) == {"PASS"}, {k: v for k, v in status.items() if v != "PASS"}
        return
    failed = {k.split("-")[1] for k, v in status.items() if v == "FAIL"}
    assert set(fails[variant]) <= failed, sorted(set(fails[variant]) - failed)


def atk_small_cases_pass(tmp_path: Path, atk: Path, key: str, independent, output: str,
                         quick_elements: int = 100_000, accept=("PASS",)) -> tuple[list, list]:
    """ops-nn's ATK (or TTK) file `atk` converted whole (nothing skipped); its cases of up to `quick_elements` generated,
    emulated and verified (every one PASS, or a status of `accept`), and the test's `independent` loop kernel's dumps
    of `output` passing on each. (every imported case, the names run)."""
    import json
    import math

    r = run_cli("convert", "--skip-unsupported", atk, "-o", tmp_path / "yaml")
    assert r.exit_code == 0 and "skipped" not in r.output, r.output
    docs = [read_yaml(p) for p in sorted((tmp_path / "yaml").glob("*.yaml"))]
    cases = [c for d in docs for c in d["cases"]]
    small = [c["name"] for c in cases if math.prod(c["shape"]) <= quick_elements]
    assert small, f"no case of up to {quick_elements} elements"  # (no --case would generate every case)
    out = tmp_path / "out"
    picks = [a for n in small for a in ("--case", f"{key}-{n}")]
    for args in (("gen", tmp_path / "yaml", "-o", out, *picks), ("emulate", out)):
        r = run_cli(*args)
        assert r.exit_code == 0, r.output[-3000:]
    code, records = verify_records(out)
    ran = list(records.values())
    assert code == 0 and len(ran) == len(small) and {c["status"] for c in ran} <= set(accept), [(cid, c["reason"][:300]) for cid, c in records.items() if c["status"] != "PASS"]
    assert independent_dumps(out, tmp_path / "loops", independent, output) == len(small)
    bad = not_passing(tmp_path / "loops", tmp_path / "loops.json")
    assert {c["status"] for c in json.loads((tmp_path / "loops.json").read_text())["cases"]} <= set(accept), bad
    return cases, small


def independent_dumps(suite: Path, work: Path, compute, output: str = "out") -> int:
    """A copy of `suite` in `work` whose positive cases hold, as the dump of `output`, compute(case, manifest)
    (an independent kernel's float32 results in logical order); how many cases it wrote."""
    import shared

    shared.linked_copy(suite, work)  # (gen's files linked: only the dumps are written, into copies of their own)
    wrote = 0
    for case in sorted(p.parent for p in work.glob("*/case.json")):
        m = harness.load(case)
        if m["expect_status"] == 0:
            write_dump(case, harness.tensors(m)[output], compute(case, m))
            wrote += 1
    return wrote


def goldens_against(out: Path, output: str, oracle) -> tuple[dict, dict]:
    """Assert every positive case's golden of `output` in `out` is oracle(case, manifest) (exact values in logical
    order) rounded once to its dtype, bit for bit; (elements compared, elements gen took through the exact path),
    by dtype name."""
    from oracle import rounded_bits

    compared, exact = {}, {}
    for case in sorted(p.parent for p in out.glob("*/case.json")):
        m = harness.load(case)
        if m["expect_status"] != 0:
            continue
        t = harness.tensors(m)[output]
        dtype = D.lookup(t["dtype"])
        got = harness.view(harness.storage(case, t, "golden"), t).reshape(-1).view(dtype.uint_dtype)
        want = rounded_bits(oracle(case, m), dtype).astype(dtype.uint_dtype)
        assert np.array_equal(got, want), case.name
        compared[dtype.name] = compared.get(dtype.name, 0) + got.size
        exact[dtype.name] = exact.get(dtype.name, 0) + m["golden"].get("exact_fallback_elements", 0)
    return compared, exact
