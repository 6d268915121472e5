"""Deterministic sharding of a case list across CI runners."""

from __future__ import annotations


def shard_ids(cases: list[tuple[str, int]], index: int, count: int) -> set[str]:
    """The case ids of shard `index` (0-based) of `count`, from (case_id, elements) pairs.

    Greedy by size (largest first, ties by id) onto the least loaded shard (ties: lowest
    number): every case lands in exactly one shard, the shards carry similar work, and the
    split depends only on the set of cases, not on their order or the machine.
    """
    load = [0] * count
    mine: set[str] = set()
    for case_id, n in sorted(cases, key=lambda c: (-c[1], c[0])):
        target = min(range(count), key=lambda k: (load[k], k))
        load[target] += max(n, 1)
        if target == index:
            mine.add(case_id)
    return mine
