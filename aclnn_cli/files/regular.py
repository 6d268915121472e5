"""Only regular files, read in bounded size: every file the tool opens from outside goes through here.

A FIFO in a file's place blocks a plain open() or read() forever, a character device (/dev/zero)
never ends, and a directory means nothing. Files are opened with O_NONBLOCK (a FIFO's open then
returns at once), checked with fstat on the open descriptor (no window between a check and the
open), and refused unless regular. A size limit is checked on that same fstat, before any byte is read.

The refusals are OSErrors, so callers keep one `except OSError` for "cannot read this file" and
word it for the file they read (a manifest, a dump, a results file).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from ..errors import UserError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind(mode: int) -> str:
    """What a file that is not regular is, for a message ("a FIFO", "a directory", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a plain file")


class NotRegular(OSError):
    """The path is there but is not a regular file; `kind` says what it is."""

    def __init__(self, path, mode: int) -> None:
        self.kind = kind(mode)
        super().__init__(None, f"not a regular file ({self.kind})", str(path))


class TooLarge(OSError):
    """A regular file larger than its reader's limit (found before reading it)."""

    def __init__(self, path, size: int, limit: int) -> None:
        self.size, self.limit = size, limit
        super().__init__(None, f"it is {size} bytes, at most {limit} are read", str(path))


def open_regular(path, flags: int = os.O_RDONLY) -> tuple[int, os.stat_result]:
    """(descriptor, its fstat) of a regular file; NotRegular for anything else, OSError if it cannot be opened.

    flags may add O_CREAT/O_TRUNC/O_WRONLY (a writer: a FIFO put where the tool writes must not block it
    either). O_NONBLOCK stays set: it changes nothing for a regular file.
    """
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)  # (a new file: 0o666 less the umask)
    except OSError as exc:  # EISDIR (a directory opened for writing), ENXIO (a FIFO without a reader)
        if exc.errno in (errno.EISDIR, errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
            try:
                mode = os.stat(path).st_mode
            except OSError:
                raise exc from None
            if not stat.S_ISREG(mode):
                raise NotRegular(path, mode) from None
        raise
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegular(path, st.st_mode)
    return fd, st


def read_regular(path, limit: int) -> bytes:
    """A regular file's bytes, at most `limit` of them (TooLarge, from its fstat, before reading any).

    One read for a file that does not change while it is read (manifests: thousands per run).
    """
    fd, st = open_regular(path)
    try:
        if st.st_size > limit:
            raise TooLarge(path, st.st_size, limit)
        data = os.read(fd, st.st_size + 1)
        if len(data) != st.st_size:  # it changed meanwhile (or a short read): read to its end, bounded
            parts = [data]
            while data and sum(map(len, parts)) <= limit:
                data = os.read(fd, min(1 << 20, limit + 1))
                parts.append(data)
            data = b"".join(parts)
            if len(data) > limit:
                raise TooLarge(path, len(data), limit)
        return data
    finally:
        os.close(fd)


def read_head(path, limit: int) -> bytes:
    """The first `limit` bytes (or fewer) of a regular file, whatever its size."""
    fd, _ = open_regular(path)
    try:
        parts, size = [], 0
        while size < limit:
            block = os.read(fd, limit - size)
            if not block:
                break
            parts.append(block)
            size += len(block)
        return b"".join(parts)
    finally:
        os.close(fd)


SMALL_FILE = 1 << 20  # a file up to this many bytes is read with one read (sha256_of_file)


def sha256_file(path: Path) -> str:
    """A regular file's sha256 (NotRegular, an OSError, for anything else: a FIFO is not waited on)."""
    h = hashlib.sha256()
    fd, _ = open_regular(path)
    with open(fd, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


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
