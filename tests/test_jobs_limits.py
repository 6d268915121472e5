"""-j is refused past a sane maximum (one error, exit 2, no traceback and no hang) and a pool is never larger
than the work: `-j 99999999999999999999` was an OverflowError traceback, `-j 100000` on one large case hung."""

from __future__ import annotations

import pytest

from helpers import run_cli, write_yaml
from aclnn_cli.cli.common import MAX_JOBS
from aclnn_cli.pipeline import stages as pipeline


@pytest.mark.parametrize("command", ["gen", "emulate", "verify"])
@pytest.mark.parametrize("jobs", [str(MAX_JOBS + 1), "100000", "99999999999999999999"])
def test_too_many_jobs_is_refused(tmp_path, command, jobs):
    args = ["gen", write_yaml(tmp_path, "op: aclnnSiluBackward\ncases:\n  - {name: a, shape: [4]}\n"), "-o",
            tmp_path / "out"] if command == "gen" else [command, tmp_path]
    r = run_cli(*args, "-j", jobs)
    assert r.exit_code == 2 and f"is not in the range 1<=x<={MAX_JOBS}" in r.output and "Traceback" not in r.output


def test_a_large_case_gets_no_more_workers_than_its_ranges(tmp_path, monkeypatch):
    """run_stage_on_dirs' pool for cases too large for one worker: sized by their ranges, not by -j."""
    sizes = []
    real = pipeline.Runner

    class Counting(real):
        def __init__(self, jobs, **how):
            sizes.append(jobs)
            super().__init__(jobs, **how)

    monkeypatch.setattr(pipeline, "Runner", Counting)
    text = "op: aclnnSiluBackward\ncases:\n  - {name: big, dtype: float32, shape: [4500000], seed: 3}\n" \
           "  - {name: small, dtype: float32, shape: [8], seed: 3}\n"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / "out", "-j", 1).exit_code == 0
    assert run_cli("emulate", tmp_path / "out", "-j", MAX_JOBS).exit_code == 0
    units = pipeline.units([4500000])
    assert sizes and max(sizes) <= units < MAX_JOBS, (sizes, units)
