"""Verdicts: the statuses a case can get, one case's result and a run's, as verify and report share them."""

from __future__ import annotations

import marshal
import math
import shlex
import struct
from dataclasses import MISSING as NO_DEFAULT, dataclass, field, fields

from .errorpack import PackedErrors
from .spill import Spilled, spill
from ..casedir.shard import Coverage

PASS, FAIL, LAYOUT, MISTRUSTED, MISSING, STATUS, CRASH, TIMEOUT, ERROR = (
    "PASS", "FAIL", "LAYOUT", "MISTRUSTED", "MISSING", "STATUS", "CRASH", "TIMEOUT", "ERROR")
# CRASH and TIMEOUT: the device run of the case killed its runner or outlived --timeout (aclnn-cli run)
ALL_STATUSES = (PASS, FAIL, LAYOUT, MISTRUSTED, MISSING, STATUS, CRASH, TIMEOUT, ERROR)
# A case whose golden gen could not fully certify says so in its reason (judge/verify.py), in these words.
UNCERTIFIED = "elements not certified (no exact function"


class _Compact:
    """A field of CaseResult kept in a compact form: `pack` on assignment, `unpack` on every read (both are
    given the result and the value).

    A run of thousands of cases holds every result until it is reported; a passing case's metrics
    dict alone took a kilobyte. Reads give equal values (new containers: change a result by
    assigning its fields, not by mutating what a read returned). `default` is the field's default
    (NO_DEFAULT: none, the field is required).
    """

    def __init__(self, pack, unpack, default=NO_DEFAULT) -> None:
        self.pack, self.unpack, self.default = pack, unpack, default

    def __set_name__(self, owner, name: str) -> None:
        self.attr = f"_{name}"

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.default  # dataclasses ask the class for the field's default
        return self.unpack(obj, getattr(obj, self.attr))

    def __set__(self, obj, value) -> None:
        if value is self or value is self.default:  # (every field's default packs alike for every result: once)
            try:
                packed = self.packed_default
            except AttributeError:
                packed = self.packed_default = self.pack(obj, self.default)
            setattr(obj, self.attr, packed)
        else:
            setattr(obj, self.attr, self.pack(obj, value))


def _same(obj, value):
    return value


METRIC_KEYS = ("elements", "compared", "special_mismatches", "violations", "max_abs_error", "max_rel_error", "mere",
               "mare", "rmse", "error_balance", "max_ulp_error", "mean_ulp_error", "small_error_rate",
               "zero_golden_share", "relieved")  # Metrics.to_json, in its order
_INT_METRICS = frozenset(("elements", "compared", "special_mismatches", "violations", "relieved"))


class _PackedMetrics(bytes):
    """Metrics.to_json's values as doubles in one bytes object (its ints are far below 2^53)."""

    __slots__ = ()


_METRIC_TYPES = tuple(int if k in _INT_METRICS else float for k in METRIC_KEYS)
_DOUBLES = struct.Struct(f"<{len(METRIC_KEYS)}d")


def _pack_metrics(obj, value):
    if type(value) is dict and tuple(value) == METRIC_KEYS and tuple(map(type, value.values())) == _METRIC_TYPES:
        return _PackedMetrics(_DOUBLES.pack(*value.values()))
    return value


def _unpack_metrics(obj, value):
    if type(value) is not _PackedMetrics:
        return value
    return {k: int(v) if k in _INT_METRICS else v for k, v in zip(METRIC_KEYS, _DOUBLES.unpack(value))}


class _Path(tuple):
    """A result's path as (its directory, shared by the run's results; its case id, the same string)."""


def _pack_path(obj, value):
    head, _, tail = value.rpartition("/") if type(value) is str else ("", "", "")
    return _Path((_share(head), obj.case_id)) if head and tail == obj.case_id else value


def _unpack_path(obj, value):
    return f"{value[0]}/{value[1]}" if type(value) is _Path else value


_SHARED: dict = {}  # equal immutable parts of many results (a standard's parameters, shapes): one copy


def _share(value):
    if len(_SHARED) > 4096:
        _SHARED.clear()
    return _SHARED.setdefault((type(value), value), value)  # (equal tuples of other kinds are other keys)


class _Items(tuple):
    """A dict of scalars as a shared tuple of its items."""


def _pack_dict(obj, value):
    if value is None:
        value = {}
    last = _LAST_DICT[0]
    if last[0] is value and last[1] == value:  # (the run's cases share one parameters dict: see judge/judging.py)
        return last[2]
    if isinstance(value, dict) and all(isinstance(v, (int, float, str)) for v in value.values()):
        try:
            packed = _share(_Items(value.items()))
        except TypeError:  # an unhashable key
            return value
        _LAST_DICT[0] = (value, dict(value), packed)
        return packed
    return value


_LAST_DICT = [(None, None, None)]  # (dict, a copy of it then, its packed form)


def _unpack_dict(obj, value):
    return dict(value) if type(value) is _Items else value


class _Ints(tuple):
    """A list of ints (a shape) as a shared tuple."""


def _pack_shape(obj, value):
    if isinstance(value, list) and all(type(v) is int for v in value):
        return _share(_Ints(value))
    return value


def _unpack_shape(obj, value):
    return list(value) if type(value) is _Ints else value


def _pack_list(obj, value):
    return None if value is None or (type(value) is list and not value) else value


def _unpack_list(obj, value):
    return [] if value is None else value


def _pack_errors(obj, value):
    """A case's error data (kilobytes of samples) kept in the spill file: a run holds only a handle. Packed
    (errorstats.PackedErrors, as verify makes it) or as JSON data (as report reads it)."""
    if type(value) is PackedErrors:
        return spill(b"P" + value)
    if type(value) is not dict:
        return value
    try:
        return spill(b"J" + marshal.dumps(value))
    except ValueError:  # (a type marshal does not take: kept as it is)
        return value


def _unpack_errors(obj, value):
    if type(value) is PackedErrors:
        return value.json()
    if type(value) is not Spilled:
        return value
    data = value.load()
    return PackedErrors(data[1:]).json() if data[:1] == b"P" else marshal.loads(data[1:])


ROW_KEYS = ("output", "metric", "value", "limit", "comparison", "within", "note")  # standards.Row.to_json's


_ROW_TYPES = (str, str, float, float, str, bool, str)


class _Rows(tuple):
    """A verdict's rows (dicts of ROW_KEYS) as (a shared tuple of each row's words: output, metric, comparison,
    within, note; their values and limits as doubles in one bytes object). A run's passing cases repeat
    the same words; a row's notes vary only when it is over its limit."""


def _pack_rows(obj, value):
    if not value:
        return None
    if type(value) is _Rows:  # (packed already: rows_of)
        return value
    if isinstance(value, list) and all(type(r) is dict and tuple(r) == ROW_KEYS
                                       and tuple(map(type, r.values())) == _ROW_TYPES for r in value):
        words = _share(tuple(_share((r["output"], r["metric"], r["comparison"], r["within"], r["note"]))
                             for r in value))  # (exact types checked: 1 == 1.0 == True as keys)
        return _Rows((words, struct.pack(f"<{2 * len(value)}d", *(x for r in value for x in (r["value"], r["limit"])))))
    return value


def rows_of(named) -> "_Rows | None":
    """A result's rows packed straight from a standard's Row objects, given (output name, rows) per output: what
    CaseResult.rows packs from their dicts (Row.to_json named by the output), without making the dicts."""
    words, numbers = [], []
    for output, rows in named:
        for r in rows:
            words.append((output, r.metric, r.comparison, r.within, r.note))
            numbers += (r.value, r.limit)
    if not words:
        return None
    words = tuple(words)
    shared = _SHARED.get((tuple, words))  # (a run's passing cases repeat one set of words: found at once)
    if shared is None:
        shared = _share(tuple(map(_share, words)))
    return _Rows((shared, struct.pack(f"<{len(numbers)}d", *numbers)))


def _unpack_rows(obj, value):
    if value is None:
        return []
    if type(value) is not _Rows:
        return value
    words, numbers = value
    pairs = struct.unpack(f"<{2 * len(words)}d", numbers)
    return [{"output": o, "metric": m, "value": pairs[2 * i], "limit": pairs[2 * i + 1], "comparison": c,
             "within": w, "note": n} for i, (o, m, c, w, n) in enumerate(words)]


@dataclass(frozen=True)
class Repro:
    """The repro line of a case, less what its result already holds (case id and path): one per run.

    `CaseResult.repro` reads as the full line: `{head} --case {case_id} -o {out} && {cli} verify
    {path}{tail}`, every user value in it shell-quoted (head and tail come quoted; case id, out and
    path are quoted here): a case named `a b` or a path with `;` in it pastes as one argument.
    cli: the program and its global options (`aclnn-cli --ops FILE` for a user op's case).
    """

    head: str
    out: str
    tail: str
    cli: str = "aclnn-cli"


def _pack_repro(obj, value):
    return _share(value) if isinstance(value, Repro) else value


def _unpack_repro(obj, value):
    if type(value) is not Repro:
        return value
    return (f"{value.head} --case {shlex.quote(obj.case_id)} -o {shlex.quote(value.out)} && {value.cli} verify "
            f"{shlex.quote(obj.path)}{value.tail}")


@dataclass(init=False)  # (its own __init__, below: the dataclass's is not even compiled)
class CaseResult:
    """One case's verdict and everything a report renders of it."""

    # Slots, not a __dict__: a run holds one per case. Fields with a default are _Compact descriptors kept
    # in the slot of their name with an underscore (a class attribute cannot share a slot's name).
    __slots__ = ("case_id", "op", "dtype", "product", "status", "standard", "reason", "_shape", "_params", "_metrics",
                 "_benchmark", "_worst", "_repro", "_path", "_kind", "_rows", "_error_rows", "_errors")
    case_id: str
    op: str
    dtype: str
    shape: list = _Compact(_pack_shape, _unpack_shape)
    product: str
    status: str
    standard: str
    reason: str
    params: dict = _Compact(_pack_dict, _unpack_dict, None)  # (None: {})
    metrics: dict | None = _Compact(_pack_metrics, _unpack_metrics, None)
    benchmark: dict | None = _Compact(_pack_metrics, _unpack_metrics, None)
    worst: list = _Compact(_pack_list, _unpack_list, None)  # (None: [])
    repro: str = _Compact(_pack_repro, _unpack_repro, "")
    path: str = _Compact(_pack_path, _unpack_path, "")
    kind: str = _Compact(_same, _same, "precision")  # or "contract": a negative case, judged on phase one's status only
    # what the standard judged, per output: dicts of ROW_KEYS (standards.Row); the reports render these
    rows: list = _Compact(_pack_rows, _unpack_rows, None)  # (None: [])
    error_rows: list = field(default=_Compact(_pack_list, _unpack_list, None), repr=False)  # (None: [])
    # the report's data (errorstats.ErrorStats.summary): ulp histogram, sample, map; None without a comparison
    errors: dict | None = field(default=_Compact(_pack_errors, _unpack_errors, None), repr=False)

    def __init__(self, case_id: str, op: str, dtype: str, shape: list, product: str, status: str, standard: str,
                 reason: str, params: dict | None = None, metrics: dict | None = None, benchmark: dict | None = None,
                 worst: list | None = None, repro: str = "", path: str = "", kind: str = "precision",
                 rows: list | None = None, error_rows: list | None = None, errors: dict | None = None) -> None:
        # (the dataclass's __init__, less a _Compact descriptor call per field: a field left at its default, None
        # or "", is stored as it is, which is what its pack function makes of it; a run makes one result per case)
        self.case_id, self.op, self.dtype, self.product, self.status, self.standard, self.reason = (
            case_id, op, dtype, product, status, standard, reason)
        self._shape = _pack_shape(self, shape)
        self._params = _pack_dict(self, params)
        self._metrics = None if metrics is None else _pack_metrics(self, metrics)
        self._benchmark = None if benchmark is None else _pack_metrics(self, benchmark)
        self._worst = None if worst is None else _pack_list(self, worst)
        self._repro = repro if repro == "" else _pack_repro(self, repro)
        self._path = path if path == "" else _pack_path(self, path)
        self._kind = kind
        self._rows = None if rows is None else _pack_rows(self, rows)
        self._error_rows = None if error_rows is None else _pack_list(self, error_rows)
        self._errors = None if errors is None else _pack_errors(self, errors)

    def __reduce__(self):
        """Pickled as its slots' (packed) values in a tuple: workers send thousands of results to the parent, and the
        default (a dict of slot names per result) cost as much to make and read back as judging a small case."""
        values = [getattr(self, name) for name in _SLOTS]
        wrapped = 0  # (each result's own packed values go as their plain base type: a subclass pickles through
        for bit, (at, cls, base) in enumerate(_PER_RESULT):  # copyreg at 1.7 us each; _restore wraps them again)
            if type(values[at]) is cls:
                values[at] = base(values[at])
                wrapped |= 1 << bit
        return _restore, (tuple(values), wrapped)

    @property
    def uncertified(self) -> bool:
        """Whether the case's golden has elements gen could not certify (its reason says so, in these words)."""
        return UNCERTIFIED in (self.reason or "")

    @property
    def has_errors(self) -> bool:
        """Whether the result holds error data (the HTML report's plots), without reading it back."""
        return self._errors is not None

    def to_json(self, errors: bool = True) -> dict:
        """The result as strict JSON data (non-finite numbers as strings). (json_safe copies every dict
        and list, as asdict would: what it returns shares nothing with the result.) errors=False leaves
        out the error data (for outputs that never show it)."""
        return json_safe({name: getattr(self, name) for name in (_JSON_FIELDS if errors else _JSON_FIELDS[:-1])})


_JSON_FIELDS = tuple(f.name for f in fields(CaseResult) if f.name != "error_rows")  # ("errors" last)
_SLOTS = CaseResult.__slots__


assert _SLOTS == ("case_id", "op", "dtype", "product", "status", "standard", "reason", "_shape", "_params", "_metrics",
                  "_benchmark", "_worst", "_repro", "_path", "_kind", "_rows", "_error_rows", "_errors")  # (_restore's)
# (slot index, packed type, its base) of the packed values each result has its own of (shared ones pickle once)
_PER_RESULT = tuple((_SLOTS.index(name), cls, cls.__base__) for name, cls in (
    ("_metrics", _PackedMetrics), ("_benchmark", _PackedMetrics), ("_path", _Path), ("_rows", _Rows)))


def _restore(values: tuple, wrapped: int = 0) -> CaseResult:
    """A CaseResult from CaseResult.__reduce__'s values (wrapped: which of _PER_RESULT's were sent plain)."""
    r = object.__new__(CaseResult)
    (r.case_id, r.op, r.dtype, r.product, r.status, r.standard, r.reason, r._shape, r._params, r._metrics, r._benchmark,
     r._worst, r._repro, r._path, r._kind, r._rows, r._error_rows, r._errors) = values  # (_SLOTS, in order: asserted)
    if wrapped:
        for bit, (at, cls, _) in enumerate(_PER_RESULT):
            if wrapped >> bit & 1:
                setattr(r, _SLOTS[at], cls(values[at]))
    return r


def by_path(results: list[CaseResult]) -> list[CaseResult]:
    """Results sorted by path, one per path (the last given of equal paths). When they all lie in one
    directory (a run of one output root), by the case directory's name, without making path strings."""
    packed = [r._path for r in results]
    if packed and all(type(p) is _Path for p in packed) and len({p[0] for p in packed}) == 1:
        last = {p[1]: r for p, r in zip(packed, results)}
    else:
        last = {r.path: r for r in results}
    return [last[k] for k in sorted(last)]


@dataclass
class RunResult:
    """The verdicts of a run, with what decides its exit code."""

    cases: list[CaseResult] = field(default_factory=list)
    strict: bool = False  # MISTRUSTED counts as a failure
    coverage: Coverage | None = None  # the shard(s) of a suite the cases must be (None: no shard in play)

    @property
    def exit_code(self) -> int:
        if any(c.status == ERROR for c in self.cases):
            return 2
        passing = (PASS, MISTRUSTED) if not self.strict else (PASS,)
        return 0 if all(c.status in passing for c in self.cases) else 1

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(ALL_STATUSES, 0)
        for c in self.cases:
            out[c.status] += 1
        return out


def json_safe(value):
    """value with every non-finite float as a string ("nan", "inf", "-inf"): strict JSON has no NaN token."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        try:  # (numbers whose exact sum is finite hold no inf or NaN: copied as they are, without a call per number)
            if math.isfinite(math.fsum(value)):
                return list(value)
        except (TypeError, ValueError, OverflowError):  # (strings, lists, dicts; inf - inf, overflow: one by one)
            pass
        return [json_safe(v) for v in value]
    return value
