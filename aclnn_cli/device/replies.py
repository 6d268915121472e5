"""The runner's reply lines, parsed as strictly as a case file: a runner is a suspect, like a kernel.

A reply is one line of at most MAX_LINE bytes (`LineReader`), with a known first word, the id of
the case it answers, and for `done` a status that is a 32-bit decimal integer (`parse_status`).
Anything else is a `MalformedReply`: one line quoting the reply clipped, never a traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..files.text import clip
from ..errors import UserError

MAX_LINE = 4096  # bytes in one reply line; a runner cannot make run hold (or print) more
SHOW = 60  # characters of a runner's text (a reply, its SoC name) an error or summary line shows
MESSAGE = 200  # characters of a runner's own message (error, fault, fatal) a verdict keeps
_STATUS = re.compile(r"-?[0-9]{1,10}")  # ASCII digits only: not '²', not '٣'
INT32 = range(-(1 << 31), 1 << 31)  # aclnnStatus is int32_t


class MalformedReply(UserError):
    """A reply the harness contract does not allow (the runner cannot be trusted with more cases)."""


def quote(text: str, limit: int = SHOW) -> str:
    """A runner's text in a message: quoted, one line, clipped."""
    return f"'{clip(text, limit)}'"


def parse_status(token: str) -> int | None:
    """Phase one's status as the runner answers it and status.txt holds it, or None if it is not one."""
    if not _STATUS.fullmatch(token):
        return None
    value = int(token)  # at most 11 characters: never int()'s digit limit
    return value if value in INT32 else None


@dataclass(frozen=True)
class Reply:
    """One line the runner writes back: a word and its numbers, parsed strictly."""

    word: str  # ready, done, error, fault or fatal
    status: int | None = None  # done: phase one's status
    detail: str = ""  # ready: "<protocol> <SoC>"; error, fault, fatal: the message (clipped)


def parse_reply(line: bytes, case_id: str | None) -> Reply:
    """One reply line (without its newline) to the case `case_id` (None: the line before any case, 'ready')."""
    text = line.decode("utf-8", "replace")
    word, _, rest = text.partition(" ")
    if word not in (("ready", "fatal") if case_id is None else ("done", "error", "fault", "fatal")):
        raise MalformedReply(f"the runner answered {quote(text)}")
    if word == "ready":
        return Reply(word, detail=rest)
    if word == "fatal":
        return Reply(word, detail=clip(rest, MESSAGE))
    if rest != case_id and not rest.startswith(f"{case_id} "):  # (an id may hold spaces: it is matched whole)
        raise MalformedReply(f"the runner answered for another case: {quote(text)}")
    detail = rest[len(case_id) + 1:]
    if word != "done":
        return Reply(word, detail=clip(detail, MESSAGE))
    status = parse_status(detail)
    if status is None:
        raise MalformedReply(f"the runner answered a malformed status: {quote(text)}")
    return Reply(word, status=status)


class LineReader:
    """Bytes from the reply pipe in, whole lines out; a line over MAX_LINE bytes is a MalformedReply."""

    def __init__(self, limit: int = MAX_LINE) -> None:
        self.limit, self.buffer = limit, bytearray()

    def feed(self, chunk: bytes) -> None:
        self.buffer += chunk

    def wants_more(self) -> bool:
        """Whether another read is needed before a line (or an overlong one) is there."""
        return self.buffer.find(b"\n", 0, self.limit + 1) < 0 and len(self.buffer) <= self.limit

    def line(self) -> bytes | None:
        """The next whole line (without its newline), or None until one has arrived."""
        end = self.buffer.find(b"\n", 0, self.limit + 1)
        if end < 0:
            if len(self.buffer) > self.limit:
                raise MalformedReply(f"the runner answered a line longer than {self.limit} bytes")
            return None
        line = bytes(self.buffer[:end])
        del self.buffer[:end + 1]
        return line
