"""Small files read whole: one open, one read where a chunked reader would make several calls.

For thousands of small cases the calls around each read cost more than the reads (issue 9). Large
files keep storage.py's chunked, bounded-memory paths.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import numpy as np

from .errors import UserError
from .layout import Layout, source_positions
from .regular import TooLarge, read_regular
from .storage import changed, open_storage, sha256_file, size_problem

SMALL_FILE = 1 << 20  # storage files up to this many bytes may be read whole (LoadedFile)


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
        return self.map[layout.storage_index(np.arange(start, stop))]

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


def regular_file_bytes(path: str, limit: int) -> bytes | None:
    """A regular file's bytes, if it is one and holds at most `limit`; else None (also if it cannot be
    read). One open, one fstat, one read; a FIFO in a file's place is not waited on (regular.py)."""
    try:
        return read_regular(path, limit)
    except OSError:
        return None


def sha256_of_file(path: str) -> str | None:
    """The sha256 of a regular file, or None if it is not one (or cannot be read). Small files are read
    with one read (regular_file_bytes); larger ones in blocks."""
    try:
        return hashlib.sha256(read_regular(path, SMALL_FILE)).hexdigest()
    except TooLarge:
        pass
    except OSError:
        return None
    try:
        return sha256_file(Path(path))
    except OSError:
        return None


def bounded_regular_bytes(path: str, limit: int, what: str) -> bytes | None:
    """A small regular file's bytes, or None if there is none; anything else is one UserError naming it.

    For files another program writes beside a case (a runner's status.txt, run-verdict.txt): a FIFO or
    device in a file's place must not hang the run (O_NONBLOCK, then fstat), and a huge file is refused
    after reading at most `limit` + 1 bytes.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"cannot read the {what}: {exc.strerror}", where=path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            from .regular import kind

            raise UserError(f"{what} is {kind(st.st_mode)}, not a regular file", where=path)
        parts, size = [], 0
        while size <= limit:  # (a regular file that grows meanwhile still ends here)
            block = os.read(fd, limit + 1 - size)
            if not block:
                break
            parts.append(block)
            size += len(block)
            if size == st.st_size:  # (all it held when looked at: no read to find its end)
                break
    except OSError as exc:
        raise UserError(f"cannot read the {what}: {exc.strerror}", where=path) from None
    finally:
        os.close(fd)
    if size > limit:
        raise UserError(f"{what} holds more than {limit} bytes", where=path)
    return b"".join(parts)
