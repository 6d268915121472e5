"""The bundled suite's bytes are unchanged by restructuring (see bundled_digest.py).

This compares the tool with a recorded earlier version of itself: it guards refactors, it does not
show the goldens are right (the oracle tests do).
"""

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from bundled_digest import case_digests, produce, read_reference


def _differences(found: dict, expected: dict) -> list[str]:
    """Recorded cases that are gone or whose bytes changed. Cases the record does not know (an op or
    a case added since) are not differences: the guard is for what existed."""
    missing = sorted(set(expected) - set(found))
    changed = sorted(k for k in set(found) & set(expected) if found[k] != expected[k])
    return [f"missing {k}" for k in missing] + [f"changed {k}" for k in changed]


def test_bundled_suite_bytes_match_the_recorded_digests(tmp_path):
    diffs = _differences(produce(tmp_path / "one", jobs=1), read_reference())
    assert not diffs, f"{len(diffs)} cases differ, first: {diffs[:10]}"


def test_two_workers_write_the_same_bytes(bundled_produced):
    """gen, emulate and verify --jobs 2 (conftest.py's bundled_produced: bundled_digest.produce(out, jobs=2))."""
    diffs = _differences(case_digests(bundled_produced), read_reference())
    assert not diffs, f"{len(diffs)} cases differ, first: {diffs[:10]}"


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="NumPy's x86 feature names (X86_V2, X86_V3)")
@pytest.mark.parametrize("features, blas", [("X86_V2", "Prescott"), ("X86_V3", "Haswell")])
def test_the_same_bytes_whatever_numpys_cpu_dispatch(tmp_path, features, blas):
    """The record holds on any CPU: NumPy chooses float32 exp and other loops by the CPU's features (AVX-512
    here, AVX2 or baseline SSE elsewhere), and the emulated device must not follow (ops/mathfns.py,
    dtypes.canonical_nans). NPY_ENABLE_CPU_FEATURES limits the dispatch as a machine without AVX-512 (X86_V3:
    AVX2, FMA3) or without AVX (X86_V2) would have it, and OPENBLAS_CORETYPE the BLAS kernels (np.dot sums
    squares for the metrics); on the previous code X86_V2 changed 191 cases."""
    code = ("import sys; from pathlib import Path; from bundled_digest import produce, read_reference; "
            "found = produce(Path(sys.argv[1])); ref = read_reference(); "
            "bad = sorted(k for k in ref if k in found and found[k] != ref[k]); print(len(bad), bad[:10])")
    import numpy as np

    if not np._core._multiarray_umath.__cpu_features__.get(features):  # (NumPy refuses to start with it)
        pytest.skip(f"this CPU lacks {features}")
    env = {**os.environ, "NPY_ENABLE_CPU_FEATURES": features, "OPENBLAS_CORETYPE": blas}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out")], capture_output=True, text=True, env=env,
                          cwd=Path(__file__).parent, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("0 []"), done.stdout
