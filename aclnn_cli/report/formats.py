"""Human and machine output of runs: rich tables on the terminal, JSON, JUnit XML and CSV for CI."""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import __version__
from ..casedir.shard import Coverage
from ..tensor.storage import atomic_write_text, safe_child
from ..judge.results import ALL_STATUSES, PASS, CaseResult, RunResult, json_safe
from .rows import row_lines

# 2: each case's `errors` (ulp histogram, sample, map) for the HTML report; 3: `coverage`, the shard(s) of
# which suite the results must hold (shard.py)
VERIFY_SCHEMA = "aclnn-cli/verify/4"  # 4: each case's verdict rows (`rows`)
READABLE_SCHEMAS = ("aclnn-cli/verify/1", "aclnn-cli/verify/2", "aclnn-cli/verify/3", VERIFY_SCHEMA)
# (version 1 results draw no plots; before version 4 they have no rows: the report shows no limits for them)
COVERAGE_SCHEMAS = READABLE_SCHEMAS[2:]
STYLE = {"PASS": "green", "FAIL": "bold red", "LAYOUT": "bold red", "MISTRUSTED": "yellow", "MISSING": "yellow",
         "STATUS": "bold red", "CRASH": "bold red", "TIMEOUT": "bold red", "ERROR": "bold magenta"}


def _num(x) -> float:
    """A number from results data: floats, or the strings strict JSON uses for non-finite ones."""
    try:
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            return float(x)
        return float(str(x))
    except (ValueError, OverflowError):
        return float("nan")


def _g(x, spec: str = ".3g") -> str:
    """A number as the report prints it; an integer's value (an integer output's element) in full."""
    if type(x) is int:
        return str(x)
    if isinstance(x, (list, tuple)) and len(x) == 2:  # (a complex element: [real, imag])
        return format(complex(_num(x[0]), _num(x[1])), spec)
    return "-" if x is None else format(_num(x), spec)


def element_line(w: dict) -> str:
    try:
        ins = ", ".join(f"{k}={_g(v, '.8g')}" for k, v in w["inputs"].items())
        head = f"{w['coords']} ({ins}): expected {_g(w['expected'], '.8g')}, got {_g(w['actual'], '.8g')}"
        if w.get("mismatch"):
            return f"{head}: {w['mismatch']}"
        return f"{head}, abs {_g(w['abs_error'])}, rel {_g(w['rel_error'])}, {_g(w['ulp_error'])} ulp"
    except (KeyError, TypeError, AttributeError):
        return str(w)[:200]


def _short_worst(c: CaseResult) -> str:
    if not c.worst or not isinstance(c.worst[0], dict):
        return "-"
    w = c.worst[0]
    return f"{w.get('coords')} exp {_g(w.get('expected'), '.6g')} got {_g(w.get('actual'), '.6g')}"


TABLE_ROWS = 200  # more rows than this print as plain aligned lines: a rich table of 10,000 rows takes seconds
_CONTROL = {i: "?" for i in (*range(32), 127)}
_EXPECTED_STATUS = re.compile(r"phase one returned \S+ (?:as expected$|\(.*\), expected (-?\d+) )")
_HEAD = ("case", "status", "max abs", "max rel", "MERE", "MARE", "worst element")


def _text(x) -> str:
    """x as one line of plain text: results files may hold anything, and rich must never parse it."""
    return str(x).translate(_CONTROL)


def is_contract(c: CaseResult) -> bool:
    """A negative case (phase one must reject the call): judged on its status, no precision result."""
    return c.kind == "contract"


def _guess_contract(c: CaseResult) -> bool:
    """For results written before CaseResult had `kind`, inferred from the verdict: only negative
    cases get "phase one returned N as expected" or require a status file, and only they use a
    dtype their op does not support on the product (float64, bf16 on 910)."""
    if c.metrics is not None:
        return False
    reason = _text(c.reason)
    if reason.startswith("no status file at "):
        return True
    m = _EXPECTED_STATUS.match(reason)
    if m:
        return m.group(1) is None or int(m.group(1)) != 0
    return _unsupported(_text(c.op), _text(c.product), _text(c.dtype))


@lru_cache(maxsize=1024)
def _unsupported(op: str, product: str, dtype: str) -> bool:
    from ..ops import find_op

    try:
        dtypes = find_op(op).products.get(product)
    except KeyError:
        return False
    return dtypes is not None and dtype not in dtypes


def _row(c: CaseResult) -> tuple[str, ...]:
    m = c.metrics if isinstance(c.metrics, dict) else {}
    return (_text(c.case_id), c.status, _g(m.get("max_abs_error")), _g(m.get("max_rel_error")), _g(m.get("mere")),
            _g(m.get("mare")), _text(_short_worst(c)))


def _print_rows(console: Console, title: str, cases: list[CaseResult]) -> None:
    """One row per case: a rich table for a screenful or so, plain aligned lines (fast) beyond, printed PIECE
    cases at a time (report reads each case back for its row: 100,000 rows are never held at once)."""
    if len(cases) <= TABLE_ROWS:
        table = Table(title=title)
        for col in _HEAD:
            table.add_column(col, overflow="fold", justify="right" if col.startswith(("max", "M")) else "left")
        for r in map(_row, cases):
            table.add_row(Text(r[0]), Text(r[1], style=STYLE[r[1]]), *r[2:6], Text(r[6]))
        console.print(table)
        return
    width = max(len(_HEAD[0]), *(len(c.case_id) for c in cases))  # (_text keeps a string's length)
    out = Lines(console)
    out.append(f"{title} ({len(cases)} cases)\n", style="italic")
    out.append(f"{_HEAD[0]:<{width}}  {_HEAD[1]:<10}" + "".join(f" {h:>9}" for h in _HEAD[2:6]) + f"  {_HEAD[6]}\n",
               style="bold")
    for i, r in enumerate(map(_row, cases), 1):
        out.append(f"{r[0]:<{width}}  ")
        out.append(f"{r[1]:<10}", style=STYLE[r[1]])
        out.append("".join(f" {x:>9}" for x in r[2:6]) + f"  {r[6]}\n")
        out.flush_every(i)
    out.flush()


PIECE = 500  # cases whose lines are printed together


class Lines:
    """Styled text printed PIECE cases at a time: through rich where styles show (a terminal, or colour forced),
    else written as it is (rich would only drop the styles, at a third of a failing report's time). The pieces
    are plain text already: every string from results data goes through _text."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.plain = console.color_system is None and not console.is_terminal and not console.record
        self.parts: list[str] = []
        self.text = Text()

    def append(self, piece: str, style: str | None = None) -> None:
        if self.plain:
            self.parts.append(piece)
        else:
            self.text.append(piece, style=style)

    def flush_every(self, i: int) -> None:
        """flush after every PIECE-th case (i counts them)."""
        if i % PIECE == 0:
            self.flush()

    def flush(self) -> None:
        if self.plain:
            self.console.file.write("".join(self.parts))
            self.parts.clear()
        else:
            self.console.print(self.text, soft_wrap=True, end="")
            self.text = Text()


def print_cases(console: Console, run: RunResult, show_passing: bool = False) -> None:
    """The rows of the cases that did not pass (of every case with show_passing); then, for each case
    that did not pass, why, its worst elements, and how to reproduce it."""
    bad = [c for c in run.cases if c.status != PASS]
    rows = run.cases if show_passing else bad
    if rows:
        _print_rows(console, "verify: every case" if show_passing else "verify: cases that did not pass", rows)
    if not bad:
        return
    out = Lines(console)
    for i, c in enumerate(bad, 1):
        out.append(c.status, style=STYLE[c.status])
        judged = "contract" if is_contract(c) else _text(c.standard)  # a negative case meets no precision standard
        out.append(f" {_text(c.case_id)} ({judged}): {_text(c.reason)}\n")
        for line in row_lines(c.rows) if any(not r["within"] for r in c.rows) else ():  # (failed on a bound)
            out.append(f"    {_text(line)}\n", style=None if line.startswith("within") else "red")
        for w in c.worst if isinstance(c.worst, list) else ():
            out.append(f"    {_text(element_line(w))}\n")
        if c.repro:
            out.append(f"    repro: {_text(c.repro)}\n")
        out.flush_every(i)
    out.flush()


def _summary_table(console: Console, title: str, key: str, cases: list[CaseResult], caption: str | None = None) -> None:
    statuses = [s for s in ALL_STATUSES if any(c.status == s for c in cases)]
    table = Table(title=title, caption=caption)
    table.add_column("op")
    table.add_column(key)
    for s in statuses:
        table.add_column(s, justify="right")
    groups = Counter((_text(c.op), _text(getattr(c, key)), c.status) for c in cases)
    for op, k in sorted({(o, k) for o, k, _ in groups}):
        table.add_row(Text(op), Text(k), *[Text(str(groups[op, k, s]), style=STYLE[s] if groups[op, k, s] else "")
                                          for s in statuses])
    console.print(table)


def print_summary(console: Console, run: RunResult) -> None:
    """Counts by op and dtype for precision cases, by op and product for contract (negative) cases; the totals."""
    kinds = [is_contract(c) for c in run.cases]
    contract = [c for c, k in zip(run.cases, kinds) if k]
    precision = [c for c, k in zip(run.cases, kinds) if not k]
    if precision:
        _summary_table(console, "verify: precision cases by op and dtype", "dtype", precision)
    if contract:
        _summary_table(console, "verify: contract cases by op and product", "product", contract,
                       caption="negative cases: phase one must reject the call")
    counts = run.counts()
    verdict = Text("all cases pass", style="green") if run.exit_code == 0 else Text("gate failed", style="bold red")
    console.print(Text.assemble(
        f"{len(run.cases)} cases ({len(precision)} precision, {len(contract)} contract): ",
        ", ".join(f"{n} {s}" for s, n in counts.items() if n) + " - ", verdict))
    uncertified = [c for c in precision if c.uncertified]
    if uncertified:  # (a passing case's reason is not printed: its uncertified golden must still be seen)
        console.print(Text(f"note: {len(uncertified)} cases have golden elements not certified (e.g. "
                           f"{_text(uncertified[0].case_id)}: {_text(uncertified[0].reason.split('; golden: ')[-1])})",
                           style="yellow"), soft_wrap=True)


def verify_json(run: RunResult, standard: str | None, cases: bool = True) -> dict:
    """The run as strict JSON data: non-finite numbers are the strings "nan", "inf" and "-inf"."""
    return {
        "schema": VERIFY_SCHEMA, "tool_version": __version__, "standard_override": standard,
        "exit_code": run.exit_code, "summary": {"total": len(run.cases), **run.counts()},
        "coverage": run.coverage.to_json() if run.coverage else None,
        **({"cases": [c.to_json() for c in run.cases]} if cases else {}),
    }


def write_json(path: Path, data: dict) -> None:
    if isinstance(data, dict) and data.get("schema") == VERIFY_SCHEMA and data.get("cases"):
        head = {k: v for k, v in data.items() if k != "cases"}
        return atomic_write_text(path, _verify_chunks(head, map(json_safe, data["cases"])))
    atomic_write_text(path, json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n")


def write_verify_json(path: Path, run: RunResult, standard: str | None) -> None:
    """write_json(path, verify_json(run, standard)), the same bytes, written case by case: a run of
    thousands of cases is never held as JSON data (or text) all at once."""
    if not run.cases:
        return write_json(path, verify_json(run, standard))
    from .merged import MergedRun

    head = verify_json(run, standard, cases=False)
    if isinstance(run, MergedRun):  # (report: each case's text as the merge kept it)
        return atomic_write_text(path, _document(head, (c.text() for c in run.cases)))
    atomic_write_text(path, _verify_chunks(head, (c.to_json() for c in run.cases)))


def _verify_chunks(head: dict, cases):
    """The text of a verify JSON document with these cases (strict JSON data), one case at a time."""
    return _document(head, (_case_text(c).replace("\n", "\n    ") for c in cases))  # (strings hold no raw newline)


def _document(head: dict, texts):
    """The verify JSON document of head with these cases' texts (each indented as it stands in "cases")."""
    text = json.dumps(json_safe(head), indent=2, allow_nan=False)
    yield text[:-2] + ',\n  "cases": ['  # (head ends with "\n}")
    for i, t in enumerate(texts):
        yield ("," if i else "") + "\n    " + t
    yield "\n  ]\n}\n"


def _case_text(case: dict) -> str:
    """One case as indented JSON, its error data on one line: thousands of numbers one per line would be
    most of the file."""
    if "errors" not in case:
        return json.dumps(case, indent=2, allow_nan=False)
    text = json.dumps({k: v for k, v in case.items() if k != "errors"}, indent=2, allow_nan=False)
    return f'{text[:-2]},\n  "errors": {json.dumps(case["errors"], allow_nan=False, separators=(",", ":"))}\n}}'


def write_error_csvs(directory: Path, run: RunResult) -> int:
    """msOpST-style error reports: one CSV of failing elements per non-passing case."""
    import csv  # (here: a run without --csv-errors never imports it)

    directory.mkdir(parents=True, exist_ok=True)
    written = 0
    for c in run.cases:
        if c.status == PASS or not c.error_rows:
            continue
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["Index", "Coords", "ExpectOut", "RealOut", "FpDiff", "RateDiff", "UlpDiff"])
        shape = c.shape
        for index, expect, real, fp, rate, ulp in c.error_rows:
            coords = list(np.unravel_index(index, shape)) if shape else []
            w.writerow([index, " ".join(map(str, coords)), repr(expect), repr(real), repr(fp), repr(rate), repr(ulp)])
        atomic_write_text(safe_child(directory, f"{c.case_id}.csv"), buf.getvalue())
        written += 1
    return written


def merged_run(cases: list[dict], coverage: Coverage | None = None, strict: bool = False) -> RunResult:
    fields_ = {f for f in CaseResult.__dataclass_fields__} - {"error_rows"}  # (verify keeps those in its CSVs)
    out = []
    for c in cases:
        result = CaseResult(**{"shape": [], **{k: v for k, v in c.items() if k in fields_}})  # (shape: optional)
        if c.get("kind") not in ("precision", "contract"):  # results from before `kind`
            result.kind = "contract" if _guess_contract(result) else "precision"
        out.append(result)
    return RunResult(out, strict=strict, coverage=coverage)
