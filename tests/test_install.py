"""A plain `pip install .` works: the wheel carries the bundled cases, and the whole loop runs from it.

Builds the wheel, installs it into a fresh venv (dependencies from the package index, through pip's
cache), and runs gen with no case files (the bundled suite, read from the installed package), emulate and
verify outside this checkout: the smallest positive case and the smallest contract case of every bundled op
(--case), so that every op's module runs from the wheel. That the whole bundled suite passes is
test_verify.py's test_emulated_device_passes_the_whole_bundled_suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = ROOT / "aclnn_cli" / "cases" / "bundled"
NETWORK_HINTS = ("Could not find a version", "Failed to establish a new connection", "Temporary failure in name",
                 "No matching distribution", "Network is unreachable", "ConnectionError")


def _run(args, cwd, timeout=900):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_runs_the_bundled_suite(tmp_path):
    wheels = tmp_path / "wheels"
    # (from a copy of the tracked files: setuptools reuses a checkout's build/ directory, whose stale copies of
    # changed modules went into the wheel)
    source = tmp_path / "source"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)  # (its pip builds the wheel too: make's venv has none of its own)
    py = env_dir / "bin" / "python"
    built = _run([str(py), "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), str(source)], cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = wheels.glob("aclnn_cli-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {f"aclnn_cli/cases/bundled/{p.name}" for p in BUNDLED.glob("*.yaml")} <= set(names)
    assert "aclnn_cli/ops/families/scatter.py" in names and "aclnn_cli/ops/groups/group_norm_backward.py" in names

    # (--no-compile: pip would compile every installed module, NumPy's thousand among them, which proves nothing here)
    installed = _run([str(py), "-m", "pip", "install", "--quiet", "--no-compile", str(wheel)], cwd=tmp_path)
    if installed.returncode != 0 and any(h in installed.stderr for h in NETWORK_HINTS):
        pytest.skip(f"the package index is not reachable: {installed.stderr.strip().splitlines()[-1]}")
    assert installed.returncode == 0, installed.stderr[-2000:]

    cli = env_dir / "bin" / "aclnn-cli"
    work = tmp_path / "elsewhere"  # not the checkout: nothing may come from the source tree
    work.mkdir()
    picks = _smallest_cases()
    for args in (["gen", "-o", "out", *(a for c in picks for a in ("--case", c))], ["emulate", "out"],
                 ["verify", "out", "--json", "v.json", "--failures-only"]):
        r = _run([str(cli), *args], cwd=work)
        assert r.returncode == 0, (args, r.stdout[-2000:], r.stderr[-2000:])
    assert "all cases pass" in r.stdout
    import json
    report = json.loads((work / "v.json").read_text())
    summary = report["summary"]
    assert summary["total"] == len(picks) and summary["PASS"] + summary["MISTRUSTED"] == summary["total"]
    assert {c["case_id"] for c in report["cases"]} == set(picks)


def _smallest_cases() -> list[str]:
    """The ids of each bundled op's smallest case with elements that expects success, and of its smallest
    contract case (one expecting a status)."""
    from aclnn_cli.cases.loader import load_cases

    picks = {}
    for c in sorted(load_cases([BUNDLED]), key=lambda c: (c.numel, c.case_id)):
        key = (c.op.name, c.expect_status == 0)
        if key not in picks and (c.numel > 0 or c.expect_status != 0):
            picks[key] = c.case_id
    assert {op for op, positive in picks if positive} == {op for op, _ in picks}  # (every op: a case that runs)
    return sorted(picks.values())
