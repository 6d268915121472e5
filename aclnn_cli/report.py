"""Human and machine output of runs: rich tables on the terminal, JSON, JUnit XML and CSV for CI."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from . import __version__
from .errors import UserError
from .storage import atomic_write_text, safe_child
from .verify import ALL_STATUSES, PASS, CaseResult, RunResult

VERIFY_SCHEMA = "aclnn-cli/verify/1"
STYLE = {"PASS": "green", "FAIL": "bold red", "LAYOUT": "bold red", "MISTRUSTED": "yellow", "MISSING": "yellow",
         "STATUS": "bold red", "ERROR": "bold magenta"}


def _g(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def _element(w: dict) -> str:
    ins = ", ".join(f"{k}={v:.8g}" for k, v in w["inputs"].items())
    return (f"{w['coords']} ({ins}): expected {w['expected']:.8g}, got {w['actual']:.8g}, "
            f"abs {w['abs_error']:.3g}, rel {w['rel_error']:.3g}, {w['ulp_error']:.3g} ulp")


def _short_worst(c: CaseResult) -> str:
    if not c.worst:
        return "-"
    w = c.worst[0]
    return f"{w['coords']} exp {w['expected']:.6g} got {w['actual']:.6g}"


def print_cases(console: Console, run: RunResult, show_passing: bool = True) -> None:
    """One row per case; then, for every case that did not pass, why, where, and how to reproduce."""
    rows = [c for c in run.cases if show_passing or c.status != PASS]
    if rows:
        table = Table(title="verify: per case")
        for col in ("case", "status", "max abs", "max rel", "MERE", "MARE", "worst element"):
            table.add_column(col, overflow="fold", justify="right" if col.startswith(("max", "M")) else "left")
        for c in rows:
            m = c.metrics or {}
            table.add_row(c.case_id, f"[{STYLE[c.status]}]{c.status}[/]", _g(m.get("max_abs_error")),
                          _g(m.get("max_rel_error")), _g(m.get("mere")), _g(m.get("mare")), _short_worst(c))
        console.print(table)
    for c in run.cases:
        if c.status == PASS:
            continue
        console.print(f"[{STYLE[c.status]}]{c.status}[/] {c.case_id} ({c.standard}): {c.reason}", soft_wrap=True)
        for w in c.worst:
            console.print(f"    {_element(w)}", soft_wrap=True, highlight=False)
        console.print(f"    repro: {c.repro}", soft_wrap=True, highlight=False)


def print_summary(console: Console, run: RunResult) -> None:
    table = Table(title="verify: summary")
    statuses = [s for s in ALL_STATUSES if any(c.status == s for c in run.cases)]
    table.add_column("op")
    table.add_column("dtype")
    for s in statuses:
        table.add_column(s, justify="right")
    groups = Counter((c.op, c.dtype, c.status) for c in run.cases)
    for op, dtype in sorted({(c.op, c.dtype) for c in run.cases}):
        table.add_row(op, dtype, *[
            f"[{STYLE[s]}]{groups[(op, dtype, s)]}[/]" if groups[(op, dtype, s)] else "0" for s in statuses])
    console.print(table)
    counts = run.counts()
    verdict = "[green]all cases pass[/]" if run.exit_code == 0 else "[bold red]gate failed[/]"
    console.print(f"{len(run.cases)} cases: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + f" - {verdict}")


def verify_json(run: RunResult, standard: str | None) -> dict:
    return {
        "schema": VERIFY_SCHEMA, "tool_version": __version__, "standard_override": standard,
        "exit_code": run.exit_code, "summary": {"total": len(run.cases), **run.counts()},
        "cases": [c.to_json() for c in run.cases],
    }


def write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def junit_xml(cases: list[dict], name: str = "aclnn-cli verify") -> str:
    """JUnit XML (Jenkins, GitLab): one testcase per case; non-passing cases carry failure/error."""
    suite = ET.Element("testsuite", name=name, tests=str(len(cases)),
                       failures=str(sum(c["status"] not in (PASS, "ERROR") for c in cases)),
                       errors=str(sum(c["status"] == "ERROR" for c in cases)), skipped="0")
    for c in cases:
        tc = ET.SubElement(suite, "testcase", classname=f"{c['op']}.{c['dtype']}", name=c["case_id"])
        if c["status"] == PASS:
            continue
        tag = "error" if c["status"] == "ERROR" else "failure"
        el = ET.SubElement(tc, tag, type=c["status"], message=f"{c['status']}: {c['reason']}")
        lines = [f"{c['status']} ({c['standard']}): {c['reason']}"]
        lines += [_element(w) for w in c.get("worst") or []]
        if c.get("repro"):
            lines.append(f"repro: {c['repro']}")
        el.text = "\n".join(lines)
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def write_error_csvs(directory: Path, run: RunResult) -> int:
    """msOpST-style error reports: one CSV of failing elements per non-passing case."""
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


def load_results(paths: list[Path]) -> list[dict]:
    """Case results from verify --json files (or directories of them); a case id may appear once."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(p.rglob("*.json")))
        elif p.is_file():
            files.append(p)
        else:
            raise UserError("no such file or directory", where=str(p))
    cases: list[dict] = []
    seen: dict[str, Path] = {}
    for f in files:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"not a readable JSON file: {exc}", where=str(f)) from None
        if not isinstance(data, dict) or data.get("schema") != VERIFY_SCHEMA:
            continue  # other JSON lying around (e.g. case.json) is not a result file
        for c in data["cases"]:
            if c["case_id"] in seen:
                raise UserError(f"case {c['case_id']} is also in {seen[c['case_id']]}: shards overlap", where=str(f))
            seen[c["case_id"]] = f
            cases.append(c)
    if not files or not seen:
        raise UserError(f"no verify results ({VERIFY_SCHEMA}) found", where=", ".join(map(str, paths)))
    return cases


def merged_run(cases: list[dict]) -> RunResult:
    fields_ = {f for f in CaseResult.__dataclass_fields__}
    return RunResult([CaseResult(**{k: v for k, v in c.items() if k in fields_}) for c in cases])
