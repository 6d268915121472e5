"""report's merge of results files in flat memory: a brief row per case, the rest spilled.

Reading a 250 MB results file whole took 2.26 GB and most of a minute. Now each case is read, checked and
written to a spill file (an unlinked temporary file, judge/spill.py) as the text the merged JSON will hold;
in memory stays a `Brief` per case, what the summaries count (id, op, dtype, product, status, kind, whether
its golden is uncertified or it has plot data) and where its text lies. The merged JSON is the spill's texts
after a head; JUnit's passing test cases come from the briefs alone; whatever needs a case's whole result
(a failing case's lines, the HTML page) reads it back, one case at a time.
"""

from __future__ import annotations

import json
import marshal
from array import array
from dataclasses import dataclass
from pathlib import Path

from ..casedir.shard import ResultsFile, ShardProblems, coverage_problems, merged_coverage
from ..errors import UserError
from ..files.regular import kind as file_kind
from ..files.text import clip
from ..judge.results import PASS, UNCERTIFIED, CaseResult, RunResult
from ..judge.spill import SpillFile
from .formats import VERIFY_SCHEMA
from .reading import read_file


class Store:
    """The merged cases' texts in a spill file, by number; `result(i)` reads one back as a CaseResult.

    A case that did not pass is also kept without its error data (the HTML report's: often half of its text), as
    marshal's bytes of its fields: what the console and JUnit read of it, each once. Marshal, not JSON, since nothing
    else reads them: it writes and reads a case's fields in under a third of JSON's time, and gives back the same
    values (the field order, every float, a lone surrogate)."""

    def __init__(self) -> None:
        self.spill = SpillFile()
        self.offsets, self.sizes = array("q"), array("q")
        self.lean_offsets, self.lean_sizes = array("q"), array("q")  # (-1: no lean fields, the case's text is)
        self._last: tuple[tuple[int, bool], CaseResult | None] = ((-1, False), None)

    def add(self, text: str, lean: dict | None = None) -> int:
        """Keep a case's text (and its fields without error data, if it has any); its number."""
        data = text.encode("utf-8", "surrogatepass")  # (a lone surrogate JSON escaped is kept as it came)
        self.offsets.append(self.spill.put(data))
        self.sizes.append(len(data))
        fields = None if lean is None else marshal.dumps(lean)
        self.lean_offsets.append(-1 if fields is None else self.spill.put(fields))
        self.lean_sizes.append(0 if fields is None else len(fields))
        return len(self.offsets) - 1

    def text(self, i: int) -> str:
        """Case i's text, as the merged JSON holds it."""
        return self.spill.get(self.offsets[i], self.sizes[i]).decode("utf-8", "surrogatepass")

    def fields(self, i: int, errors: bool = True) -> dict:
        """Case i's fields as its text gives them, without the error data unless `errors` (kept where it has any)."""
        if errors or self.lean_offsets[i] < 0:
            data = json.loads(self.text(i))
            if not errors:
                data.pop("errors", None)
            return data
        return marshal.loads(self.spill.get(self.lean_offsets[i], self.lean_sizes[i]))

    def result(self, i: int, errors: bool = True) -> CaseResult:
        """Case i as a CaseResult, without its error data unless `errors` (the last one asked for is kept: a case's
        fields are read one after another)."""
        key = (i, errors or self.lean_offsets[i] < 0)
        if self._last[0] != key:
            self._last = (key, CaseResult(**self.fields(i, errors=key[1])))
        return self._last[1]


class Brief:
    """One merged case as report keeps it; any other field of its CaseResult is read back from the store."""

    __slots__ = ("case_id", "op", "dtype", "product", "status", "kind", "uncertified", "has_errors", "_store", "_at")

    def __init__(self, store: Store, at: int, c: dict, share: dict) -> None:
        self.case_id = c["case_id"]
        self.op, self.dtype, self.product, self.status, self.kind = (
            share.setdefault(c[k], c[k]) for k in ("op", "dtype", "product", "status", "kind"))
        self.uncertified = UNCERTIFIED in c["reason"]
        self.has_errors = isinstance(c["errors"], dict)
        self._store, self._at = store, at

    def __getattr__(self, name: str):  # (only for what the slots do not hold)
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._store.result(self._at, errors="errors" in name), name)  # (has_errors, _errors too)

    def to_json(self, errors: bool = True) -> dict:
        """What CaseResult.to_json gives: the case's merged text read back (reading.case_json wrote it in that
        form), without making the CaseResult (JUnit asks this of every case that did not pass)."""
        return self._store.fields(self._at, errors)

    def text(self) -> str:
        """The case as the merged JSON holds it."""
        return self._store.text(self._at)


@dataclass
class MergedRun(RunResult):
    """A RunResult whose cases are Briefs over one Store."""

    store: Store | None = None


def results_files(paths: list[Path]) -> list[Path]:
    """The files report reads: those given, and every *.json under the directories given (sorted)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(q for q in p.rglob("*.json") if q.is_file()))
        elif p.is_file():
            files.append(p)
        elif p.exists():  # (a FIFO given by name: said so, never opened)
            raise UserError(f"not a regular file or directory ({file_kind(p.stat().st_mode)})", where=str(p))
        else:
            raise UserError("no such file or directory", where=str(p))
    return files


def read_results(paths: list[Path], strict: bool = False) -> MergedRun:
    """The verify --json results in paths (files, or directories of them) merged; a case id may appear once.
    Results with shard information must be every shard of one suite, once, each with all its cases
    (ShardProblems, one line per problem, otherwise)."""
    store, briefs, share = Store(), [], {}

    def sink(c: dict, text: str) -> None:
        # (a case that did not pass is what the console and JUnit read back: it alone is kept lean as well)
        lean = {k: v for k, v in c.items() if k != "errors"} if c["status"] != PASS and c["errors"] else None
        briefs.append(Brief(store, store.add(text, lean), c, share))

    def undo(n: int) -> None:
        del briefs[len(briefs) - n:]

    read: list[ResultsFile] = []
    for f in results_files(paths):
        got = read_file(f, sink, undo)
        if got is not None:
            read.append(ResultsFile(str(f), got.coverage, got.case_ids))
    if not read or not briefs:
        raise UserError(f"no verify results ({VERIFY_SCHEMA}) found", where=", ".join(map(str, paths)))
    problems = coverage_problems(read)
    if problems:
        raise ShardProblems(problems)
    seen: dict[str, str] = {}
    for f in read:
        for case_id in f.cases:
            if case_id in seen:
                raise UserError(f"case {clip(case_id)} is also in {seen[case_id]}: shards overlap", where=f.name)
            seen[case_id] = f.name
    return MergedRun(briefs, strict=strict, coverage=merged_coverage(read), store=store)


def load_shard_results(paths: list[Path]) -> tuple[list[dict], object]:
    """read_results' cases as JSON data (as the merged JSON holds them), and the coverage (None: no shard
    information). For tests and tools on small runs: every case is held."""
    run = read_results(paths)
    return [json.loads(c.text()) for c in run.cases], run.coverage


def load_results(paths: list[Path]) -> list[dict]:
    """Case results from verify --json files (or directories of them); a case id may appear once."""
    return load_shard_results(paths)[0]
