"""One verify --json results file read as a stream, case by case (report: a file of any size in flat memory).

A run of 100,000 cases writes some 340 MB of results. The file is never held whole, parsed or as text:
`read_file` walks its outer object with files/jsonstream.py and hands each case, checked and in the form
the merged JSON gives it (`case_json`), to a sink, then forgets it. What bounds a hostile file is what a
case may be (MAX_CASE_CHARS, nesting, jsonsafe's rules for every token), not the file's size: a results
file is as large as its run.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..casedir.shard import Coverage
from ..errors import UserError
from ..files.jsonsafe import MAX_DEPTH, JsonRefused, _check_shape
from ..files.jsonstream import JsonStream, TooLong
from ..files.regular import open_regular
from ..judge.results import ALL_STATUSES, _JSON_FIELDS, json_safe
from .errordata import errors_problem
from .formats import READABLE_SCHEMAS, COVERAGE_SCHEMAS, _case_text, _guess_contract
from .rows import rows_problem

# The largest case a real run writes is a failing one with its whole error sample and map: about 65 KB
# compact, 80 KB as verify indents it (the bundled suite under the sign-slip defect). A case over this
# is not verify's: refused, so no file makes report hold more than this of one case at a time.
MAX_CASE_CHARS = 8 << 20
SMALL = 1 << 20  # any other member of a results file read whole (larger ones are skipped piece by piece)

_REQUIRED = {"case_id": str, "op": str, "dtype": str, "product": str, "status": str, "standard": str, "reason": str}
_OPTIONAL = {"worst": list, "params": dict, "metrics": dict, "benchmark": dict, "errors": dict, "repro": str,
             "path": str, "kind": str}
_KEPT_AS_GIVEN = ("params", "metrics", "benchmark", "worst")  # (not checked field by field: nesting checked)
_FLAT = frozenset((int, float, str, bool, type(None)))  # (a dict of these nests no deeper)


def bad_result(c) -> str | None:
    """Why one case result of a results file cannot be merged, or None."""
    if not isinstance(c, dict):
        return "not an object"
    for key, kind in _REQUIRED.items():
        if not isinstance(c.get(key), kind):
            return f"'{key}' must be a {kind.__name__}"
    if c["status"] not in ALL_STATUSES:
        return f"unknown status {c['status'][:40]!r} (valid: {', '.join(ALL_STATUSES)})"
    shape = c.get("shape")
    if not isinstance(shape, list) or len(shape) > 64 or not all(type(d) is int and 0 <= d < 2**62 for d in shape):
        return "'shape' must be a list of at most 64 sizes"
    for key, kind in _OPTIONAL.items():
        if c.get(key) is not None and not isinstance(c[key], kind):
            return f"'{key}' must be a {kind.__name__}"
    if not all(isinstance(w, dict) for w in c.get("worst") or []):
        return "'worst' must be a list of objects"
    return rows_problem(c.get("rows")) or errors_problem(c.get("errors")) or _nesting_problem(c)


def _nesting_problem(c: dict) -> str | None:
    """The fields the reports pass on as they are (json_safe and the JSON writer recurse into them) nest at
    most as deep as jsonsafe allows a whole document; a case sits three levels down in its file."""
    for key in _KEPT_AS_GIVEN:
        value = c.get(key)
        if value and not (type(value) is dict and set(map(type, value.values())) <= _FLAT):
            try:
                _check_shape(value, MAX_DEPTH - 3)
            except JsonRefused as exc:
                return f"'{key}': {exc}"
    attributes = (c.get("errors") or {}).get("attributes")
    if attributes and not (type(attributes) is dict and set(map(type, attributes.values())) <= _FLAT):
        try:
            _check_shape(attributes, MAX_DEPTH - 5)
        except JsonRefused as exc:
            return f"'errors': attributes: {exc}"
    return None


_LISTS = ("worst", "rows")  # null or absent: an empty list (CaseResult's default)
_EMPTY = {"shape": [], "params": {}, "metrics": None, "benchmark": None, "worst": [], "repro": "", "path": "",
          "rows": [], "errors": None}


def case_json(c: dict, overflowed: bool = False) -> dict:
    """A checked case (bad_result None) as the merged JSON gives it: what CaseResult(**c).to_json() is, without
    making the result (its fields in order, the defaults filled in, `kind` inferred for results from before
    it). overflowed: a number token of c was too large for a double (jsonstream), so it holds an inf."""
    out = {}
    for name in _JSON_FIELDS:
        if name in c:
            value = c[name]
            if value is None and (name in _LISTS or name == "params"):
                value = [] if name in _LISTS else {}
            out[name] = value
        elif name != "kind":
            out[name] = _EMPTY[name]
    if out.get("kind") not in ("precision", "contract"):  # results from before `kind`
        guess = types.SimpleNamespace(**out)
        out = {**out, "kind": "contract" if _guess_contract(guess) else "precision"}
        out = {name: out[name] for name in _JSON_FIELDS}
    return json_safe(out) if overflowed else out


@dataclass
class FileRead:
    """What one results file held: its schema (None: not a results file), coverage and case ids."""

    schema: object = None
    coverage: object = None
    case_ids: list = field(default_factory=list)
    problem: str | None = None  # a bad case or 'cases' found before the schema said it is a results file


def read_file(path: Path, sink: Callable[[dict, str], None], undo: Callable[[int], None]) -> FileRead | None:
    """Stream one file's cases into sink(case as case_json gives it, its text for the merged JSON); None
    when it is not a results file (other JSON lying among them). UserError naming the file otherwise.
    undo(n): forget the last n cases given to the sink (a file whose schema, found after its cases, is not ours)."""
    try:
        fd, _ = open_regular(path)
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror}", where=str(path)) from None
    try:
        with open(fd, "rb", buffering=0, closefd=True):
            read = _walk(JsonStream(fd), sink, str(path))
    except JsonRefused as exc:
        raise UserError(f"not a readable results file: {exc}", where=str(path)) from None
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror}", where=str(path)) from None
    if read.schema not in READABLE_SCHEMAS:
        undo(len(read.case_ids))
        return None
    if read.problem:
        raise UserError(read.problem, where=str(path))
    if read.coverage is not None and read.schema in COVERAGE_SCHEMAS:
        read.coverage = Coverage.from_json(read.coverage, str(path))
    else:
        read.coverage = None
    return read


def _walk(s: JsonStream, sink, where: str) -> FileRead:
    read = FileRead()
    if s.peek() != "{":  # (valid JSON of another kind is not a results file; invalid JSON is refused)
        s.skip(SMALL)
        s.end()
        return read
    seen: set[str] = set()
    for key in s.members():
        if key in seen:
            raise JsonRefused(f"duplicate key {key[:40]!r}")
        seen.add(key)
        if key == "cases":
            _cases(s, sink, read, where)
        elif key == "coverage":
            read.coverage = _coverage(s)
        elif key == "schema":
            read.schema = s.value(SMALL)
            if not isinstance(read.schema, str):
                read.schema = None
        else:
            s.skip(SMALL)
    s.end()
    if "cases" not in seen:
        read.problem = read.problem or "'cases' must be a list of case results"
    return read


def _cases(s: JsonStream, sink, read: FileRead, where: str) -> None:
    known = read.schema is not None  # (a file other tools rewrote may give its schema after its cases)
    if known and read.schema not in READABLE_SCHEMAS:
        return s.skip(SMALL)
    if s.peek() != "[":
        s.skip(SMALL)
        read.problem = "'cases' must be a list of case results"
        return
    for i in s.items():
        try:
            s.overflowed = False
            c = s.value(MAX_CASE_CHARS)
        except TooLong:
            raise JsonRefused(f"case #{i + 1} is more than {MAX_CASE_CHARS >> 20} MiB of JSON (verify writes at "
                              f"most about 100 KB a case)") from None
        if read.problem:
            continue  # (found before the schema: said once the file proves to be results)
        problem = bad_result(c)
        if problem:
            read.problem = f"case #{i + 1}: {problem}"
            if known:
                raise UserError(read.problem, where=where)
            continue
        out = case_json(c, s.overflowed)
        if out == c and list(out) == list(c):  # (as verify wrote it: its text is the merged JSON's, as it stands)
            text = s.buf[s.start:s.pos]
        else:
            text = _case_text(out).replace("\n", "\n    ")
        sink(out, text)
        read.case_ids.append(out["case_id"])


def _coverage(s: JsonStream):
    """The coverage member, its list of case ids read one by one (a shard of a large suite lists many)."""
    if s.peek() != "{":
        return _small(s)
    data: dict = {}
    for key in s.members():
        if key in data:
            raise JsonRefused(f"duplicate key {key[:40]!r}")
        if key == "cases" and s.peek() == "[":
            data[key] = [_small(s) for _ in s.items()]
        else:
            data[key] = _small(s)
    return data


def _small(s: JsonStream):
    """The value at s if it is at most SMALL characters, else None (skipped: no field of coverage is that long;
    Coverage.from_json then says which field is wrong)."""
    try:
        return s.value(SMALL)
    except TooLong:
        s.skip(SMALL)
        return None
