"""Shards of a suite across CI runners: the split, the suite's identity, and what a shard must hold.

`gen --shard I/N` records in OUT which shard of which suite it wrote (shardout.py), so verify, emulate
and run act on every case of that OUT instead of splitting it again. verify's results carry the
shard's `Coverage`, and report refuses a merge where a shard or a shard's case is missing, a shard
appears twice, or suites are mixed (`coverage_problems`).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import re
from dataclasses import dataclass
from typing import Iterable

from ..files.text import clip, show
from ..errors import UserError

MAX_COUNT = 1 << 62  # a shard count or a number of cases in files from outside
_HEX = re.compile(r"[0-9a-f]{64}")


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


def suite_digest(cases: Iterable[tuple[str, int]]) -> str:
    """The identity of a suite: sha256 of its sorted (case id, elements) pairs. The split depends on
    exactly these, so two runs with equal digests and equal N split the suite alike."""
    h = hashlib.sha256()
    for case_id, n in sorted(cases):
        h.update(json.dumps([case_id, n]).encode("ascii") + b"\n")  # (ASCII escapes: any id, one framing)
    return h.hexdigest()


def empty_shard(index: int, count: int, cases: int, where: str) -> UserError:
    """Shard index (1-based) of count holds no case: more shards than cases."""
    most = max(cases, 1)
    return UserError(f"shard {index}/{count} holds no case: the suite has {cases} case{'s' if cases != 1 else ''}, "
                     f"so use at most {most} shard{'s' if most != 1 else ''}", where=where)


@dataclass(frozen=True)
class Coverage:
    """What one results file must hold: shards `shards` (1-based) of `count` of the suite `suite`
    (`suite_cases` cases in all), whose case ids are `cases`."""

    suite: str
    suite_cases: int
    count: int
    shards: tuple[int, ...]
    cases: tuple[str, ...]

    @property
    def label(self) -> str:
        """'shard 2/4', 'shards 1, 3 of 4' or 'shards 1, 2 and 5 more of 9'."""
        if len(self.shards) == 1:
            return f"shard {self.shards[0]}/{self.count}"
        return f"shards {some(map(str, self.shards), len(self.shards))} of {self.count}"

    def to_json(self) -> dict:
        return {"suite": self.suite, "suite_cases": self.suite_cases, "count": self.count,
                "shards": list(self.shards), "cases": list(self.cases)}

    @classmethod
    def from_json(cls, data, where: str, key: str = "coverage") -> "Coverage":
        """A results file's coverage (key: where it is in the file; "" for the top level), checked;
        UserError (one line, naming where and the key) if malformed."""
        if not isinstance(data, dict):
            raise UserError(f"'{key or '.'}' must be an object, got {show(data)}", where=where)
        suite = data.get("suite")
        if not isinstance(suite, str) or not _HEX.fullmatch(suite):
            raise UserError(f"'{_key(key, 'suite')}' must be 64 hex digits (sha256), got {show(suite)}", where=where)
        total = count_field(data, "suite_cases", where, key)
        count = count_field(data, "count", where, key)
        if count > total:
            raise UserError(f"'{_key(key, 'count')}' is {count}, more shards than the suite's {total} cases",
                            where=where)
        shards = data.get("shards")
        if not isinstance(shards, list) or not shards or len(shards) > count:
            raise UserError(f"'{_key(key, 'shards')}' must be a list of 1 to {count} shard numbers, got "
                            f"{show(shards)}", where=where)
        for i in shards:
            if type(i) is not int or not 1 <= i <= count:
                raise UserError(f"'{_key(key, 'shards')}' holds {show(i)}, not a shard number 1..{count}", where=where)
        if len(set(shards)) != len(shards):
            raise UserError(f"'{_key(key, 'shards')}' names a shard twice: {show(shards)}", where=where)
        ids = case_ids(data.get("cases"), where, _key(key, "cases"), most=total)
        return cls(suite, total, count, tuple(sorted(shards)), ids)


def _key(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def count_field(data: dict, name: str, where: str, key: str) -> int:
    """data[name]: a whole number 1..MAX_COUNT (UserError otherwise)."""
    value = data.get(name)
    if type(value) is not int or not 1 <= value <= MAX_COUNT:
        raise UserError(f"'{_key(key, name)}' must be a whole number from 1 to {MAX_COUNT}, got {show(value)}",
                        where=where)
    return value


def case_ids(value, where: str, key: str, most: int) -> tuple[str, ...]:
    """A non-empty list of distinct case ids (plain directory names), at most `most` of them."""
    if not isinstance(value, list) or not value or len(value) > most:
        raise UserError(f"'{key}' must be a list of 1 to {most} case ids, got {show(value)}", where=where)
    for c in value:
        if not isinstance(c, str) or not c or c.startswith(".") or "/" in c or "\\" in c or "\0" in c:
            raise UserError(f"'{key}' holds {show(c)}, not a case id", where=where)
    if len(set(value)) != len(value):
        first = next(c for i, c in enumerate(value) if c in value[:i])
        raise UserError(f"'{key}' names case {clip(first)} twice", where=where)
    return tuple(value)


def some(names: Iterable[str], total: int, most: int = 2) -> str:
    """'a, b and 4 more': the first few of `total` names, each clipped (a line names a handful)."""
    shown = [clip(n, 40) for _, n in zip(range(most), names)]
    return ", ".join(shown) + (f" and {total - len(shown)} more" if total > len(shown) else "")


class ShardProblems(UserError):
    """Results that do not add up to whole shards of one suite: every problem, one line each."""

    SHOWN = 20  # lines printed; a thousand files without shard information need not be a thousand lines

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems[: self.SHOWN] + (
            [f"and {len(problems) - self.SHOWN} more problems like these"] if len(problems) > self.SHOWN else [])
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        super().__init__(problems[0][: 300] + more)


@dataclass(frozen=True)
class ResultsFile:
    """One results file as report reads it: its name, its coverage (None: no shard information) and
    the case ids it holds."""

    name: str
    coverage: Coverage | None
    cases: list[str]


def coverage_problems(files: list[ResultsFile]) -> list[str]:
    """Why these results are not whole shards of one suite, one line each (empty: they are, or no file
    has shard information and they merge as before)."""
    return [clip(p, 390) for p in _problems(files)]  # (each part is clipped already: this is the last guard)


def _problems(files: list[ResultsFile]) -> list[str]:
    sharded = [f for f in files if f.coverage is not None]
    if not sharded:
        return []
    first = sharded[0]
    problems = [f"{_file(f.name)}: results without shard information mixed with {first.coverage.label} of suite "
                f"{first.coverage.suite[:12]} ({_file(first.name)})" for f in files if f.coverage is None]
    owner: dict[int, ResultsFile] = {}
    for f in sharded:
        c, c0 = f.coverage, first.coverage
        if c.suite != c0.suite:
            problems.append(f"{_file(f.name)}: suite {c.suite[:12]} mixed with suite {c0.suite[:12]} "
                            f"({_file(first.name)}): results of different suites")
            continue
        if (c.count, c.suite_cases) != (c0.count, c0.suite_cases):
            problems.append(f"{_file(f.name)}: {c.label} mixed with {c0.label} ({_file(first.name)}): "
                            f"one suite split two ways")
            continue
        for i in c.shards:
            if i in owner:
                problems.append(f"{_file(f.name)}: shard {i}/{c.count} is also in {_file(owner[i].name)}: shards overlap")
            else:
                owner[i] = f
        problems += _case_problems(f)
    missing = first.coverage.count - len(owner)
    if missing > 0:
        gaps = (f"{i}/{first.coverage.count}" for i in range(1, first.coverage.count + 1) if i not in owner)
        problems.append(f"{'shard' if missing == 1 else 'shards'} {some(gaps, missing, 3)} of suite "
                        f"{first.coverage.suite[:12]} {'is' if missing == 1 else 'are'} missing: no results "
                        f"file holds {'it' if missing == 1 else 'them'}")
    if not problems and sum(len(f.coverage.cases) for f in sharded) != first.coverage.suite_cases:
        problems.append(f"the shards of suite {first.coverage.suite[:12]} list "
                        f"{sum(len(f.coverage.cases) for f in sharded)} cases, the suite has "
                        f"{first.coverage.suite_cases}: a results file's coverage was edited")
    return problems


def _file(name: str) -> str:
    """A results file's name in a problem line: long enough to find it, short enough for one line."""
    return clip(name, 100)


def _case_problems(f: ResultsFile) -> list[str]:
    """A file's results against the case ids its shard must hold."""
    c = f.coverage
    held, must = set(f.cases), set(c.cases)
    out = []
    missing = [x for x in c.cases if x not in held]
    if missing:
        out.append(f"{_file(f.name)}: case{'s' if len(missing) > 1 else ''} {some(missing, len(missing))} of "
                   f"{c.label} of suite {c.suite[:12]} missing from its results")
    extra = [x for x in f.cases if x not in must]
    if extra:
        out.append(f"{_file(f.name)}: case{'s' if len(extra) > 1 else ''} {some(extra, len(extra))} not in "
                   f"{c.label} of suite {c.suite[:12]}")
    return out


def merged_coverage(files: list[ResultsFile]) -> Coverage | None:
    """The coverage of results that passed coverage_problems: the whole suite (None without shard info)."""
    sharded = [f.coverage for f in files if f.coverage is not None]
    if not sharded:
        return None
    c = sharded[0]
    return Coverage(c.suite, c.suite_cases, c.count, tuple(sorted(i for s in sharded for i in s.shards)),
                    tuple(sorted(x for s in sharded for x in s.cases)))
