"""Small files read whole: one open, one read where a chunked reader would make several calls.

For thousands of small cases the calls around each read cost more than the reads. Large
files keep storage.py's chunked, bounded-memory paths.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from ..errors import UserError
from .layout import Layout, source_positions
from .storage import changed, open_storage, size_problem



class LoadedFile:
    """A small storage file read whole: one open, one fstat, one read; StorageFile's reading interface.

    For thousands of small cases, where the calls around each read cost more than the reads: the
    size is checked on open (same messages as StorageFile), and the checksum is hashed from the
    same bytes. The array is read-only (it is the bytes read): reads return views of it.
    """

    def __init__(self, path, dtype: np.dtype, size: int, sha256: str | None = None, what: str = "file") -> None:
        self.path, self.dtype, self.size = path, np.dtype(dtype), size
        self.expected_sha256, self.what = sha256, what
        nbytes = size * self.dtype.itemsize
        fd, st = open_storage(path, what)
        try:
            if st.st_size != nbytes:
                raise UserError(f"{what} {size_problem(st.st_size, size, self.dtype)}", where=str(path))
            data = os.read(fd, nbytes) if nbytes else b""
            while len(data) < nbytes:  # (a regular file gives it all in one read)
                more = os.read(fd, nbytes - len(data))
                if not more:
                    raise UserError(f"file ended at byte {len(data)}", where=str(path))
                data += more
        finally:
            os.close(fd)
        self.data = data
        self.map = np.frombuffer(data, dtype=self.dtype)

    def check_sha256(self) -> None:
        if self.expected_sha256 is not None and hashlib.sha256(self.data).hexdigest() != self.expected_sha256:
            raise changed(self.what, self.path)

    def close(self) -> None:
        pass

    def read(self, layout: Layout, start: int, stop: int, out: np.ndarray | None = None) -> np.ndarray:
        """StorageFile.read; a view of the bytes read (no copy into `out`)."""
        if layout.is_contiguous:
            return self.map[start:stop]
        return self.map[layout.range_index(start, stop)]

    def gather(self, layout: Layout, out_shape: tuple[int, ...], start: int, stop: int) -> np.ndarray:
        if layout.is_contiguous and layout.shape == tuple(out_shape):
            return self.map[start:stop]
        return self.map[source_positions(layout, out_shape, slice(start, stop))]

    def gather_at(self, layout: Layout, out_shape: tuple[int, ...], flat: np.ndarray) -> np.ndarray:
        return self.map[source_positions(layout, out_shape, flat)]


class OpenedOnUse(dict):
    """Files by name, each opened when first used (opener(name)): a case whose inputs need no hash (statcache.py)
    and no relief reads none of them."""

    def __init__(self, opener) -> None:
        super().__init__()
        self._opener = opener

    def __missing__(self, name: str):
        self[name] = f = self._opener(name)
        return f
