"""Deterministic sharding of a case list across CI runners."""

from __future__ import annotations

import heapq


def shard_ids(cases: list[tuple[str, int]], index: int, count: int) -> set[str]:
    """The case ids of shard `index` (0-based) of `count`, from (case_id, elements) pairs.

    Greedy by size (largest first, ties by id) onto the least loaded shard (ties: lowest
    number; O(n log n) for n cases, whatever the count): every case lands in exactly one shard, the shards carry similar work, and the
    split depends only on the set of cases, not on their order or the machine.
    """
    used = max(1, min(count, len(cases)))  # with more shards than cases, the extra ones stay empty
    heap = [(0, k) for k in range(used)]  # (load, shard): the least loaded, lowest numbered on top
    mine: set[str] = set()
    for case_id, n in sorted(cases, key=lambda c: (-c[1], c[0])):
        load, target = heapq.heappop(heap)
        heapq.heappush(heap, (load + max(n, 1), target))
        if target == index:
            mine.add(case_id)
    return mine
