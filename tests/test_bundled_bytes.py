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


def test_two_workers_write_the_same_bytes(bundled_produced):
    """gen, emulate and verify --jobs 2 (conftest.py's bundled_produced: bundled_digest.produce(out, jobs=2))."""
    diffs = _differences(case_digests(bundled_produced), read_reference())
    assert not diffs, f"{len(diffs)} cases differ, first: {diffs[:10]}"


X86 = platform.machine() in ("x86_64", "AMD64")


def _produce_in_a_process(out: Path, env: dict, gen: bool) -> None:
    code = ("import sys; from pathlib import Path; from bundled_digest import produce, read_reference; "
            f"found = produce(Path(sys.argv[1]), jobs=1, gen={gen}); ref = read_reference(); "
            "bad = sorted(k for k in ref if k in found and found[k] != ref[k]); print(len(bad), bad[:10])")
    done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=Path(__file__).parent, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("0 []"), done.stdout


def _limited(features: str, blas: str) -> dict:
    """NumPy's dispatch limited as a CPU with only `features` would have it (NPY_ENABLE_CPU_FEATURES), and
    OpenBLAS's kernels likewise (np.dot sums squares for the metrics)."""
    import numpy as np

    if not np._core._multiarray_umath.__cpu_features__.get(features):  # (NumPy refuses to start with it)
        pytest.skip(f"this CPU lacks {features}")
    return {"NPY_ENABLE_CPU_FEATURES": features, "OPENBLAS_CORETYPE": blas}


def test_one_worker_writes_the_recorded_bytes_on_a_baseline_cpu(tmp_path):
    """gen, emulate and verify --jobs 1, the whole suite: the serial path writes what two workers write, and the
    record holds on any CPU. NumPy chooses float32 exp and other loops by the CPU's features (AVX-512 here,
    AVX2 or baseline SSE elsewhere) and the tool must not follow (ops/mathfns.py, dtypes.canonical_nans): on x86
    this runs with the dispatch limited to X86_V2 (no AVX), as the oldest machine would have it; on the
    previous code that changed 191 cases. Elsewhere (ARM) it runs as the machine is."""
    _produce_in_a_process(tmp_path / "out", _limited("X86_V2", "Prescott") if X86 else {}, gen=True)


@pytest.mark.skipif(not X86, reason="NumPy's x86 feature names (X86_V3)")
def test_an_avx2_machine_emulates_and_judges_the_recorded_bytes(bundled_gen, tmp_path):
    """The machine of issue 31's finding 18 (AVX2 and FMA3, no AVX-512: X86_V3, Haswell's BLAS): emulate and verify
    of the session's generated suite. (gen is the same code under either limit; the baseline test above runs it
    under the narrower one.)"""
    from shared import linked_copy

    env = _limited("X86_V3", "Haswell")
    _produce_in_a_process(linked_copy(bundled_gen, tmp_path / "out"), env, gen=False)
