"""verify: judge each case's device dump against its golden.

Dumps are memory-mapped and compared chunk by chunk. With the default
standard, elements that break the plain rule are re-judged once with what the
op knows (relief): the magnitude of the terms that cancel (condition-aware
scale) and the device's documented edge results. Relief only ever lowers an
element's error and touches only flagged elements, so the common path reads
nothing but dump and golden.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from . import manifest as M
from .compare import ElementErrors, Metrics, element_errors
from .dtypes import DType, round_from_f64
from .emulate import kernel_output
from .errors import UserError
from .layout import source_positions
from .ops.contract import compute_dtype
from .standards import DEFAULT_STANDARD, Standard, find_standard
from .storage import CHUNK, chunks, gather, in_view_mask, open_storage, read_view, view_positions

PASS, FAIL, LAYOUT, MISTRUSTED, MISSING, STATUS, ERROR = (
    "PASS", "FAIL", "LAYOUT", "MISTRUSTED", "MISSING", "STATUS", "ERROR")
ALL_STATUSES = (PASS, FAIL, LAYOUT, MISTRUSTED, MISSING, STATUS, ERROR)
MISTRUST_ZERO_SHARE = 0.9
CSV_ROW_LIMIT = 100_000


@dataclass(frozen=True)
class Options:
    standard: str | None = None  # overrides each case's own
    tolerance: Mapping[str, float] = field(default_factory=dict)  # overrides the standard's parameters
    signed_zeros: bool = False
    error_rows: bool = False  # collect failing elements (for --csv-errors)
    chunk: int = CHUNK


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
    params: dict = field(default_factory=dict)
    metrics: dict | None = None
    benchmark: dict | None = None
    worst: list = field(default_factory=list)
    repro: str = ""
    path: str = ""
    error_rows: list = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("error_rows")
        return d


@dataclass
class RunResult:
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if any(c.status == ERROR for c in self.cases):
            return 2
        return 0 if all(c.status == PASS for c in self.cases) else 1

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(ALL_STATUSES, 0)
        for c in self.cases:
            out[c.status] += 1
        return out


def tolerance_dtype(m: M.CaseManifest) -> tuple[DType, float]:
    """(dtype whose thresholds apply, relative-error floor).

    A result rounded through a narrower compute dtype (Hardsigmoid's promoted type) can be no
    more precise than it: thresholds follow the coarser precision, the floor the larger one.
    """
    out = m.output.dtype
    inner = compute_dtype(m.op, {t.name: t.dtype for t in m.tensors})
    return min((out, inner), key=lambda d: d.precision), max(out.smallest_normal, inner.smallest_normal)


def _standard(m: M.CaseManifest, opts: Options) -> tuple[Standard, dict]:
    name = opts.standard or m.standard or DEFAULT_STANDARD
    overrides = {**(m.raw.get("tolerance") or {}), **opts.tolerance} if not opts.standard or opts.standard == m.standard \
        else dict(opts.tolerance)
    try:
        std = find_standard(name)
        return std, std.params(tolerance_dtype(m)[0], overrides)
    except KeyError as exc:
        raise UserError(exc.args[0], where=str(m.dir)) from None


def verify_case(m: M.CaseManifest, opts: Options = Options()) -> CaseResult:
    std, params = _standard(m, opts)
    out = m.output
    result = CaseResult(m.case_id, m.op.name, out.dtype.name, list(out.layout.shape), m.product, PASS, std.name, "",
                        params=params, path=str(m.dir), repro=repro_command(m, opts))
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
    if out.layout.numel == 0:
        result.reason = "empty tensor: nothing to compare (phase one and layout only)"
    else:
        cmp = Comparison(m, std, params, opts)
        metrics, bench = cmp.run(dump, gold)
        verdict = std.judge(metrics, params, tolerance_dtype(m)[0], bench)
        result.status, result.reason = (PASS if verdict.passed else FAIL), verdict.reason
        result.metrics, result.benchmark = metrics.to_json(), bench.to_json() if bench else None
        result.worst = [describe_element(m, dump, cmp.reference_storage(gold), i) for i in metrics.worst_indices()]
        result.error_rows = cmp.rows
        if verdict.passed:
            doubt = mistrust(m, metrics)
            if doubt:
                result.status, result.reason = MISTRUSTED, doubt
    outside = writes_outside_view(m, dump)
    if outside:
        result.status, result.reason = LAYOUT, f"{outside}; values inside the view: {result.reason}"
    return result


def mistrust(m: M.CaseManifest, metrics: Metrics) -> str | None:
    """Why a passing case cannot show anything, or None."""
    zeros = metrics.zero_goldens / metrics.compared if metrics.compared else 0.0
    if zeros > MISTRUST_ZERO_SHARE:
        return (f"{zeros:.0%} of the golden is zero: a kernel writing zeros would pass too "
                f"(widen the inputs so most results are non-zero)")
    fills = {t["name"]: t.get("fill", {}) for t in m.raw["tensors"] if t["role"] == "input" and not t.get("null")}
    read = [t.name for t in m.op.inputs if t.read_by_kernel]
    if m.output.layout.numel > 1 and all(_constant(fills.get(n, {})) for n in read):
        return "every input the kernel reads is constant: one value cannot show a kernel's errors"
    return None


def _constant(fill: dict) -> bool:
    return "constant" in fill or ("values" in fill and len({str(v) for v in fill["values"]}) == 1)


class Comparison:
    """One case's chunked comparison under one standard."""

    def __init__(self, m: M.CaseManifest, std: Standard, params: dict, opts: Options) -> None:
        self.m, self.std, self.opts = m, std, opts
        self.rule = std.rule(params)
        _, self.floor = tolerance_dtype(m)
        self.inputs = None
        self.rows: list = []
        self._emulated: np.ndarray | None = None

    def _input_storages(self) -> dict:
        if self.inputs is None:
            self.inputs = {t.name: open_storage(t.file, t.dtype.np_dtype, t.layout.storage_size, f"input {t.name}")
                           for t in self.m.inputs}
        return self.inputs

    def _emulate(self, start: int, stop: int) -> np.ndarray:
        ins = self._input_storages()
        shape = self.m.output.layout.shape
        values = {t.name: gather(ins[t.name], t.layout, shape, start, stop) for t in self.m.inputs}
        return kernel_output(self.m, values)

    def reference_storage(self, gold: np.ndarray) -> np.ndarray:
        """What this standard compares against, as a storage-shaped array (the emulator for bitwise)."""
        if self.std.against != "emulator":
            return gold
        out = self.m.output
        ref = np.array(gold)
        for start, stop in chunks(out.layout.numel, self.opts.chunk):
            ref[view_positions(out.layout, start, stop)] = self._emulate(start, stop)
        return ref

    def _errors(self, a: np.ndarray, g: np.ndarray) -> ElementErrors:
        e = element_errors(a, g, np.maximum(np.abs(g), self.floor), self.m.output.dtype,
                           flush_ok=self.std.flush_ok, signed_zeros=self.opts.signed_zeros)
        e.violation = self.rule(e)
        return e

    def run(self, dump: np.ndarray, gold: np.ndarray) -> tuple[Metrics, Metrics | None]:
        out = self.m.output
        metrics, bench = Metrics(), (Metrics() if self.std.benchmark else None)
        for start, stop in chunks(out.layout.numel, self.opts.chunk):
            with np.errstate(invalid="ignore", over="ignore"):
                a = read_view(dump, out.layout, start, stop).astype(np.float64)
                g = read_view(gold, out.layout, start, stop).astype(np.float64)
                emulated = self._emulate(start, stop).astype(np.float64) if self.std.against == "emulator" or bench else None
            if self.std.against == "emulator":
                g = emulated
            errs = self._errors(a, g)
            if self.std.relief and (errs.violation.any() or errs.special.any()):
                metrics.relieved += self._relieve(errs, a, g, start)
            metrics.add(errs, start)
            if bench is not None:
                bench.add(self._errors(emulated, g), start)
            if self.opts.error_rows and len(self.rows) < CSV_ROW_LIMIT:
                bad = np.flatnonzero(errs.violation | errs.special)[:CSV_ROW_LIMIT - len(self.rows)]
                self.rows.extend((int(start + i), float(g[i]), float(a[i]), float(errs.abs[i]), float(errs.rel[i]),
                                  float(errs.ulp[i])) for i in bad)
        return metrics, bench

    def _relieve(self, errs: ElementErrors, a, g, start: int) -> int:
        """Re-judge flagged elements against the op's term scale and edge results; how many turned out fine."""
        m = self.m
        dtype = m.output.dtype
        idx = np.flatnonzero(errs.violation | errs.special)
        ins = self._gather(start + idx)
        with np.errstate(all="ignore"):
            ref = m.op.golden_f64(ins)
            ai, gi = a[idx], g[idx]
            finite = errs.finite[idx]
            den = np.maximum(np.maximum(np.abs(gi), ref.scale), self.floor)
            rel = errs.abs[idx] / den
            accepted = gi  # the result each element is judged against: golden, or the device's edge result
            special = errs.special[idx].copy()
            if m.op.edge is not None:
                where, device = m.op.edge(ins)
                alt = round_from_f64(device, dtype).astype(np.float64)
                same_special = (np.isnan(alt) & np.isnan(ai)) | (np.isinf(alt) & (alt == ai))
                special &= ~(where & same_special)
                alt_rel = np.where(np.isfinite(alt) & np.isfinite(ai), np.abs(ai - alt) / den, np.inf)
                use_alt = where & (alt_rel < rel)
                rel = np.where(use_alt, alt_rel, rel)
                rel = np.where(where & same_special, 0.0, rel)
                accepted = np.where(use_alt, alt, gi)
            signed = np.where(rel > 0, (np.abs(ai) - np.abs(accepted)) / den, 0.0)
        before = errs.violation[idx] | errs.special[idx]
        errs.rel[idx] = np.where(finite, rel, 0.0)
        errs.signed[idx] = np.where(finite, signed, 0.0)
        errs.special[idx] = special
        errs.violation = self.rule(errs)
        return int((before & ~(errs.violation[idx] | errs.special[idx])).sum())

    def _gather(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        ins = self._input_storages()
        shape = self.m.output.layout.shape
        with np.errstate(invalid="ignore"):
            return {t.name: np.asarray(ins[t.name][source_positions(t.layout, shape, flat)]).astype(np.float64)
                    for t in self.m.inputs}


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
        result.reason = (f"phase one returned {got} ({M.STATUS_NAMES.get(got, 'unknown')}), "
                         f"expected {expected} ({M.STATUS_NAMES[expected]})")
    elif required:
        result.reason = f"phase one returned {got} as expected"
    return result


def describe_element(m: M.CaseManifest, dump, reference, flat: int) -> dict:
    """Coordinates, inputs, expected and actual value, and errors of one logical element."""
    out = m.output
    pos = view_positions(out.layout, flat, flat + 1)
    with np.errstate(all="ignore"):
        actual = float(np.asarray(dump[pos]).astype(np.float64)[0])
        expected = float(np.asarray(reference[pos]).astype(np.float64)[0])
        ins = {t.name: float(gather(open_storage(t.file, t.dtype.np_dtype, t.layout.storage_size, t.name),
                                    t.layout, out.layout.shape, flat, flat + 1).astype(np.float64)[0])
               for t in m.inputs}
        e = element_errors(np.array([actual]), np.array([expected]), np.maximum(abs(expected), out.dtype.smallest_normal),
                           out.dtype)
    return {"index": flat, "coords": list(out.layout.coords(flat)), "inputs": ins, "expected": expected,
            "actual": actual, "abs_error": float(e.abs[0]), "rel_error": float(e.rel[0]), "ulp_error": float(e.ulp[0])}


def repro_command(m: M.CaseManifest, opts: Options) -> str:
    """One line that regenerates (if needed) and re-verifies just this case; gen keeps the dump."""
    std = f" --standard {opts.standard}" if opts.standard else ""
    tol = "".join(f" --tolerance {k}={v:g}" for k, v in opts.tolerance.items())
    return (f"aclnn-cli gen {m.raw.get('source')} --case {m.case_id} -o {m.dir.parent} && "
            f"aclnn-cli verify {m.dir}{std}{tol}")


def verify_dirs(case_dirs: list[Path], opts: Options = Options(), on_case=None) -> RunResult:
    run = RunResult()
    for d in case_dirs:
        try:
            res = verify_case(M.load(d), opts)
        except UserError as exc:
            res = CaseResult(d.name, "?", "?", [], "?", ERROR, opts.standard or DEFAULT_STANDARD, str(exc), path=str(d))
        run.cases.append(res)
        if on_case:
            on_case(res)
    return run
