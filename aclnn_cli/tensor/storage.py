"""Raw tensor storage files: atomic writes, memory-mapped reads, and view gather/scatter.

A .bin file is a tensor's storage: little endian, no header. Views map
logical elements to storage positions through `Layout`.
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import stat
from pathlib import Path

import numpy as np

from .dtypes import DType
from ..errors import UserError
from .layout import Layout, source_positions
from ..files.regular import NotRegular, kind, open_regular

WRITE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC  # open_regular's flags for a file written from the start
CHUNK = 1 << 16  # elements per processing chunk: bounds memory, keeps temporaries in cache (measured best)


def safe_child(root: Path, name: str) -> Path:
    """root/name, refusing any name that would leave root (a plain name: no separator, not . or ..).

    A string check, not a resolve(): it runs for every case, and a name without separators cannot
    climb out of its directory.
    """
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise UserError(f"'{name}' would leave the output directory", where=str(root))
    return Path(root) / name


def atomic_write_text(path: Path, text) -> None:
    """Write a text file via a temporary name and a rename; creates missing parent directories.

    text: a str, or an iterable of str written one after another (a large report need not be one string).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        try:
            fd = open_regular(tmp, WRITE)[0]  # (a FIFO there: refused, not waited on)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_regular(tmp, WRITE)[0]
        if isinstance(text, str):  # (its bytes written as they are: a run writes a status file per case, and a text
            try:  # stream's set-up cost more than the write)
                data = memoryview(text.encode("utf-8"))
                while data:
                    data = data[os.write(fd, data):]
            finally:
                os.close(fd)
        else:
            with open(fd, "w", encoding="utf-8") as f:
                f.writelines(text)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise WriteError(f"cannot write: {exc.strerror}", where=str(path)) from None
        raise


class IntegrityError(UserError):
    """A file gen wrote no longer has the checksum the manifest recorded."""


class WriteError(UserError):
    """The machine would not take a write (a full disk, a read-only file system): it stops the run."""


class StorageFile:
    """A storage .bin opened for chunked reads and writes of a view.

    Contiguous views use pread/pwrite into fresh buffers, so memory stays bounded by the
    chunk (memory-mapped pages would count toward the process's RSS); strided views gather
    and scatter through a memory map.

    With `sha256`, the file's checksum is computed on the side of the reads that walk it in
    order from the start (the common, contiguous case), so checking it costs no extra pass;
    `check_sha256` hashes whatever part the reads did not cover and compares.
    """

    def __init__(self, path: Path, dtype: np.dtype, size: int, writable: bool = False,
                 sha256: str | None = None, what: str = "file", exact_size: bool = False) -> None:
        self.path, self.dtype, self.size = path, np.dtype(dtype), size
        self.fd, st = open_storage(path, what, os.O_RDWR if writable else os.O_RDONLY)
        self.file_bytes = st.st_size
        problem = size_problem(st.st_size, size, self.dtype) if exact_size else None
        if problem:
            os.close(self.fd)
            raise UserError(f"{what} {problem}", where=str(path))
        self.writable = writable
        self._map: np.ndarray | None = None
        self.expected_sha256, self.what = sha256, what
        self._hash = hashlib.sha256() if sha256 else None
        self._hashed = 0  # bytes [0, _hashed) are in _hash

    def check_sha256(self) -> None:
        """Raise IntegrityError unless the file's bytes have the recorded checksum."""
        if self._hash is None:
            return
        total = os.fstat(self.fd).st_size
        block = bytearray(min(1 << 22, max(0, total - self._hashed)))  # small files: a small buffer
        while self._hashed < total:
            n = os.preadv(self.fd, [memoryview(block)[:min(len(block), total - self._hashed)]], self._hashed)
            if n <= 0:
                break
            self._hash.update(memoryview(block)[:n])
            self._hashed += n
        if self._hash.hexdigest() != self.expected_sha256:
            raise changed(self.what, self.path)
        self._hash = None

    def close(self) -> None:
        if self.writable and self._map is not None and isinstance(self._map, np.memmap):
            self._map.flush()  # (a read-only map has nothing to write back: msync would walk its every page)
        self._map = None
        os.close(self.fd)

    def __enter__(self) -> "StorageFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def map(self) -> np.ndarray:
        """A memory map of the open descriptor (not of the path: what is there now may be a FIFO)."""
        if self._map is None:
            self._map = np.empty(0, self.dtype) if self.size == 0 else np.memmap(
                open(self.fd, "r+b" if self.writable else "rb", closefd=False), dtype=self.dtype,
                mode="r+" if self.writable else "r", shape=(self.size,))
        return self._map

    def read_at(self, positions: np.ndarray) -> np.ndarray:
        """Storage elements at these positions, one pread each: elements few and far apart (a correct kernel's few
        flagged elements of a large case) cost a page fault each through the map, four times a pread here."""
        size, fd = self.dtype.itemsize, self.fd
        data = b"".join([os.pread(fd, size, p * size) for p in positions.tolist()])
        if len(data) != positions.size * size:
            raise UserError("file ended before an element read from it", where=str(self.path))
        return np.frombuffer(data, dtype=self.dtype)

    def read_range(self, start: int, stop: int, out: np.ndarray | None = None) -> np.ndarray:
        """Storage elements [start, stop) into `out` (of this dtype and stop - start elements), else a fresh array."""
        out = np.empty(stop - start, dtype=self.dtype) if out is None else out
        view = memoryview(out.view(np.uint8))  # bf16 has no buffer-protocol format of its own
        done, offset = 0, start * self.dtype.itemsize
        while done < len(view):
            n = os.preadv(self.fd, [view[done:]], offset + done)
            if n <= 0:
                raise UserError(f"file ended at byte {offset + done}", where=str(self.path))
            done += n
        self.hash_on_side(offset, view)
        return out

    def hash_on_side(self, offset: int, data) -> None:
        """Bytes just read at `offset`: into the checksum, where they continue what it has hashed."""
        if self._hash is not None and offset == self._hashed:
            self._hash.update(data)
            self._hashed += len(data)

    def write_range(self, start: int, values: np.ndarray) -> None:
        data = memoryview(np.ascontiguousarray(values, dtype=self.dtype).view(np.uint8))
        done, offset = 0, start * self.dtype.itemsize
        try:
            while done < len(data):
                done += os.pwrite(self.fd, data[done:], offset + done)
        except OSError as exc:
            raise WriteError(f"cannot write: {exc.strerror}", where=str(self.path)) from None

    def read(self, layout: Layout, start: int, stop: int, out: np.ndarray | None = None) -> np.ndarray:
        """Logical elements [start, stop) of a view over this storage (contiguous: into `out`, if given)."""
        if layout.is_contiguous:
            return self.read_range(start, stop, out)
        window = self._window(layout, start, stop)
        if window is not None:
            return np.array(window).reshape(-1)
        return np.array(self.map[layout.range_index(start, stop)])

    def view(self, layout: Layout, start: int, stop: int) -> np.ndarray:
        """Logical elements [start, stop), as a read-only view over the map where they are whole slices of the
        view's first axis (shaped as those slices: no copy, however strided), else as read() gives them. For a
        reader that takes a few rows or columns of a large operand (verify's relief of a matmul's flagged
        elements: the transposed copy of a 4096 x 4096 operand was a fifth of its verify)."""
        window = None if layout.is_contiguous else self._window(layout, start, stop)
        return self.read(layout, start, stop) if window is None else window

    def _window(self, layout: Layout, start: int, stop: int) -> np.ndarray | None:
        """Logical elements [start, stop) as a strided window over the map, where the range is whole slices of the
        view's first axis (a whole tensor, a block of rows), else None: read in logical order with no int64 index
        per element (a transposed 4096 x 4096 operand's 128 MB table took a tenth of its gen). NumPy checks the
        window's extent against the storage."""
        shape, item = layout.shape, self.dtype.itemsize
        inner = math.prod(shape[1:]) if shape else 0
        if not inner or stop <= start or start % inner or stop % inner or self.size == 0:
            return None
        first = start // inner
        return np.ndarray((stop // inner - first, *shape[1:]), self.dtype, buffer=self.map.view(np.uint8),
                          offset=(layout.offset + first * layout.strides[0]) * item,
                          strides=tuple(s * item for s in layout.strides))

    def gather(self, layout: Layout, out_shape: tuple[int, ...], start: int, stop: int) -> np.ndarray:
        """The values feeding output elements [start, stop) (broadcasting)."""
        if layout.is_contiguous and layout.shape == tuple(out_shape):
            return self.read_range(start, stop)
        return np.array(self.map[source_positions(layout, out_shape, slice(start, stop))])

    def gather_at(self, layout: Layout, out_shape: tuple[int, ...], flat: np.ndarray) -> np.ndarray:
        """The values feeding output elements `flat` (int64 logical indices, broadcasting)."""
        return np.array(self.map[source_positions(layout, out_shape, flat)])

    def write_at(self, layout: Layout, flat: np.ndarray, values: np.ndarray) -> None:
        """Logical elements `flat` (int64 indices) of a view over this storage."""
        self.map[layout.storage_index(flat)] = values

    def write(self, layout: Layout, start: int, stop: int, values: np.ndarray) -> None:
        if layout.is_contiguous:
            self.write_range(start, values)
        else:
            self.map[layout.range_index(start, stop)] = values

    def fill(self, value: np.ndarray, mask: np.ndarray | None = None) -> None:
        """Set every storage element (or those in mask) to one value, chunk by chunk."""
        if mask is not None:
            self.map[mask] = value
            return
        block = np.full(min(self.size, CHUNK), value, dtype=self.dtype)
        for start, stop in chunks(self.size):
            self.write_range(start, block[:stop - start])


def open_storage(path, what: str, flags: int = os.O_RDONLY) -> tuple[int, os.stat_result]:
    """(descriptor, fstat) of a regular file; UserError naming it otherwise (a FIFO is not waited on)."""
    try:
        return open_regular(path, flags)
    except NotRegular as exc:
        raise UserError(f"{what} is {exc.kind}, not a regular file", where=str(path)) from None
    except OSError as exc:
        raise UserError(f"cannot open {what}: {exc.strerror}", where=str(path)) from None


def changed(what: str, path) -> IntegrityError:
    return IntegrityError(f"{what} changed since gen (its sha256 is not the one case.json records); "
                          f"run 'aclnn-cli gen' again", where=str(path))


def allocate(path: Path, dtype: np.dtype, size: int) -> None:
    """Create a storage file of `size` zero elements, its blocks reserved up front where the file
    system can (a full disk is then a clear error here, not a SIGBUS in a memory-mapped write)."""
    nbytes = size * np.dtype(dtype).itemsize
    try:
        fd, _ = open_regular(path, WRITE)
        try:
            os.ftruncate(fd, nbytes)
            if nbytes:
                try:
                    os.posix_fallocate(fd, 0, nbytes)
                except OSError as exc:
                    if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                        raise
        finally:
            os.close(fd)
    except OSError as exc:
        raise WriteError(f"cannot write: {exc.strerror}", where=str(path)) from None


def check_size(path: Path, dtype: np.dtype, size: int, what: str) -> None:
    """A storage file must hold exactly `size` elements; UserError names the file otherwise."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise UserError(f"{what} is missing", where=str(path)) from None
    except OSError as exc:
        raise UserError(f"cannot read {what}: {exc.strerror}", where=str(path)) from None
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{what} is {kind(st.st_mode)}, not a regular file", where=str(path))
    problem = size_problem(st.st_size, size, np.dtype(dtype))
    if problem:
        raise UserError(f"{what} {problem}", where=str(path))


def size_problem(nbytes: int, size: int, dtype: np.dtype) -> str | None:
    expected = size * dtype.itemsize
    if nbytes == expected:
        return None
    return f"has {nbytes} bytes, expected {expected} ({size} elements of {dtype.itemsize} bytes)"


def view_positions(layout: Layout, start: int, stop: int) -> slice | np.ndarray:
    if layout.is_contiguous:
        return slice(start, stop)
    return layout.range_index(start, stop)


def write_view(storage: np.ndarray, layout: Layout, start: int, stop: int, values: np.ndarray) -> None:
    storage[view_positions(layout, start, stop)] = values


def in_view_mask(layout: Layout) -> np.ndarray:
    """Which storage elements the view covers (for small and medium strided storages)."""
    mask = np.zeros(layout.storage_size, dtype=bool)
    for start, stop in chunks(layout.numel):
        mask[view_positions(layout, start, stop)] = True
    return mask


_CANARY_BITS = {1: 0xAB, 2: 0xDEAD, 4: 0xDEADBEEF, 8: 0xDEADBEEFDEADBEEF}


def canary(dtype: DType) -> np.ndarray:
    """A finite, unmistakable value (bits 0xDEAD / 0xDEADBEEF) filling output storage before the call (a complex
    element: its component's in both parts)."""
    if dtype.is_complex:
        part = canary(dtype.component).astype(dtype.component.np_dtype)
        return np.array(complex(float(part), float(part)), dtype=dtype.np_dtype)
    return np.array(_CANARY_BITS[dtype.itemsize], dtype=dtype.uint_dtype).view(dtype.np_dtype)


def check_file_sha256(path: Path, expected: str, what: str) -> None:
    """One file's whole-file checksum check (for cases whose ranges were read by several workers)."""
    with StorageFile(path, np.uint8, 0, sha256=expected, what=what) as f:
        f.check_sha256()


def replace_dir(tmp: Path, final: Path, fresh: bool = False) -> None:
    """Move a finished directory into place; the old one is removed only after the new one is in.

    fresh: there was probably nothing at `final` (then it is renamed into place at once; if something
    turns out to be there after all, it is replaced as usual).
    """
    if fresh:
        try:
            os.rename(tmp, final)  # fails (ENOTEMPTY, EEXIST, ENOTDIR) where a directory or file is in the way
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise
    if final.exists():
        trash = final.with_name(f".{final.name}.old-{os.getpid()}")
        os.rename(final, trash)
        os.rename(tmp, final)
        import shutil  # (here: verify, which imports this module, never replaces a directory)

        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.rename(tmp, final)


def chunks(n: int, size: int = CHUNK):
    """[start, stop) pieces of size `size` covering 0..n."""
    return chunks_between(0, n, size)


def chunks_between(start: int, stop: int, size: int = CHUNK):
    """[s, e) pieces of size `size` covering start..stop: the one walk every chunked loop uses."""
    for s in range(start, stop, size):
        yield s, min(stop, s + size)


def copy_storage(src: Path, dst: Path) -> None:
    """Copy a regular file to a regular file (either a FIFO: refused, not waited on); a failed write (a full
    disk) is a WriteError naming the destination."""
    try:
        source, st = open_regular(src)
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror}", where=str(src)) from None
    try:
        target, _ = open_regular(dst, WRITE)
        try:
            _copy_bytes(source, target, st.st_size)
        finally:
            os.close(target)
    except OSError as exc:
        raise WriteError(f"cannot write: {exc.strerror}", where=str(dst)) from None
    finally:
        os.close(source)


def _copy_bytes(source: int, target: int, size: int) -> None:
    """size bytes from one descriptor to another: sendfile (in the kernel, as shutil.copyfile does), or
    reads and writes where the file system will not (EINVAL on the first call)."""
    done = 0
    while done < size:
        try:
            n = os.sendfile(target, source, done, min(size - done, 1 << 30))
        except OSError as exc:
            if done or exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
            import shutil

            with open(source, "rb", closefd=False) as fin, open(target, "wb", closefd=False) as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            return
        if n == 0:
            return
        done += n


def write_new_file(path: Path, data: bytes) -> None:
    """Create a file that must not exist yet and write all of data (one open, one write)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view, done = memoryview(data), 0
            while done < len(view):
                done += os.write(fd, view[done:])
        finally:
            os.close(fd)
    except OSError as exc:
        raise WriteError(f"cannot write: {exc.strerror}", where=str(path)) from None
