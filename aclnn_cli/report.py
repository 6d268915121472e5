"""Human and machine output of runs: rich tables on the terminal, JSON for CI."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from . import __version__
from .storage import atomic_write_text
from .verify import PASS, RunResult

VERIFY_SCHEMA = "aclnn-cli/verify/1"
STYLE = {"PASS": "green", "FAIL": "bold red", "LAYOUT": "bold red", "MISSING": "yellow", "STATUS": "bold red",
         "ERROR": "bold magenta"}


def _g(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def _worst(w: dict | None) -> str:
    if not w:
        return "-"
    ins = ", ".join(f"{k}={v:.8g}" for k, v in w["inputs"].items())
    return f"element {w['coords']} ({ins}): expected {w['expected']:.8g}, got {w['actual']:.8g}"


def _short_worst(w: dict | None) -> str:
    return "-" if not w else f"{w['coords']} exp {w['expected']:.6g} got {w['actual']:.6g}"


def print_cases(console: Console, run: RunResult, show_passing: bool = True) -> None:
    """One row per case; then, for every case that did not pass, why and where."""
    rows = [c for c in run.cases if show_passing or c.status != PASS]
    if rows:
        table = Table(title="verify: per case")
        for col in ("case", "status", "max abs", "max rel", "MERE", "MARE", "worst element"):
            table.add_column(col, overflow="fold", justify="right" if col.startswith(("max", "M")) else "left")
        for c in rows:
            m = c.metrics or {}
            table.add_row(c.case_id, f"[{STYLE[c.status]}]{c.status}[/]", _g(m.get("max_abs_error")),
                          _g(m.get("max_rel_error")), _g(m.get("mere")), _g(m.get("mare")), _short_worst(c.worst))
        console.print(table)
    for c in run.cases:
        if c.status != PASS:
            console.print(f"[{STYLE[c.status]}]{c.status}[/] {c.case_id} ({c.standard}): {c.reason}", soft_wrap=True)
            if c.worst:
                console.print(f"    worst {_worst(c.worst)}", soft_wrap=True)
            console.print(f"    in {c.path}", soft_wrap=True)


def print_summary(console: Console, run: RunResult) -> None:
    table = Table(title="verify: summary")
    statuses = [s for s in STYLE if any(c.status == s for c in run.cases)]
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
