"""Reading a foreign suite's bytes and parsing them, bounded: only regular files, never more than a limit.

A path named `suite.csv` may be /dev/zero, a FIFO nobody writes to, or a 10 GB log. Opening with
O_NONBLOCK never waits on a FIFO, fstat on the open descriptor says what it really is (no race with
a stat by name), and the read stops one byte past the limit. JSON goes through `jsonsafe` (duplicate
keys, huge numbers, deep nesting refused in one line); a TTK CSV is read cell by cell under a cell
size limit (`ttk.rows`).
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ...files import jsonsafe
from ...errors import CaseError, UserError
from ..spec import MAX_CASES
from ...files.text import MAX_FILE_BYTES, printable_path


@contextmanager
def _opened(path: Path, what: str) -> Iterator[tuple[int, os.stat_result]]:
    """A read descriptor on a regular file and its fstat; UserError for anything else."""
    where = printable_path(Path(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise UserError(f"cannot read {what}: {exc.strerror or exc}", where=where) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UserError(f"cannot read {what}: it is a directory", where=where)
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"cannot read {what}: not a regular file (device, FIFO or socket)", where=where)
        yield fd, st
    except OSError as exc:
        raise UserError(f"cannot read {what}: {exc.strerror or exc}", where=where) from None
    finally:
        os.close(fd)


def _read(fd: int, limit: int) -> bytes:
    """Up to limit + 1 bytes (one more than allowed tells a file that grew while read)."""
    chunks, total = [], 0
    while total <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def read_regular(path: Path, limit: int = MAX_FILE_BYTES, what: str = "case file") -> bytes:
    """The bytes of a regular file of at most `limit` bytes; UserError for a directory, device, FIFO,
    socket, or a file over the limit (checked by size before reading, and while reading)."""
    where = printable_path(Path(path))
    with _opened(path, what) as (fd, st):
        if st.st_size > limit:
            raise UserError(f"{what} is {st.st_size} bytes; at most {limit >> 20} MiB", where=where)
        data = _read(fd, limit)
    if len(data) > limit:
        raise UserError(f"{what} is over {limit >> 20} MiB", where=where)
    return data


def head(path: Path, size: int) -> bytes | None:
    """The first `size` bytes of a regular file, or None (not one, or unreadable): for recognising formats."""
    try:
        with _opened(path, "file") as (fd, _):
            return _read(fd, size - 1)
    except UserError:
        return None


def load_json(where: str, data: bytes, fmt: str) -> Any:
    """A JSON document under jsonsafe's limits; NaN/Infinity allowed (Python writes them). One-line CaseError."""
    try:
        return jsonsafe.loads(jsonsafe.decode_utf8(data), allow_constants=True)
    except jsonsafe.JsonRefused as exc:
        text = str(exc)
        if text.startswith("not valid JSON"):
            text = f"not valid {fmt}" + text.removeprefix("not valid JSON")
        raise CaseError(where, text) from None


def json_cases(where: str, data: bytes, fmt: str) -> list[dict]:
    """A JSON file holding a non-empty list of case objects (a single object is a list of one)."""
    cases = load_json(where, data, fmt)
    if isinstance(cases, dict):
        cases = [cases]
    if not isinstance(cases, list) or not cases:
        raise CaseError(where, f"a {fmt} file is a non-empty JSON list of cases")
    if len(cases) > MAX_CASES:
        raise CaseError(where, f"{len(cases)} cases, more than the {MAX_CASES} a case file may hold")
    for i, raw in enumerate(cases):
        if not isinstance(raw, dict):
            raise CaseError(where, f"{fmt} case #{i + 1} must be a JSON object")
    return cases


def json_head(head: bytes, *markers: bytes) -> bool:
    """Whether the start of a file is a JSON array/object mentioning one of the markers."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return text[:1] in (b"[", b"{") and any(m in head for m in markers)
