"""The bundled suite's bytes are unchanged by restructuring (see bundled_digest.py).

This compares the tool with a recorded earlier version of itself: it guards refactors, it does not
show the goldens are right (the oracle tests do).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bundled_digest import X86, case_digests, limited_to, read_reference


def _differences(found: dict, expected: dict) -> list[str]:
    """Recorded cases that are gone or whose bytes changed. Cases the record does not know (an op or
    a case added since) are not differences: the guard is for what existed."""
    missing = sorted(set(expected) - set(found))
    changed = sorted(k for k in set(found) & set(expected) if found[k] != expected[k])
    return [f"missing {k}" for k in missing] + [f"changed {k}" for k in changed]


def test_two_workers_write_the_same_bytes(bundled_produced):
    """gen --jobs 2, then emulate and verify --jobs 2 as an AVX2 machine (AVX2 and FMA3, no AVX-512: the machine of
    issue 31's finding 18) runs them (conftest.py's bundled_produced). The bytes and verdicts are the record's:
    emulate and verify on such a machine write what this one wrote when it was recorded (an AVX-512 CPU). Where the
    CPU lacks AVX2, or is not x86, they ran as the machine is."""
    diffs = _differences(case_digests(bundled_produced), read_reference())
    assert not diffs, f"{len(diffs)} cases differ, first: {diffs[:10]}"


def _produce_in_a_process(out: Path, env: dict, gen: bool) -> None:
    code = ("import sys; from pathlib import Path; from bundled_digest import produce, read_reference; "
            f"found = produce(Path(sys.argv[1]), jobs=1, gen={gen}); ref = read_reference(); "
            "bad = sorted(k for k in ref if k in found and found[k] != ref[k]); print(len(bad), bad[:10])")
    done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=Path(__file__).parent, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("0 []"), done.stdout


def _baseline() -> dict:
    if not X86:
        return {}
    env = limited_to("X86_V2", "Prescott")
    if env is None:
        pytest.skip("this CPU lacks X86_V2")
    return env


def test_one_worker_writes_the_recorded_bytes_on_a_baseline_cpu(tmp_path):
    """gen, emulate and verify --jobs 1, the whole suite: the serial path writes what two workers write, and the
    record holds on any CPU. NumPy chooses float32 exp and other loops by the CPU's features (AVX-512 here,
    AVX2 or baseline SSE elsewhere) and the tool must not follow (ops/mathfns.py, dtypes.canonical_nans): on x86
    this runs with the dispatch limited to X86_V2 (no AVX), as the oldest machine would have it; on the
    previous code that changed 191 cases. Elsewhere (ARM) it runs as the machine is."""
    _produce_in_a_process(tmp_path / "out", _baseline(), gen=True)
