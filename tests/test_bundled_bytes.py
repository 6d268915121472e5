"""The bundled suite's bytes are unchanged by restructuring (see bundled_digest.py).

This compares the tool with a recorded earlier version of itself: it guards refactors, it does not
show the goldens are right (the oracle tests do).
"""

import os
import subprocess
import sys
from pathlib import Path

from bundled_digest import case_digests, limited_to_baseline, read_reference
from shared import linked_copy


def _differences(found: dict, expected: dict) -> list[str]:
    """Recorded cases that are gone or whose bytes changed. Cases the record does not know (an op or
    a case added since) are not differences: the guard is for what existed."""
    missing = sorted(set(expected) - set(found))
    changed = sorted(k for k in set(found) & set(expected) if found[k] != expected[k])
    return [f"missing {k}" for k in missing] + [f"changed {k}" for k in changed]


def test_two_workers_write_the_same_bytes(bundled_produced):
    """gen --jobs 2 as the oldest x86-64 machine runs it (X86_V2: no AVX), then emulate and verify --jobs 2 as an
    AVX2 machine runs them (AVX2 and FMA3, no AVX-512: the machine of issue 31's finding 18; conftest.py's
    bundled_gen and bundled_produced). The bytes and verdicts are the record's, which an AVX-512 machine wrote:
    NumPy chooses float32 exp and other loops by the CPU's features and the tool must not follow (ops/mathfns.py,
    dtypes.canonical_nans). Where the CPU lacks these features, or is not x86, they ran as the machine is."""
    diffs = _differences(case_digests(bundled_produced), read_reference())
    assert not diffs, f"{len(diffs)} cases differ, first: {diffs[:10]}"


def test_one_worker_writes_the_recorded_bytes_on_a_baseline_cpu(bundled_gen, tmp_path):
    """emulate and verify --jobs 1 of the whole generated suite, with NumPy's dispatch limited to X86_V2 (no AVX) as
    the oldest machine would have it (on the previous code that changed 191 cases): the serial path writes what two
    workers write, and the record holds on a third CPU level. (gen's serial path against its workers: test_scale.py,
    with cases split into ranges; gen's bytes on this CPU level: the test above.)"""
    out = linked_copy(bundled_gen, tmp_path / "out")
    code = ("import sys; from pathlib import Path; from bundled_digest import produce, read_reference; "
            "found = produce(Path(sys.argv[1]), jobs=1, gen=False); ref = read_reference(); "
            "bad = sorted(k for k in ref if k in found and found[k] != ref[k]); print(len(bad), bad[:10])")
    done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True,
                          env={**os.environ, **limited_to_baseline()}, cwd=Path(__file__).parent, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("0 []"), done.stdout
