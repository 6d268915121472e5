"""The HTML report (verify --html, report --html): one self-contained file that works offline.

No scripts, fonts or images from anywhere else: the style is inline, the plots are PNGs inside the
page as data: URIs. The page: totals, an op x dtype overview in the defect matrix's style, then every
case that did not pass (failing first; MISTRUSTED warnings last among them) with its verdict, the
rule broken, metrics against their limits, worst elements, repro line and plots; then the passing
cases, each with its plots one click away (<details>).

Plots need matplotlib (the extra aclnn-cli[report]); `require_matplotlib` says how to get it. The page
is written case by case and the plots are drawn on worker processes, a few cases ahead of the writer.
"""

from __future__ import annotations

import base64
import html
import importlib
import importlib.util
import io
from collections import Counter, deque
from pathlib import Path

from .. import __version__
from ..errors import UserError
from ..judge.results import (CRASH, ERROR, FAIL, LAYOUT, MISSING, MISTRUSTED, PASS, STATUS, TIMEOUT, CaseResult,
                             RunResult)
from ..pipeline.parallel import Runner
from .progress import Progress
from ..tensor.storage import atomic_write_text
from .errordata import read_errors, term_scale
from .rows import INFO, as_row, number
from .palette import HISTOGRAM_LEGEND, SCATTER_LEGEND

INSTALL_HINT = "--html needs matplotlib: pip install 'aclnn-cli[report]' (or pip install matplotlib)"
ORDER = {s: i for i, s in enumerate((FAIL, LAYOUT, STATUS, CRASH, TIMEOUT, MISSING, ERROR, MISTRUSTED, PASS))}
COLOUR = {PASS: "#1a7f37", MISTRUSTED: "#9a6700", MISSING: "#9a6700", ERROR: "#8250df"}  # others: red
AHEAD = 8  # plots drawn ahead of the page writer, per worker
PLOT_BUDGET = 2000  # cases drawn at most, those that did not pass first: the page's time and size stay bounded
QUANTIZED_COLOURS = 64  # a palette PNG: a quarter of the bytes, no visible loss for flat-coloured plots


def require_matplotlib() -> None:
    """UserError (exit 2) with how to install it, before any work, when --html cannot draw."""
    if importlib.util.find_spec("matplotlib") is None:
        raise UserError(INSTALL_HINT)


def write_html(path: Path, run: RunResult, standard: str | None = None, jobs: int = 1,
               title: str = "verify report") -> None:
    """Write the report of `run` to path (a temporary name, then a rename). title: the heading, after "aclnn-cli"."""
    require_matplotlib()
    importlib.import_module(".plots", __package__)  # (before the workers fork: each starts with matplotlib loaded)

    cases = sorted(run.cases, key=lambda c: (ORDER.get(c.status, 0), c.case_id))
    atomic_write_text(path, _page(run, cases, standard, jobs, title))


def _page(run: RunResult, cases: list[CaseResult], standard: str | None, jobs: int, title: str):
    bad = [c for c in cases if c.status != PASS]  # (cases come sorted: these first)
    good = cases[len(bad):]
    yield _head(run, standard, title, len(bad), len(good))
    yield _overview(run.cases, {id(c): i for i, c in enumerate(cases)})
    yield f'<section id="not-passing"><h2>Cases that did not pass ({len(bad)})</h2>\n'
    if not bad:
        yield "<p>None: every case passed.</p>\n"
    figures = _figures(cases, jobs)
    for i, c in enumerate(bad):
        yield _case(i, c, next(figures))
    yield (f'</section>\n<section id="passing"><h2>Passing cases ({len(good)})</h2>\n'
           "<p>Each with its plots one click away.</p>\n")
    for i, c in enumerate(good, len(bad)):
        yield _passing(i, c, next(figures))
    yield "</section>\n</body>\n</html>\n"


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0 auto;max-width:1400px;
padding:0 18px 40px;color:#1f2328}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:18px;border-bottom:1px solid #d0d7de;margin-top:28px}
h3{font-size:15px;margin:0 0 6px;word-break:break-all}
table{border-collapse:collapse;margin:6px 0 10px}td,th{border:1px solid #d0d7de;padding:3px 7px;text-align:left;
vertical-align:top}th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;color:#fff;border-radius:4px;padding:0 6px;margin-right:6px;font-size:12px;
font-weight:600}.case{border:1px solid #d0d7de;border-radius:6px;padding:10px 12px;margin:12px 0}
.fact{color:#57606a}.reason{font-weight:600}.over{color:#cf222e;font-weight:600}.within{color:#1a7f37}
pre{background:#f6f8fa;padding:6px 8px;white-space:pre-wrap;word-break:break-all;margin:6px 0}
img.plot{max-width:100%;height:auto;display:block;margin-top:6px}
details{border-bottom:1px solid #eaeef2;padding:3px 0}summary{cursor:pointer}
.matrix td{text-align:center;min-width:90px}.cell-pass{background:#dafbe1}.cell-fail{background:#ffebe9}
.cell-warn{background:#fff8c5}.note,.legend{color:#57606a;font-size:12px;margin:2px 0 6px}
"""


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _badge(status: str) -> str:
    return f'<span class="badge" style="background:{COLOUR.get(status, "#cf222e")}">{_e(status)}</span>'


def _head(run: RunResult, standard: str | None, title: str, n_bad: int, n_good: int) -> str:
    counts = ", ".join(f"{n} {s}" for s, n in run.counts().items() if n)
    verdict = "all cases pass" if run.exit_code == 0 else "gate failed"
    override = f", standard for every case: {_e(standard)}" if standard else ""
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>aclnn-cli {_e(title)}: {_e(verdict)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            f"<h1>aclnn-cli {_e(title)}</h1>\n"
            f'<p class="reason">{len(run.cases)} cases: {_e(counts)} &ndash; {_e(verdict)} (exit {run.exit_code})</p>\n'
            f'<p class="fact">aclnn-cli {_e(__version__)}{override}. '
            f'<a href="#overview">Overview</a> &middot; <a href="#not-passing">{n_bad} did not pass</a> &middot; '
            f'<a href="#passing">{n_good} passing</a></p>\n')


def _anchor(i: int) -> str:
    return f"case-{i}"


def _overview(cases: list[CaseResult], position: dict[int, int]) -> str:
    """Counts by op x dtype (precision cases) and op x product (contract cases), a cell per pair in the defect
    matrix's style: "passes (n)", or how many of its cases did not pass, linked to the first of them."""
    parts = ['<section id="overview"><h2>Overview</h2>\n']
    for kind, key, label in (
            ("precision", "dtype", "Precision cases by op and dtype"),
            ("contract", "product", "Contract cases (phase one must reject the call) by op and product")):
        mine = [c for c in cases if c.kind == kind]
        if not mine:
            continue
        columns = sorted({str(getattr(c, key)) for c in mine})
        groups: dict[tuple[str, str], list[CaseResult]] = {}
        for c in mine:
            groups.setdefault((str(c.op), str(getattr(c, key))), []).append(c)
        parts.append(f"<h3>{_e(label)}</h3>\n<table class=\"matrix\"><tr><th>op</th>"
                     + "".join(f"<th>{_e(col)}</th>" for col in columns) + "</tr>\n")
        for op in sorted({op for op, _ in groups}):
            parts.append(f"<tr><th>{_e(op)}</th>")
            for col in columns:
                parts.append(_cell(groups.get((op, col), []), position))
            parts.append("</tr>\n")
        parts.append("</table>\n")
    if len(parts) == 1:
        parts.append("<p>No cases.</p>\n")
    parts.append("</section>\n")
    return "".join(parts)


def _cell(group: list[CaseResult], position: dict[int, int]) -> str:
    if not group:
        return "<td></td>"
    counts = Counter(c.status for c in group)
    title = _e(", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda x: ORDER.get(x[0], 0))))
    failing = [c for c in group if c.status not in (PASS, MISTRUSTED)]
    if not failing and not counts[MISTRUSTED]:
        return f'<td class="cell-pass" title="{title}">passes ({len(group)})</td>'
    first = min((c for c in group if c.status != PASS), key=lambda c: position[id(c)])
    css, text = ("cell-fail", f"{len(failing)} of {len(group)} fail") if failing else \
        ("cell-warn", f"{counts[MISTRUSTED]} of {len(group)} mistrusted")
    return f'<td class="{css}" title="{title}"><a href="#{_anchor(position[id(first)])}">{text}</a></td>'


def _facts(c: CaseResult) -> str:
    shape = "x".join(map(str, c.shape)) if c.shape else "scalar"
    judged = "contract" if c.kind == "contract" else c.standard
    facts = " &middot; ".join(map(_e, (c.op, c.dtype, f"[{shape}]", c.product, judged)))
    return f'<p class="fact">{facts}</p>\n'


def _case(i: int, c: CaseResult, figure: str) -> str:
    parts = [f'<article class="case" id="{_anchor(i)}" data-status="{_e(c.status)}">\n'
             f"<h3>{_badge(c.status)}{_e(c.case_id)}</h3>\n", _facts(c),
             f'<p class="reason">{_e(c.reason)}</p>\n']
    if isinstance(c.metrics, dict):
        parts.append(_rows_table(c))
    if c.worst:
        parts.append(_worst_table(c.worst))
    if c.repro:
        parts.append(f"<pre>repro: {_e(c.repro)}</pre>\n")
    parts.append(figure)
    parts.append("</article>\n")
    return "".join(parts)


def _passing(i: int, c: CaseResult, figure: str) -> str:
    body = figure or '<p class="note">no plots: no elements were compared</p>\n'
    return (f'<details id="{_anchor(i)}" data-status="PASS"><summary>{_badge(c.status)}{_e(c.case_id)} '
            f'<span class="fact">&ndash; {_e(c.reason)}</span></summary>\n{_facts(c)}{body}</details>\n')


def _rows_table(c: CaseResult) -> str:
    """The verdict's rows (what the standard judged, per output), then the metrics every standard counts."""
    several = len({r["output"] for r in c.rows}) > 1
    out = []
    if c.rows:
        out.append(f'<table class="metrics"><tr>{"<th>output</th>" if several else ""}<th>metric</th><th>value</th>'
                   '<th>limit</th><th></th><th></th></tr>\n')
        for r in map(as_row, c.rows):
            verdict = "within" if r.within else "over"
            out.append(f'<tr>{f"<td>{_e(r.output)}</td>" if several else ""}<td>{_e(r.metric)}</td>'
                       f'<td class="num {verdict}">{_e(number(r.value))}</td><td>{_e(r.comparison)} '
                       f'{_e(number(r.limit))}</td><td class="{verdict}">{verdict}</td><td>{_e(r.note)}</td></tr>\n')
        out.append("</table>\n")
    else:
        out.append('<p class="note">no limits: results written before aclnn-cli/verify/4 carry no verdict rows</p>\n')
    info = " &middot; ".join(f"{_e(k)} {_e(number(c.metrics[k]))}" for k in INFO
                             if isinstance(c.metrics.get(k), (int, float, str)))
    out.append(f'<p class="note">{info}</p>\n' if info else "")
    return "".join(out)


def _short(x, digits: int = 8):
    """A number of the results file to `digits` significant digits (enough for any float32 value); else as is."""
    if isinstance(x, list) and len(x) == 2 and all(isinstance(v, float) for v in x):  # (a complex element)
        return format(complex(*x), f".{digits}g")
    return format(x, f".{digits}g") if isinstance(x, float) else x


def _worst_table(worst: list) -> str:
    out = ['<table class="worst"><tr><th>coords</th><th>inputs</th><th>expected</th><th>actual</th>'
           "<th>abs error</th><th>rel error (judged)</th><th>ulp error</th></tr>\n"]
    for w in worst:
        if not isinstance(w, dict):
            continue
        ins = w.get("inputs") if isinstance(w.get("inputs"), dict) else {}
        cells = [w.get("coords"), ", ".join(f"{k}={_short(v)}" for k, v in ins.items()), _short(w.get("expected")),
                 _short(w.get("actual"))]
        tail = [w.get("mismatch")] if w.get("mismatch") else [_short(w.get(k), 4) for k in ("abs_error", "rel_error",
                                                                                               "ulp_error")]
        span = ' colspan="3"' if w.get("mismatch") else ""
        out.append("<tr>" + "".join(f"<td>{_e(x)}</td>" for x in cells)
                   + "".join(f'<td class="num"{span}>{_e(x)}</td>' for x in tail) + "</tr>\n")
    out.append("</table>\n")
    return "".join(out)


def _figures(cases: list[CaseResult], jobs: int):
    """The <img> (or a note) of each case in order, drawn on `jobs` workers a few cases ahead. A case's error
    data is read (report: back from its spill) when its plot is submitted, never every case's at once."""
    having = [k for k, c in enumerate(cases) if c.has_errors]
    plotted = set(having[:PLOT_BUDGET])  # (over the budget: listed without plots)
    drawn = len(plotted)
    with Progress("report: plots", drawn, None) as bar, Runner(max(1, min(jobs, drawn))) as run:
        def submit(k: int, c: CaseResult):  # its future; None: no plots; False: over the budget
            if k not in plotted:
                return False if c.has_errors else None
            task = _task(c)
            return run.submit(draw, task) if task else None

        pending: deque = deque()
        todo = iter(enumerate(cases))
        for k, c in todo:
            pending.append((c, submit(k, c)))
            if len(pending) >= AHEAD * run.jobs:
                break
        while pending:
            c, future = pending.popleft()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append((nxt[1], submit(*nxt)))
            if future is None:
                yield ""
            elif future is False:
                yield f'<p class="note">plots not drawn: more than {PLOT_BUDGET} cases have them</p>\n'
            else:
                png, problem, scaled = future.result()
                bar.advance(c.case_id, 0)
                yield _img(c, png, scaled) if png else f'<p class="note">plots unavailable: {_e(problem)}</p>\n'


def _img(c: CaseResult, png: bytes, scaled: bool) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img class="plot" alt="plots of {_e(c.case_id)}" src="data:image/png;base64,{data}">\n{_caption(scaled)}'


def _caption(scaled: bool) -> str:
    """What the panels show: the same words under every figure, so each case reads on its own."""
    key = lambda items: " ".join(f'<span style="color:{colour}">{symbol}</span> {_e(text)}'
                                 for colour, symbol, text in items)
    y = "error / max(|golden|, the op's term scale): what the default gate judges" if scaled else "relative error"
    return (f'<p class="legend">Error against each input the kernel reads (y: {y}; a sample, zero errors at '
            f"the bottom): {key(SCATTER_LEGEND if scaled else SCATTER_LEGEND[:4] + SCATTER_LEGEND[5:])}. "
            f"Signed ulp histogram (every element): {key(HISTOGRAM_LEGEND)}. "
            "Error map (2+ dims): largest ulp error per block of the view, one colour scale for every case.</p>\n")


def _task(c: CaseResult) -> dict | None:
    if not isinstance(c.errors, dict):
        return None
    return {"errors": c.errors, "op": c.op, "standard": c.standard, "params": c.params}


def draw(task: dict) -> tuple[bytes | None, str, bool]:
    """(the PNG of a case's plots or None, why not, whether errors are relative to the term scale): on a
    worker, from the verify JSON's data alone."""
    from ..standards.rules import FIXED, STANDARDS
    from ..judge.reliefbound import share
    from ..ops import find_op
    from .plots import case_figure

    try:
        data = read_errors(task["errors"])
        std = STANDARDS.get(task["standard"]) or FIXED.get(task["standard"])
        scale = term_scale(task["op"], data) if std is not None and std.relief else None
        key = std.element_limit if std is not None else None
        limit = task["params"].get(key) if key else None
        if scale is not None and isinstance(limit, (int, float)) and limit > 0:  # (as the relief judged: reliefbound.py)
            scale = scale * share(0, float(limit), 8 if data.judged_dtype == "float64" else 4)
        try:
            read = [t.name for t in find_op(task["op"]).inputs if t.read_by_kernel and t.name in data.inputs]
        except KeyError:
            read = list(data.inputs)
        png = case_figure(data, read, scale, float(limit) if isinstance(limit, (int, float)) else None)
        return _quantized(png), "", scale is not None
    except Exception as exc:  # (one case's plot must not cost the report: the page says why it is missing)
        return None, f"{type(exc).__name__}: {str(exc)[:200]}", False


def _quantized(png: bytes) -> bytes:
    from PIL import Image  # (matplotlib's own dependency)

    buf = io.BytesIO()
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(QUANTIZED_COLOURS, method=2)  # (2: fast octree)
    image.save(buf, format="png", optimize=False, compress_level=6)
    return buf.getvalue()
