"""A storage file read in place: its pages in the page cache viewed, not copied out.

Verify reads every golden and dump byte once, and copying them out of the page cache (pread) was a third of a
float32 comparison's time; a view of a memory map reads them where they are. Only for readers that never write into
what they read, and only where MAPPED_READS is on: a file truncated under a map ends its reader by SIGBUS, which the
parent of a forked worker reports (pipeline/forkpool.py turns it on there), where the process itself would die
without a word. The files the tool writes are replaced by a rename, never truncated in place: a map holds the old
file whole.
"""

from __future__ import annotations

import mmap

import numpy as np

from .layout import Layout
from .storage import StorageFile

MAPPED_READS = False
WINDOW = 1 << 22  # bytes mapped at a time: the pages a reader holds resident (4 MiB a file), whatever its size


class Pages:
    """Reads of one open storage file: views of WINDOW-byte maps, a window let go when reads pass it."""

    def __init__(self, f: StorageFile) -> None:
        self.f = f
        self.window: tuple[int, int, np.ndarray] | None = None  # (first byte, end, its bytes)
        self.mappable = True  # (a file system that cannot map, FUSE's say: copied reads instead)

    def read(self, layout: Layout, start: int, stop: int, out: np.ndarray | None = None) -> np.ndarray:
        """Logical elements [start, stop): a read-only view where the view is contiguous and reads may map, else
        StorageFile.read's copy (into `out`)."""
        f, item = self.f, self.f.dtype.itemsize
        lo, hi = start * item, stop * item
        if not (MAPPED_READS and self.mappable and layout.is_contiguous and not f.writable and lo < hi <= f.file_bytes):
            return f.read(layout, start, stop, out)  # (a short file: read() names where it ended)
        w = self.window
        if w is None or lo < w[0] or hi > w[1]:
            base = lo - lo % mmap.ALLOCATIONGRANULARITY
            end = min(max(hi, base + WINDOW), f.file_bytes)
            try:
                pages = mmap.mmap(f.fd, end - base, mmap.MAP_SHARED, mmap.PROT_READ, offset=base)
            except (OSError, ValueError):
                self.mappable = False
                return f.read(layout, start, stop, out)
            w = self.window = (base, end, np.frombuffer(pages, np.uint8))
        data = w[2][lo - w[0]:hi - w[0]]
        f.hash_on_side(lo, data)
        return data.view(f.dtype)
