"""Process-wide tuning for chunked numerics.

glibc serves every allocation over 128 KiB with a fresh mmap and returns it with munmap on
free, so each chunk-sized NumPy temporary costs a round of page faults: measured here, that
was 40% of verify and half of gen. Raising the thresholds keeps those temporaries on the
heap. Memory stays bounded: the heap only holds one chunk's temporaries (tens of MiB).
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
_done = False


def tune_allocator() -> None:
    """Keep chunk-sized temporaries on the heap (glibc only; a no-op elsewhere)."""
    global _done
    if _done:
        return
    _done = True
    try:
        libc = ctypes.CDLL(None)  # (the process's own symbols, libc's among them: ctypes.util.find_library
        # would import subprocess and tempfile, a tenth of a small command's start)
        libc.mallopt(M_MMAP_THRESHOLD, 256 << 20)
        libc.mallopt(M_TRIM_THRESHOLD, 512 << 20)
    except (OSError, AttributeError):
        pass
