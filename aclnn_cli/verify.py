"""verify: judge each case's device dump against its golden.

Dumps are memory-mapped and compared chunk by chunk. With the default
standard, elements that break the plain rule are re-judged once with what the
op knows (relief): the magnitude of the terms that cancel (condition-aware
scale), the device's legitimate edge results, and flush-to-zero of subnormal
goldens. Relief only ever lowers an element's error; it is applied to the few
flagged elements, so the common path reads nothing but dump and golden.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import manifest as M
from .compare import DEFAULT_STANDARD, ElementErrors, Metrics, Standard, element_errors, find_standard
from .dtypes import DType, round_from_f64
from .ops.contract import compute_dtype
from .errors import UserError
from .layout import source_positions
from .storage import CHUNK, chunks, gather, in_view_mask, open_storage, read_view, view_positions

PASS, FAIL, MISSING, ERROR, STATUS, LAYOUT = "PASS", "FAIL", "MISSING", "ERROR", "STATUS", "LAYOUT"


@dataclass
class CaseResult:
    case_id: str
    op: str
    dtype: str
    shape: list
    product: str
    status: str
    standard: str
    reason: str
    metrics: dict | None = None
    worst: dict | None = None
    path: str = ""

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class RunResult:
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if any(c.status == ERROR for c in self.cases):
            return 2
        return 0 if all(c.status == PASS for c in self.cases) else 1

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in (PASS, FAIL, LAYOUT, MISSING, STATUS, ERROR)}
        for c in self.cases:
            out[c.status] += 1
        return out


def _standard_for(m: M.CaseManifest, override: str | None) -> Standard:
    name = override or m.standard or DEFAULT_STANDARD
    try:
        return find_standard(name)
    except KeyError as exc:
        raise UserError(exc.args[0], where=str(m.dir)) from None


def verify_case(m: M.CaseManifest, standard: str | None = None, chunk: int = CHUNK) -> CaseResult:
    std = _standard_for(m, standard)
    out = m.output
    result = CaseResult(m.case_id, m.op.name, out.dtype.name, list(out.layout.shape), m.product, PASS, std.name, "",
                        path=str(m.dir))
    status_path = m.dir / M.STATUS_FILE
    if m.expect_status != 0:
        return _check_status(result, status_path, m.expect_status, required=True)
    if status_path.exists():
        _check_status(result, status_path, 0, required=False)
        if result.status != PASS:
            return result
    if out.dump is None or not out.dump.exists():
        result.status, result.reason = MISSING, f"no dump at {out.dump}"
        return result
    try:
        dump = open_storage(out.dump, out.dtype.np_dtype, out.layout.storage_size, "dump")
        gold = open_storage(out.golden, out.dtype.np_dtype, out.layout.storage_size, "golden")
    except UserError as exc:
        result.status, result.reason = ERROR, str(exc)
        return result
    metrics = compare_storages(m, std, dump, gold, chunk)
    verdict = std.judge(metrics, tolerance_dtype(m)[0])
    result.status = PASS if verdict.passed else FAIL
    result.reason = verdict.reason
    outside = writes_outside_view(m, dump)
    if outside:
        result.status, result.reason = LAYOUT, f"{outside}; values inside the view: {verdict.reason}"
    result.metrics = metrics.to_json()
    worst = metrics.first_special if metrics.special_mismatches else metrics.max_rel_at
    if worst >= 0:
        result.worst = describe_element(m, dump, gold, worst, metrics)
    return result


def writes_outside_view(m: M.CaseManifest, dump: np.ndarray) -> str | None:
    """Storage elements outside the output view that the device changed (compared bit for bit)."""
    out = m.output
    if out.layout.is_contiguous:
        return None
    initial = open_storage(out.file, out.dtype.np_dtype, out.layout.storage_size, "initial output")
    u = out.dtype.uint_dtype
    changed = np.flatnonzero(~in_view_mask(out.layout) & (np.asarray(dump).view(u) != np.asarray(initial).view(u)))
    if not changed.size:
        return None
    return f"wrote outside the view: {changed.size} elements, first at storage index {changed[0]}"


def _check_status(result: CaseResult, path: Path, expected: int, required: bool) -> CaseResult:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        result.status, result.reason = MISSING, f"no status file at {path}"
        return result
    try:
        got = int(text.split()[0])
    except (ValueError, IndexError):
        result.status, result.reason = ERROR, f"{path}: status file must hold an integer status, got {text[:40]!r}"
        return result
    if got != expected:
        result.status = STATUS
        result.reason = f"phase one returned {got} ({M.STATUS_NAMES.get(got, 'unknown')}), expected {expected} ({M.STATUS_NAMES[expected]})"
    elif required:
        result.reason = f"phase one returned {got} as expected"
    return result


def tolerance_dtype(m: M.CaseManifest) -> tuple[DType, DType]:
    """(dtype whose thresholds apply, dtype whose floor applies).

    A result rounded through a narrower compute dtype (Hardsigmoid's promoted type) can be no
    more precise than it: thresholds follow the coarser precision, the floor the larger one.
    """
    out = m.output.dtype
    inner = compute_dtype(m.op, {t.name: t.dtype for t in m.tensors})
    coarse = min((out, inner), key=lambda d: d.precision)
    return coarse, max((out, inner), key=lambda d: d.smallest_normal)


def compare_storages(m: M.CaseManifest, std: Standard, dump: np.ndarray, gold: np.ndarray, chunk: int = CHUNK) -> Metrics:
    out = m.output
    dtype, floor_dtype = tolerance_dtype(m)
    floor = max(std.floor(dtype), std.floor(floor_dtype))
    rule = std.rule(dtype)
    metrics = Metrics()
    inputs = None
    for start, stop in chunks(out.layout.numel, chunk):
        with np.errstate(invalid="ignore", over="ignore"):
            a = read_view(dump, out.layout, start, stop).astype(np.float64)
            g = read_view(gold, out.layout, start, stop).astype(np.float64)
        den = np.maximum(np.abs(g), floor)
        errs = element_errors(a, g, den, out.dtype, rule)  # ulps of the output dtype
        if std.relief and (errs.violation.any() or errs.special.any()):
            if inputs is None:
                inputs = {t.name: open_storage(t.file, t.dtype.np_dtype, t.layout.storage_size, f"input {t.name}")
                          for t in m.inputs}
            metrics.relieved += _relieve(m, errs, a, g, start, inputs, floor, rule)
        metrics.add(errs, start)
    return metrics


def _gather_inputs(m: M.CaseManifest, inputs: dict, flat: np.ndarray) -> dict[str, np.ndarray]:
    with np.errstate(invalid="ignore"):
        return {t.name: np.asarray(inputs[t.name][source_positions(t.layout, m.output.layout.shape, flat)]).astype(np.float64)
                for t in m.inputs}


def _relieve(m: M.CaseManifest, errs: ElementErrors, a, g, start: int, inputs: dict, floor: float, rule) -> int:
    """Re-judge flagged elements against the op's term scale, edge results and flush-to-zero.

    Returns how many flagged elements turned out fine.
    """
    dtype = m.output.dtype
    idx = np.flatnonzero(errs.violation | errs.special)
    ins = _gather_inputs(m, inputs, start + idx)
    with np.errstate(all="ignore"):
        ref = m.op.golden_f64(ins)
        ai, gi = a[idx], g[idx]
        finite = errs.finite[idx]
        den = np.maximum(np.maximum(np.abs(gi), ref.scale), floor)
        abs_err = np.where(finite, np.abs(ai - gi), 0.0)
        rel = abs_err / den
        rel[(ai == 0) & (np.abs(gi) < dtype.smallest_normal)] = 0.0  # subnormal golden flushed to zero
        special = errs.special[idx].copy()
        if m.op.edge is not None:
            where, device = m.op.edge(ins)
            alt = round_from_f64(device, dtype).astype(np.float64)
            same_special = np.isnan(alt) & np.isnan(ai) | (np.isinf(alt) & (alt == ai))
            special &= ~(where & same_special)
            alt_rel = np.where(np.isfinite(alt) & np.isfinite(ai), np.abs(ai - alt) / den, np.inf)
            rel = np.where(where, np.minimum(rel, alt_rel), rel)
            rel = np.where(where & same_special, 0.0, rel)
    before = errs.violation[idx] | errs.special[idx]
    errs.rel[idx] = np.where(finite, rel, 0.0)
    errs.signed[idx] = np.where(finite, (np.abs(ai) - np.abs(gi)) / den, 0.0)
    errs.violation[idx] = rule(abs_err, rel, gi) & finite
    errs.special[idx] = special
    return int((before & ~(errs.violation[idx] | errs.special[idx])).sum())


def describe_element(m: M.CaseManifest, dump, gold, flat: int, metrics: Metrics) -> dict:
    """The inputs, expected and actual value of one logical element, for a report."""
    out = m.output
    pos = view_positions(out.layout, flat, flat + 1)
    with np.errstate(all="ignore"):
        actual = float(np.asarray(dump[pos]).astype(np.float64)[0])
        expected = float(np.asarray(gold[pos]).astype(np.float64)[0])
        ins = {t.name: float(gather(open_storage(t.file, t.dtype.np_dtype, t.layout.storage_size, t.name),
                                    t.layout, out.layout.shape, flat, flat + 1).astype(np.float64)[0])
               for t in m.inputs}
    return {"index": flat, "coords": list(out.layout.coords(flat)), "inputs": ins,
            "expected": expected, "actual": actual, "abs_error": abs(actual - expected)}


def verify_dirs(case_dirs: list[Path], standard: str | None = None, chunk: int = CHUNK, on_case=None) -> RunResult:
    run = RunResult()
    for d in case_dirs:
        try:
            m = M.load(d)
        except UserError as exc:
            run.cases.append(CaseResult(d.name, "?", "?", [], "?", ERROR, standard or DEFAULT_STANDARD, str(exc), path=str(d)))
            continue
        res = verify_case(m, standard, chunk)
        run.cases.append(res)
        if on_case:
            on_case(res)
    return run
