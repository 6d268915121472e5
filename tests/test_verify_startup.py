"""What a verify process of small elementwise cases pays for besides judging them (issue 31: whole processes of
2,000 small cases): the modules it imports, and the interpreter's exit.

Each test runs the real command line in a fresh interpreter (`aclnn_cli.__main__.console`, as the installed
`aclnn-cli` runs it) and reads, from an atexit hook, what the process holds when the command is done."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import run_cli, write_yaml

# Imported by nothing a verify of elementwise cases on one process runs: the process pool's futures (forked
# workers and a one-process run never make one), the spill file's tempfile (no error data is kept without
# --json/--html), shutil (no directory is replaced), csv (no --csv-errors), difflib (no unknown name to suggest
# for) and the other families' modules (an elementwise op's declaration never reaches their checks).
NOT_IMPORTED = {"concurrent.futures", "tempfile", "shutil", "csv", *(f"aclnn_cli.ops.families.{f}" for f in (
    "channels", "classes", "contraction", "segments", "split", "window"))}

_CHILD = """
import atexit, gc, json, sys
def _report():
    print(json.dumps({"modules": sorted(sys.modules), "finalised": False}), file=sys.__stderr__)
class _Torn:
    def __del__(self, write=__import__("os").write):  # (Python's own exit tears __main__ down after the atexit
        write(2, b'\\n{"finalised": true}\\n')   # functions: this line comes last; sys and json may be gone)
_kept = _Torn()
atexit.register(_report)
sys.argv = ["aclnn-cli", *sys.argv[1:]]
from aclnn_cli.__main__ import console
console()
"""


def _verify_process(out, jobs: int) -> tuple[int, dict]:
    """(exit status, what the atexit hook saw) of `aclnn-cli verify OUT -j JOBS` in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", _CHILD, "verify", str(out), "-j", str(jobs)], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin"})
    return proc.returncode, json.loads(proc.stderr.strip().splitlines()[-1])


def _suite(tmp_path, cases: int = 24):
    out = tmp_path / "out"
    lines = ["op: aclnnSiluBackward", "defaults: {dtype: float16, shape: [256]}", "cases:"]
    lines += [f"  - {{name: c{i:02d}, seed: {i}}}" for i in range(cases)]
    assert run_cli("gen", write_yaml(tmp_path, "\n".join(lines) + "\n"), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    return out


def test_verify_of_small_elementwise_cases_imports_nothing_it_does_not_use(tmp_path):
    out = _suite(tmp_path)
    for jobs in (1, 2):
        code, seen = _verify_process(out, jobs)
        assert code == 0  # (every case judged, and passed: the run did its work)
        assert "aclnn_cli.ops.elementwise.silu_backward" in seen["modules"]
        assert NOT_IMPORTED.isdisjoint(seen["modules"]), sorted(NOT_IMPORTED & set(seen["modules"]))


def test_the_exit_tears_nothing_down(tmp_path):
    """After the command the process ends without Python's teardown (__main__._leave): its atexit functions run,
    then no module is torn down and no last collection runs (an object __main__ keeps is never finalised; Python's
    own exit would). 10-30 ms of a 0.4 s verify of 2,000 small cases."""
    code, seen = _verify_process(_suite(tmp_path, cases=4), 1)
    assert code == 0 and seen["finalised"] is False
