"""A verdict printed to the console only measures what the verdict reads (judge/comparison.py): the ulp errors and
the RMSE of a case of more than a chunk, which no console line shows, are left out unless the standard reads them
(a one-chunk case is measured whole, as the small cases' batch measures it: tests/test_small_batch.py holds the two
paths to one result); a results file, the HTML report's data and the CSV rows always have every metric."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from helpers import run_cli, write_yaml

SUITE = """
op: aclnnSiluBackward
cases:
  - {name: big, dtype: [float32, float16, bfloat16], shape: [300001], seed: 4}
"""
SHOWN = ("elements", "compared", "special_mismatches", "violations", "max_abs_error", "max_rel_error", "mere", "mare",
         "error_balance", "zero_golden_share", "relieved")
UNSHOWN = ("rmse", "max_ulp_error", "mean_ulp_error")


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("metrics")
    out = root / "out"
    assert run_cli("gen", write_yaml(root, SUITE), "-o", out).exit_code == 0
    assert run_cli("emulate", out, "--defect", "round-half-away").exit_code == 0  # (errors of every kind to measure)
    return out


def _judged(out: Path, **options) -> dict[str, dict]:
    from aclnn_cli.casedir.dirs import find_cases
    from aclnn_cli.judge.verify import Options, verify_dirs

    run = verify_dirs(find_cases(out), Options(**options), jobs=2)
    return {c.case_id: c.to_json(errors=False) for c in run.cases}


@pytest.mark.parametrize("standard", [None, "mere-mare", "allclose", "thousandth", "ulp"])
def test_the_console_verdict_is_the_measured_verdict(suite, standard, monkeypatch):
    """The same statuses, reasons, verdict rows and shown metrics, bit for bit, as the same run with the ulp errors
    measured (the standard made to read them); the ulp errors and RMSE of the dense float32 chunks measured where the
    standard reads them (ulp), else NaN."""
    import dataclasses

    from aclnn_cli.judge import judging
    from aclnn_cli.standards.rules import DEFAULT_STANDARD, STANDARDS

    plain = _judged(suite, standard=standard)
    name = standard or DEFAULT_STANDARD
    monkeypatch.setitem(STANDARDS, name, dataclasses.replace(STANDARDS[name], reads_ulps=True))
    monkeypatch.setattr(judging, "_STANDARDS", {})  # (the standards a process has looked up)
    full = _judged(suite, standard=standard)
    assert len(plain) == 3 and plain.keys() == full.keys()
    for cid, p in plain.items():
        f = full[cid]
        assert (p["status"], p["reason"], p["rows"]) == (f["status"], f["reason"], f["rows"])
        assert {k: p["metrics"][k] for k in SHOWN} == {k: f["metrics"][k] for k in SHOWN}
        assert all(math.isfinite(f["metrics"][k]) for k in UNSHOWN)
        unshown = {k: p["metrics"][k] for k in UNSHOWN}
        if standard == "ulp" or "float32" not in cid:  # (16-bit chunks mostly equal to the golden are judged from
            assert unshown == {k: f["metrics"][k] for k in UNSHOWN}  # the elements that differ, ulps and all)
        else:
            assert all(math.isnan(float(v)) for v in unshown.values()), p["metrics"]  # (to_json: "nan")


@pytest.mark.parametrize("options", [{"error_data": True}, {"error_rows": True}])
def test_a_run_writing_files_measures_every_metric(suite, options):
    """--json and --html (error_data) and --csv (error_rows) runs: every metric a number."""
    for case in _judged(suite, **options).values():
        assert all(math.isfinite(case["metrics"][k]) for k in UNSHOWN), case["metrics"]


def test_verify_json_writes_every_metric(suite, tmp_path):
    assert run_cli("verify", suite, "--json", tmp_path / "r.json").exit_code == 0
    for case in json.loads((tmp_path / "r.json").read_text())["cases"]:
        assert all(isinstance(case["metrics"][k], float) and math.isfinite(case["metrics"][k]) for k in UNSHOWN)
