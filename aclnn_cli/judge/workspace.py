"""Buffers a chunked comparison reuses from chunk to chunk.

A fresh 256 KiB array per temporary and chunk comes from the kernel each time (malloc maps large blocks
and hands them back on free): its page faults cost about as much as the arithmetic (a third of the
compare's CPU time, measured). A comparison therefore keeps two sets of buffers and alternates them:
whatever a chunk's errors leave pending (the worst elements, the report's error data: both settled
when the next chunk is added) stays intact while the next chunk is computed in the other set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Buffers:
    """Named arrays of one chunk's size, made on first use and handed out as views of n elements."""

    size: int
    arrays: dict[tuple, np.ndarray] = field(default_factory=dict)

    def get(self, name: str, dtype, n: int) -> np.ndarray:
        """Buffer `name` of `dtype`, n elements (uninitialised: the caller writes every one).
        (Called a dozen times a chunk: keyed by the dtype as given, the whole buffer when n fills it.)"""
        key = (name, dtype)
        buf = self.arrays.get(key)
        if buf is None or buf.size < n:
            buf = self.arrays[key] = np.empty(max(n, self.size), dtype)
        return buf if buf.size == n else buf[:n]


@dataclass
class Workspace:
    """Two sets of buffers, alternated chunk by chunk (see the module's docstring)."""

    size: int
    sets: tuple[Buffers, Buffers] = None
    turn: int = 0

    def __post_init__(self) -> None:
        self.sets = (Buffers(self.size), Buffers(self.size))

    def next(self) -> Buffers:
        """The set for the next chunk (the one the chunk before last used)."""
        self.turn ^= 1
        return self.sets[self.turn]


_SPARE: dict[int, Workspace] = {}


def take(size: int) -> Workspace:
    """A workspace for chunks of `size`: the one the process's last comparison gave back, else a new one.
    A large case's ranges (up to 8 per worker, each its own comparison) then reuse buffers
    instead of faulting in fresh ones (6 MiB a range). A comparison running inside another gets its own."""
    return _SPARE.pop(size, None) or Workspace(size)


def give_back(ws: Workspace) -> None:
    """Return a workspace for reuse; its holder has settled everything its chunks left pending."""
    if len(_SPARE) > 4:
        _SPARE.clear()
    _SPARE[ws.size] = ws
