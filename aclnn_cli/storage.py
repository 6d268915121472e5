"""Raw tensor storage files: atomic writes, memory-mapped reads, and view gather/scatter.

A .bin file is a tensor's storage: little endian, no header. Views map
logical elements to storage positions through `Layout`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np

from .dtypes import DType
from .errors import UserError
from .layout import Layout, source_positions

CHUNK = 1 << 22  # elements per processing chunk: bounds memory, independent of tensor size


def safe_child(root: Path, name: str) -> Path:
    """root/name, refusing any name that would leave root."""
    child = (root / name).resolve()
    if child.parent != root.resolve() or name in ("", ".", ".."):
        raise UserError(f"'{name}' would leave the output directory", where=str(root))
    return child


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def create_storage(path: Path, dtype: np.dtype, size: int) -> np.ndarray:
    """A writable memory map of `size` elements (a plain array for empty storage)."""
    if size == 0:
        path.write_bytes(b"")
        return np.empty(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="w+", shape=(size,))


def open_storage(path: Path, dtype: np.dtype, size: int, what: str) -> np.ndarray:
    """Read-only map of a storage file, checking it holds exactly `size` elements."""
    try:
        nbytes = path.stat().st_size
    except OSError:
        raise UserError(f"{what} is missing", where=str(path)) from None
    expected = size * dtype.itemsize
    if nbytes != expected:
        raise UserError(f"{what} has {nbytes} bytes, expected {expected} "
                        f"({size} elements of {dtype.itemsize} bytes)", where=str(path))
    if size == 0:
        return np.empty(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(size,))


def view_positions(layout: Layout, start: int, stop: int) -> slice | np.ndarray:
    if layout.is_contiguous:
        return slice(start, stop)
    return layout.storage_index(np.arange(start, stop, dtype=np.int64))


def read_view(storage: np.ndarray, layout: Layout, start: int, stop: int) -> np.ndarray:
    """Logical elements [start, stop) of a view, as a fresh array."""
    return np.array(storage[view_positions(layout, start, stop)])


def write_view(storage: np.ndarray, layout: Layout, start: int, stop: int, values: np.ndarray) -> None:
    storage[view_positions(layout, start, stop)] = values


def gather(storage: np.ndarray, layout: Layout, out_shape: tuple[int, ...], start: int, stop: int) -> np.ndarray:
    """An input's values feeding output elements [start, stop) (broadcasting), as a fresh array."""
    return np.array(storage[source_positions(layout, out_shape, slice(start, stop))])


def in_view_mask(layout: Layout) -> np.ndarray:
    """Which storage elements the view covers (for small and medium strided storages)."""
    mask = np.zeros(layout.storage_size, dtype=bool)
    for start, stop in chunks(layout.numel):
        mask[view_positions(layout, start, stop)] = True
    return mask


_CANARY_BITS = {1: 0xAB, 2: 0xDEAD, 4: 0xDEADBEEF, 8: 0xDEADBEEFDEADBEEF}


def canary(dtype: DType) -> np.ndarray:
    """A finite, unmistakable value (bits 0xDEAD / 0xDEADBEEF) filling output storage before the call."""
    return np.array(_CANARY_BITS[dtype.itemsize], dtype=dtype.uint_dtype).view(dtype.np_dtype)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def replace_dir(tmp: Path, final: Path) -> None:
    """Move a finished directory into place; the old one is removed only after the new one is in."""
    if final.exists():
        trash = final.with_name(f".{final.name}.old-{os.getpid()}")
        os.rename(final, trash)
        os.rename(tmp, final)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.rename(tmp, final)


def chunks(n: int, size: int = CHUNK):
    for start in range(0, n, size):
        yield start, min(n, start + size)
