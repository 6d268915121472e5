"""A process's memo of what judging a case evaluated from its inputs alone, of bounded size.

What such a value depends on (the op, the case's inputs and attributes) the manifest's digest covers, with the
inputs' checksums, checked as they are read: keys start with the op object's id and the digest. Each entry holds
its op, so that the id cannot be reused by another op while the entry lives (a user op defined again is another).
"""

from __future__ import annotations

from collections import OrderedDict


class Memo:
    """At most `budget` bytes of entries, the least recently used leaving first; an entry over a quarter of the
    budget, or of a manifest without a digest, is not kept."""

    def __init__(self, budget: int) -> None:
        self.budget, self.held = budget, 0
        self.entries: OrderedDict[tuple, tuple[object, object, int]] = OrderedDict()

    def get(self, m, *key):
        """The value kept for case `m` under `key`, or None."""
        where = (id(m.op), m.raw.get("digest"), *key)
        found = self.entries.get(where)
        if found is None:
            return None
        self.entries.move_to_end(where)
        return found[1]

    def put(self, m, key: tuple, value, size: int) -> None:
        if m.raw.get("digest") and size <= self.budget // 4:
            where = (id(m.op), m.raw["digest"], *key)
            self.held -= self.entries.pop(where, (None, None, 0))[2]
            self.entries[where] = (m.op, value, size)
            self.held += size
        while self.held > self.budget:
            self.held -= self.entries.popitem(last=False)[1][2]
