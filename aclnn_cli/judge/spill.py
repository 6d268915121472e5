"""Bytes kept in an unlinked temporary file of this process, so a run holding thousands of case results
keeps a few numbers per result in memory, not each case's error data (see results.CaseResult.errors).

A `Spilled` handle pickles as its bytes (a worker's result reaches the parent whole) and is spilled
again where it is unpickled. Each process writes its own file (a forked worker never appends to its
parent's); where no temporary file can be written, the bytes simply stay in memory.
"""

from __future__ import annotations

import os
import threading


class SpillFile:
    """An append-only temporary file (already unlinked: the system frees it when the process ends). Writes
    are gathered in a buffer of BUFFER bytes: a write per case would cost more than the case's sample."""

    BUFFER = 1 << 18

    def __init__(self) -> None:
        import tempfile  # (here: a run that spills nothing never imports it)

        self.file = tempfile.TemporaryFile(prefix="aclnn-cli-spill-")
        self.fd = self.file.fileno()
        self.pid = os.getpid()
        self.written = 0  # bytes in the file; what follows is in the buffer
        self.buffer = bytearray()
        self.lock = threading.Lock()

    def put(self, data: bytes) -> int:
        with self.lock:
            offset = self.written + len(self.buffer)
            self.buffer += data
            if len(self.buffer) >= self.BUFFER:
                self._flush()
        return offset

    def _flush(self) -> None:
        view = memoryview(self.buffer)
        try:
            while view:
                done = os.pwrite(self.fd, view, self.written)
                view, self.written = view[done:], self.written + done
        finally:  # (a write that fails part way: the buffer still starts at `written`, as get() reads it)
            rest = bytearray(view)
            del view
            self.buffer = rest

    def get(self, offset: int, size: int) -> bytes:
        with self.lock:
            if offset >= self.written:  # (still in the buffer: entries are flushed whole)
                return bytes(self.buffer[offset - self.written:offset - self.written + size])
        parts, at, left = [], offset, size
        while left:
            part = os.pread(self.fd, left, at)
            if not part:
                raise OSError(f"spill file ended at {at}, {left} bytes short")
            parts.append(part)
            at, left = at + len(part), left - len(part)
        return b"".join(parts)


class Spilled:
    """Bytes in this process's spill file (or, if it could not be written, in memory)."""

    __slots__ = ("_file", "_offset", "_size")

    def __init__(self, file: SpillFile | None, offset: int, data_or_size) -> None:
        self._file, self._offset, self._size = file, offset, data_or_size

    def load(self) -> bytes:
        return self._size if self._file is None else self._file.get(self._offset, self._size)

    def __reduce__(self):
        return spill, (self.load(),)


_CURRENT: list[SpillFile] = []  # this process's spill file, made on first use


def spill(data: bytes) -> Spilled:
    """Keep data out of memory; Spilled.load() gives it back."""
    if not _CURRENT or _CURRENT[0].pid != os.getpid():  # (a forked worker: a file of its own)
        try:
            _CURRENT[:] = [SpillFile()]
        except OSError:
            return Spilled(None, 0, bytes(data))
    file = _CURRENT[0]
    try:
        return Spilled(file, file.put(data), len(data))
    except OSError:  # a full disk: memory will do
        return Spilled(None, 0, bytes(data))
