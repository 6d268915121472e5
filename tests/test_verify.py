"""verify end to end: the bundled suite passes correct kernels and fails broken dumps, with clear reasons."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest


from aclnn_cli.casedir import dirs as casedirs
from aclnn_cli.cli.main import BUNDLED
from aclnn_cli.ops import OPS
from aclnn_cli.ops.families import Split

from helpers import manifest, read_storage, run_cli, write_yaml
from shared import linked_copy
import harness
from independent_kernels import covers, run as independent


@pytest.fixture(scope="module")
def suite(bundled_gen):
    return bundled_gen  # (conftest.py: gen of the bundled suite, shared by the session; read only)


# Known gaps of issue 19's bundled cases (closing note): no 1-element or over-a-million case yet.
SIZES_MISSING: set[str] = set()  # (ops without a 1-element and a 1M+ bundled case: none)


def test_bundled_suite_covers_every_op_dtype_and_a_large_and_tiny_shape():
    from aclnn_cli.cases.loader import load_cases
    from aclnn_cli.golden.derived import is_derived

    cases = load_cases([BUNDLED])
    ops = {c.op.name for c in cases}
    assert ops == set(OPS)  # every registered op has bundled cases
    for op in ops:
        mine = [c for c in cases if c.op.name == op and c.expect_status == 0]
        declared = {d for dtypes in OPS[op].products.values() for d in dtypes}  # (integers too: ThresholdBackward)
        assert {c.output.dtype.name for c in mine} == declared, op  # (L2NormalizeGrad: no bfloat16 on the 950)
        # (a case's size: its largest tensor, so an op whose outputs are per channel is sized by its input)
        # (a derived input is not counted: MaxPool2dWithMask's int8 mask outgrows a one-element self's 256 bytes)
        sizes = [max(t.layout.numel for t in c.tensors if not t.null and not is_derived(t)) for c in mine]
        if op not in SIZES_MISSING:  # (the smallest case of a split op holds one element of each half: 2)
            tiny = 2 if isinstance(OPS[op].family, Split) else 1
            assert tiny in sizes and max(sizes) > 1_000_000, op
        assert any(c.name == "special_values" or c.name == "edges" for c in mine)


def test_emulated_device_passes_the_whole_bundled_suite(bundled_produced):
    """(conftest.py's bundled_produced: the bundled suite emulated, then verified, each exiting 0)"""
    data = json.loads((bundled_produced / "verify.json").read_text())
    assert data["summary"]["PASS"] == data["summary"]["total"] > 90, \
        [c for c in data["cases"] if c["status"] != "PASS"][:3]
    assert data["summary"]["total"] == len(casedirs.find_cases(bundled_produced))


def test_independent_fp32_implementation_passes_the_whole_bundled_suite(suite, tmp_path):
    from aclnn_cli.judge.verify import verify_dirs

    mine = [d.name for d in casedirs.find_cases(suite) if manifest(d)["expect_status"] == 0 and covers(manifest(d)["op"])]
    work = linked_copy(suite, tmp_path / "copy", mine)  # (the dumps written below are new files in the copy)
    positive = [work / name for name in mine]
    for d in positive:
        harness.run_case(d, independent)
    run = verify_dirs(positive)
    bad = [(c.case_id, c.status, c.reason) for c in run.cases if c.status != "PASS"]
    assert not bad and len(run.cases) > 150


@pytest.fixture()
def one_case(tmp_path):
    text = "op: aclnnLogSigmoidBackward\ncases:\n  - {name: v, dtype: float16, shape: [64, 64], seed: 11}\n"
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    case = out / "log_sigmoid_backward-v"
    return out, case, manifest(case)


def _dump(case, m):
    out = next(t for t in m["tensors"] if t["role"] == "output")
    return case / out["dump"], read_storage(case, out, "dump"), read_storage(case, out, "golden")


def test_one_element_a_few_ulps_beyond_tolerance_fails_and_says_where(one_case):
    out, case, m = one_case
    path, dump, gold = _dump(case, m)
    g = gold.astype(np.float64)
    i = int(np.flatnonzero((np.abs(g) >= 0.25) & (np.abs(g) < 0.26))[0])
    # fp16 at |g| in [0.25, 0.26): one ulp is 2^-12, i.e. ~2^-10/1.04 relative; 10T = 10 * 2^-10.
    bits = gold.view(np.uint16).copy()
    bits[i] += 11  # 11 ulps: relative 11 * 2^-12 / 0.26 > 10T
    bits.view(np.float16).tofile(path)
    result = run_cli("verify", out)
    assert result.exit_code == 1
    assert "MARE" in result.output and f"element {i}" in result.output
    assert f"[{i // 64}, {i % 64}]" in result.output  # coordinates of the worst element
    bits[i] -= 3  # 8 ulps: relative <= 8 * 2^-12 / 0.25 = 8 * 2^-10 < 10T
    bits.view(np.float16).tofile(path)
    assert run_cli("verify", out).exit_code == 0


def test_nan_where_a_number_is_expected_fails(one_case):
    out, case, m = one_case
    path, dump, gold = _dump(case, m)
    bad = gold.copy()
    bad[100] = np.nan
    bad.tofile(path)
    result = run_cli("verify", out)
    assert result.exit_code == 1 and "NaN/Inf mismatches" in result.output and "first at element 100" in result.output


def test_truncated_dump_is_named_and_exit_2(one_case):
    out, case, m = one_case
    path, dump, gold = _dump(case, m)
    path.write_bytes(gold.tobytes()[:-2])
    result = run_cli("verify", out)
    assert result.exit_code == 2
    assert "dump has 8190 bytes, expected 8192" in result.output and "Traceback" not in result.output


def test_missing_dump_is_missing_and_exit_1(one_case):
    out, case, m = one_case
    _dump(case, m)[0].unlink()
    result = run_cli("verify", out, "--json", out / "v.json")
    assert result.exit_code == 1 and "MISSING" in result.output
    assert json.loads((out / "v.json").read_text())["cases"][0]["status"] == "MISSING"


def test_verify_of_a_directory_without_cases_is_exit_2(tmp_path):
    result = run_cli("verify", tmp_path)
    assert result.exit_code == 2 and "no generated cases" in result.output


def test_other_standards_are_selectable(one_case):
    out, case, m = one_case
    for std in ("allclose", "absolute-threshold"):
        result = run_cli("verify", out, "--standard", std, "--json", out / "v.json")
        assert json.loads((out / "v.json").read_text())["cases"][0]["standard"] == std
        assert result.exit_code in (0, 1)


def test_the_worst_elements_are_read_from_files_opened_once_and_say_their_values(one_case, monkeypatch):
    """A failing case's worst elements (the report's lines, --json's `worst`) each give the element's inputs,
    golden and dump values as the files hold them at its coordinates; the files are opened once for all of them
    (judge/elements.describe_elements), not once per element."""
    from aclnn_cli.judge import elements
    from aclnn_cli.judge.compare import WORST_K
    from helpers import logical

    out, case, m = one_case
    path, dump, gold = _dump(case, m)
    (-gold).tofile(path)  # (every element sign-flipped: every one fails)
    opened = []

    class Counted(elements.StorageFile):
        def __init__(self, path, *args, **kwargs):
            opened.append(Path(path).name)
            super().__init__(path, *args, **kwargs)

    monkeypatch.setattr(elements, "StorageFile", Counted)
    result = run_cli("verify", out, "-j", "1", "--json", out / "v.json")
    assert result.exit_code == 1, result.output
    worst = json.loads((out / "v.json").read_text())["cases"][0]["worst"]
    inputs = [t for t in m["tensors"] if t["role"] == "input" and t.get("file")]
    output = next(t for t in m["tensors"] if t["role"] == "output")
    assert len(worst) == WORST_K and len(inputs) == 3  # (gradOutput, self, buffer)
    assert sorted(opened) == sorted([output["dump"], output["golden"], *(t["file"] for t in inputs)])
    values = {t["name"]: logical(case, t).astype(np.float64) for t in inputs}
    dumped, golden = (logical(case, output, key).astype(np.float64) for key in ("dump", "golden"))
    for w in worst:
        at = tuple(w["coords"])
        assert w["index"] == np.ravel_multi_index(at, dumped.shape)
        assert w["expected"] == golden[at] != 0 and w["actual"] == dumped[at] == -golden[at]
        assert w["inputs"] == {name: v[at] for name, v in values.items()}
        assert w["abs_error"] == abs(w["actual"] - w["expected"]) and w["rel_error"] > 1
