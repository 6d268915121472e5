"""One JSON document read front to back in bounded pieces, under jsonsafe's rules (a results file of any size).

A results file of 100,000 cases is 340 MB; parsed whole, Python holds some ten times that. Here the reader
walks the document's outer levels itself (an object's members, an array's elements) and hands each value
it is asked for to json's own C scanner, with jsonsafe's hooks: duplicate keys, NaN and Infinity, and
number tokens over MAX_NUMBER_CHARS are refused as `jsonsafe.loads` refuses them. Only the value being
read and the rest of a read (CHUNK) are held. A value larger than its `limit` is `TooLong` (the caller
says what that means: a case of a results file is refused; a value to skip is walked piece by piece), so
no input, however shaped, makes it hold more than a limit and a chunk.

Errors are `JsonRefused`, one line, with the line and column json would give for the whole document.
"""

from __future__ import annotations

import codecs
import json
import math
import os
import re
from typing import Any, Iterator

from .jsonsafe import MAX_DEPTH, MAX_NUMBER_CHARS, MAX_STRING_CHARS, JsonRefused, _check_shape, _no_constant, _pairs

CHUNK = 1 << 20  # bytes read at a time
# Number tokens are parsed by json's C code; a value's text is then looked at for what jsonsafe's per-token hooks
# would refuse or flag (a Python call per number was most of the reading time). Bytes of a number token as 1:
_RUNS = bytes(ord("1") if chr(b) in "0123456789.eE+-" else ord("0") for b in range(256))
_LONG = b"1" * (MAX_NUMBER_CHARS + 1)  # a run of number characters longer than a token may be
# an exponent of three digits or more, the only way a token of at most MAX_NUMBER_CHARS overflows a double:
_EXPONENTS = bytes(ord("d") if chr(b).isdigit() and b < 128 else ord("e") if chr(b) in "eE" else
                   ord("+") if b == ord("+") else ord(" ") for b in range(256))
_WS = re.compile(r"[ \t\n\r]*")
_NEAR_END = 16  # an error this close to the end of what is read may be the value going on past it ("-Infinit")


class TooLong(Exception):
    """The value at the stream's position is longer than the limit it was read with (nothing was consumed)."""


class JsonStream:
    """The JSON text of an open file descriptor (UTF-8, a BOM allowed), read in pieces of CHUNK bytes.

    `peek`, `members`, `items`, `value`, `skip` and `end` walk it; `overflowed` is set when a number token
    was too large for a double (read as inf: strict JSON writers give it as "inf", see results.json_safe).
    """

    def __init__(self, fd: int, chunk: int = CHUNK) -> None:
        self.fd, self.chunk = fd, chunk
        self.buf, self.pos, self.eof = "", 0, False
        self.start = 0  # where in buf the last value `value` read begins (buf[start:pos] is its text)
        self.base = 0  # characters before buf
        self.lines, self.line_start = 0, -1  # newlines before buf; the absolute index of the last of them
        self.bytes = 0  # bytes read
        self.overflowed = False
        self._utf8 = codecs.getincrementaldecoder("utf-8-sig")()
        self._scan = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_no_constant).scan_once
        self._strict = json.JSONDecoder(object_pairs_hook=_pairs, parse_int=self._int, parse_float=self._float,
                                        parse_constant=_no_constant).scan_once  # (jsonsafe's hooks, per token)

    # -- numbers, as jsonsafe reads them
    @staticmethod
    def _int(token: str) -> int:
        if len(token) > MAX_NUMBER_CHARS:
            raise JsonRefused(f"a number of {len(token)} digits (at most {MAX_NUMBER_CHARS})")
        return int(token)

    def _float(self, token: str) -> float:
        if len(token) > MAX_NUMBER_CHARS:
            raise JsonRefused(f"a number of {len(token)} digits (at most {MAX_NUMBER_CHARS})")
        value = float(token)
        if math.isinf(value):
            self.overflowed = True
        return value

    # -- reading
    def _more(self, keep: int, at_least: int) -> None:
        """Read on: buf becomes buf[keep:] and at least `at_least` more bytes (fewer at the end of the file)."""
        data = bytearray()
        want = max(self.chunk, at_least)
        while len(data) < want:
            part = os.read(self.fd, want - len(data))
            if not part:
                break
            data += part
        pending = len(self._utf8.getstate()[0])  # (bytes of a character the last read cut)
        try:
            text = self._utf8.decode(bytes(data), final=not data)
        except UnicodeDecodeError as exc:
            raise JsonRefused(f"not UTF-8 text (byte {self.bytes - pending + exc.start})") from None
        self.bytes += len(data)
        self.eof = not data
        dropped = self.buf[:keep]
        newlines = dropped.count("\n")
        if newlines:
            self.lines += newlines
            self.line_start = self.base + dropped.rfind("\n")
        self.base += keep
        self.buf = self.buf[keep:] + text
        self.pos -= keep

    def where(self, pos: int) -> str:
        """'line L column C' of a position in buf, counted over the whole document as json counts."""
        line = self.lines + self.buf.count("\n", 0, pos) + 1
        last = self.buf.rfind("\n", 0, pos)
        return f"line {line} column {pos - last if last >= 0 else self.base + pos - self.line_start}"

    def _refuse(self, msg: str, pos: int) -> JsonRefused:
        return JsonRefused(f"not valid JSON: {msg} at {self.where(pos)}")

    def peek(self) -> str:
        """The next character that is not white space ('' at the end of the document), not consumed."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos:self.pos + 1]
            self._more(self.pos, 0)

    def expect(self, char: str, what: str) -> None:
        if self.peek() != char:
            raise self._refuse(f"Expecting {what}", self.pos)
        self.pos += 1

    def value(self, limit: int) -> Any:
        """The whole value at the stream's position (TooLong, nothing consumed, if it is over `limit` characters)."""
        self.peek()
        while True:
            buf, start = self.buf, self.pos
            try:
                value, end = self._scan(buf, start)
            except StopIteration as exc:  # (where a value was due: the start, or one nested in it)
                problem = ("Expecting value", exc.value)
            except json.JSONDecodeError as exc:
                problem = (exc.msg, exc.pos)
            except RecursionError:
                raise JsonRefused(f"nested more than {MAX_DEPTH} levels deep") from None
            except JsonRefused:
                raise
            except (ValueError, OverflowError) as exc:  # (an integer token of over 4,300 digits)
                self._numbers(buf, start, len(buf))  # (says it as jsonsafe does: the token's length)
                raise JsonRefused(f"not valid JSON: {str(exc).splitlines()[0][:80]}") from None
            else:
                if self.eof or end < len(buf) and not (type(value) in (int, float) and buf[end] in "0123456789.eE+-"):
                    # (a number at the end of what is read may go on: "0." and then "5")
                    if end - start > limit:  # (found whole in a read that went past the limit)
                        raise TooLong()
                    self.start, self.pos = start, end
                    if end - start > MAX_STRING_CHARS:  # (only a value this long can hold a string over the limit)
                        _check_shape(value, MAX_DEPTH)
                    return self._numbers(buf, start, end) or value
                problem = None
            if problem and (self.eof or problem[1] < len(buf) - _NEAR_END
                            and not problem[0].startswith("Unterminated string")):
                raise self._refuse(*problem)
            if len(buf) - start > limit:
                raise TooLong()
            self._more(start, len(buf) - start)  # (doubling: a long value is scanned O(log) times, not per chunk)

    def _numbers(self, buf: str, start: int, end: int):
        """None when buf[start:end] holds no number token jsonsafe would refuse or that overflows a double; else
        the value parsed again token by token with jsonsafe's hooks (JsonRefused, or the value, overflowed set).
        A long run of digits inside a string (an id) costs only that second parse."""
        data = buf[start:end].encode("utf-8", "surrogatepass")
        if _LONG not in data.translate(_RUNS):
            exponents = data.translate(_EXPONENTS)
            if b"eddd" not in exponents and b"e+ddd" not in exponents:
                return None
        try:
            return self._strict(buf, start)[0]
        except (ValueError, OverflowError) as exc:  # (int() on a token of over 4,300 digits)
            if isinstance(exc, JsonRefused):
                raise
            raise JsonRefused(f"not valid JSON: {str(exc).splitlines()[0][:80]}") from None

    def members(self) -> Iterator[str]:
        """The keys of the object at the stream's position, one at a time: read each one's value before the next."""
        closed = self._open("{", "}")
        while not closed:
            if self.peek() != '"':
                raise self._refuse("Expecting property name enclosed in double quotes", self.pos)
            key = self.value(1 << 20)
            self.expect(":", "':' delimiter")
            yield key
            closed = self._next("}")

    def items(self) -> Iterator[int]:
        """The indices of the array at the stream's position, one at a time: read each element before the next."""
        closed, index = self._open("[", "]"), 0
        while not closed:
            yield index
            index += 1
            closed = self._next("]")

    def _open(self, opening: str, closing: str) -> bool:
        """Past the opening character of a container; whether it closes at once (empty)."""
        self.expect(opening, f"'{opening}'")
        if self.peek() == closing:
            self.pos += 1
            return True
        return False

    def _next(self, closing: str) -> bool:
        """Past the ',' or the closing character after a member or element; whether the container closed."""
        following = self.peek()
        self.pos += 1
        if following == closing:
            return True
        if following != ",":
            raise self._refuse("Expecting ',' delimiter", self.pos - 1)
        return False

    def skip(self, limit: int, depth: int = 1) -> None:
        """Read past the value at the stream's position, checking it as `value` would: whole when it is at most
        `limit` characters, else its members or elements one by one (nesting at most MAX_DEPTH levels)."""
        if depth > MAX_DEPTH:
            raise JsonRefused(f"nested more than {MAX_DEPTH} levels deep")
        try:
            self.value(limit)
            return
        except TooLong:
            pass
        if self.peek() == "{":
            for _ in self.members():
                self.skip(limit, depth + 1)
        elif self.peek() == "[":
            for _ in self.items():
                self.skip(limit, depth + 1)
        else:  # (a string or a number longer than limit: too long for any of its rules)
            raise JsonRefused(f"a value of more than {limit} characters at {self.where(self.pos)}")

    def end(self) -> None:
        """Only white space may follow the document."""
        if self.peek():
            raise self._refuse("Extra data", self.pos)
