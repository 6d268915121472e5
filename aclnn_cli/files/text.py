"""Quoting user values in error messages, and reading a case file's bytes safely (no YAML here: the
commands that only judge never import a YAML parser).

`show` and `clip` put user values into error messages without ever formatting more than a few dozen
characters of them.
"""

from __future__ import annotations

import os
import reprlib
import stat
from pathlib import Path
from typing import Any

MAX_FILE_BYTES = 64 << 20  # any case file; a YAML one is stopped far earlier by MAX_NODES
SHOW_LIMIT = 60


def clip(text: str, limit: int = SHOW_LIMIT) -> str:
    """A user string for an error message: one line (non-printables escaped), at most `limit` chars."""
    text = text[: limit * 4 + 8]  # escaping grows a character to at most 10; never escape a megabyte
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3] + "..."


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple, _REPR.maxset = 3, 4, 6, 6, 6
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = SHOW_LIMIT, SHOW_LIMIT, 40


def show(value: Any, limit: int = SHOW_LIMIT) -> str:
    """repr(value) for an error message, in bounded time and space.

    reprlib stops at a few levels and elements, so a shared (alias-built) structure that expands
    to gigabytes is never walked, and an integer too long for str() does not raise.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    try:
        text = _REPR.repr(value)
    except (ValueError, RecursionError, TypeError):
        text = f"<{type(value).__name__}>"
    return clip(text, limit)


def unknown_key(key: Any, valid: tuple[str, ...]) -> str:
    """The message for a key that is not one of `valid`, with a "did you mean"."""
    import difflib  # (here: only a bad key pays for it, not every start)

    text = clip(key) if isinstance(key, str) else show(key)
    close = difflib.get_close_matches(text, valid, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown key '{text}' (valid: {', '.join(valid)}){hint}"


def key_path(key: Any) -> str:
    """A user's mapping key as part of an error's key path (`inputs.<key>`)."""
    return clip(key, 40) if isinstance(key, str) else show(key, 40)


def as_list(value: Any, is_single=lambda v: False) -> list:
    """A scalar, or a list of alternatives to expand over."""
    if isinstance(value, list) and not is_single(value):
        return value
    return [value]


def is_int(value: Any) -> bool:
    """A YAML integer (True and False are ints to Python, never to a case file)."""
    return isinstance(value, int) and not isinstance(value, bool)


def printable_path(path: Path) -> str:
    """A path as it goes into an error message: itself, unless a control character would break the line."""
    text = str(path)
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def read_file(path: Path, where: str) -> bytes:
    """A case file's bytes; refuses directories, devices, FIFOs (reading one could block forever) and
    anything over MAX_FILE_BYTES, so a wrong path never hangs or fills memory."""
    from ..errors import UserError

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # (checked on the open file: no swap in between)
        with open(fd, "rb") as f:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise UserError("cannot read case file: it is a directory", where=where)
            if not stat.S_ISREG(st.st_mode):
                raise UserError("cannot read case file: not a regular file (device, FIFO or socket)", where=where)
            if st.st_size > MAX_FILE_BYTES:
                raise UserError(f"case file is {st.st_size} bytes; at most {MAX_FILE_BYTES >> 20} MiB", where=where)
            data = f.read(MAX_FILE_BYTES + 1)
    except IsADirectoryError:
        raise UserError("cannot read case file: it is a directory", where=where) from None
    except OSError as exc:
        raise UserError(f"cannot read case file: {exc.strerror or exc}", where=where) from None
    if len(data) > MAX_FILE_BYTES:
        raise UserError(f"case file is over {MAX_FILE_BYTES >> 20} MiB", where=where)
    return data
