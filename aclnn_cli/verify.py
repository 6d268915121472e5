"""verify: judge each case's device dump against its golden.

Dumps are memory-mapped and compared chunk by chunk. With the default
standard, elements that break the plain rule are re-judged once with what the
op knows (relief): the magnitude of the terms that cancel (condition-aware
scale) and the device's documented edge results. Relief only ever lowers an
element's error and touches only flagged elements, so the common path reads
nothing but dump and golden.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from . import manifest as M
from .mistrust import mistrust
from .results import ERROR, FAIL, LAYOUT, MISSING, MISTRUSTED, PASS, STATUS, CaseResult, RunResult
from .compare import ElementErrors, Metrics, apply_rule, element_errors
from .dtypes import DType, round_from_f64
from .emulate import kernel_output
from .errors import UserError
from .layout import source_positions
from .ops.contract import compute_dtype
from .standards import DEFAULT_STANDARD, STANDARDS, Standard, find_standard
from .parallel import Runner, as_completed, batches, jobs_for
from .storage import CHUNK, StorageFile, check_file_sha256, check_size, chunks, in_view_mask

SPLIT = 1 << 22  # cases larger than this are split into ranges across workers
CSV_ROW_LIMIT = 100_000

@dataclass(frozen=True)
class Options:
    standard: str | None = None  # overrides each case's own
    tolerance: Mapping[str, float] = field(default_factory=dict)  # overrides the standard's parameters
    signed_zeros: bool = False
    error_rows: bool = False  # collect failing elements (for --csv-errors)
    chunk: int = CHUNK
    strict: bool = False  # MISTRUSTED fails the run (by default it is a warning)


def tolerance_dtype(m: M.CaseManifest) -> tuple[DType, float]:
    """(dtype whose thresholds apply, relative-error floor).

    A result rounded through a narrower compute dtype (Hardsigmoid's promoted type) can be no
    more precise than it: thresholds follow the coarser precision, the floor the larger one.
    """
    mine = m.__dict__.get("_tolerance_dtype")  # asked four times per case: kept on the manifest
    if mine is not None:
        return mine
    key = (m.op.name, tuple(t.dtype.name for t in m.tensors))
    if key not in _TOLERANCE_DTYPES:
        out = m.output.dtype
        inner = compute_dtype(m.op, {t.name: t.dtype for t in m.tensors})
        _TOLERANCE_DTYPES[key] = (min((out, inner), key=lambda d: d.precision),
                                  max(out.smallest_normal, inner.smallest_normal))
    m.__dict__["_tolerance_dtype"] = _TOLERANCE_DTYPES[key]
    return _TOLERANCE_DTYPES[key]


_TOLERANCE_DTYPES: dict[tuple, tuple[DType, float]] = {}  # per (op, tensor dtypes): thousands of cases share a few


def _standard(m: M.CaseManifest, opts: Options) -> tuple[Standard, dict]:
    name = opts.standard or m.standard or DEFAULT_STANDARD
    overrides = {**(m.raw.get("tolerance") or {}), **opts.tolerance} if not opts.standard or opts.standard == m.standard \
        else dict(opts.tolerance)
    try:
        std = find_standard(name)
        return std, std.params(tolerance_dtype(m)[0], overrides)
    except (KeyError, ValueError) as exc:
        raise UserError(exc.args[0], where=str(m.dir)) from None


def check_run_tolerances(manifests: list[M.CaseManifest], opts: Options) -> None:
    """The run's --standard/--rtol/--atol/--tolerance must be valid for every case it judges.

    Checked before any case is judged, so a bad setting is a usage error (exit 2), never a verdict.
    """
    seen = set()
    for m in manifests:
        name = opts.standard or m.standard or DEFAULT_STANDARD
        dtype = tolerance_dtype(m)[0]
        if (name, dtype.name) in seen or name not in STANDARDS:  # a case's own unknown standard: its ERROR
            continue
        seen.add((name, dtype.name))
        try:
            find_standard(name).params(dtype, opts.tolerance)
        except (KeyError, ValueError) as exc:
            raise UserError(f"{exc.args[0]} (judging {dtype.name} cases with '{name}')",
                            where="--rtol/--atol/--tolerance") from None


def verify_case(m: M.CaseManifest, opts: Options = Options(), run: Runner | None = None) -> CaseResult:
    """Judge one case. With a Runner, a large case's ranges are compared by its workers."""
    std, params = _standard(m, opts)
    out = m.output
    result = CaseResult(m.case_id, m.op.name, out.dtype.name, list(out.layout.shape), m.product, PASS, std.name, "",
                        params=params, path=str(m.dir), repro=repro_command(m, opts), kind=_kind(m))
    status_path = m.dir / M.STATUS_FILE
    if m.expect_status != 0:
        return _check_status(result, status_path, m.expect_status, required=True)
    _check_status(result, status_path, 0, required=False)  # optional for a positive case: absent is fine
    if result.status != PASS:
        return result
    if out.dump is None or not os.path.lexists(out.dump):
        result.status, result.reason = MISSING, f"no dump at {out.dump}"
        return result
    n = out.layout.numel
    if n > SPLIT or not out.layout.is_contiguous:  # (small contiguous cases: the sizes are checked on open)
        try:
            check_size(out.dump, out.dtype.np_dtype, out.layout.storage_size, "dump")
            check_size(out.golden, out.dtype.np_dtype, out.layout.storage_size, "golden")
            for t in m.inputs:
                check_size(t.file, t.dtype.np_dtype, t.layout.storage_size, f"input {t.name}")
        except UserError as exc:
            result.status, result.reason = ERROR, str(exc)
            return result
    if n == 0:
        result.reason = "empty tensor: nothing to compare (phase one and layout only)"
        check_files(m)
    else:
        ranges = list(chunks(n, SPLIT // 4)) if run is not None and n > SPLIT else [(0, n)]
        if len(ranges) > 1:  # workers read ranges: whole-file checksums are separate units beside them
            sums = [run.submit(check_file_sha256, *item) for item in _checksummed(m)]
            parts = run.map(compare_range, [(m, opts, s, e, False) for s, e in ranges])
            for f in sums:
                f.result()
        else:
            parts = [compare_range(m, opts, 0, n, True)]
        metrics, bench, rows = parts[0]
        for other, other_bench, other_rows in parts[1:]:
            metrics.merge(other)
            if bench is not None:
                bench.merge(other_bench)
            rows.extend(other_rows[:max(0, CSV_ROW_LIMIT - len(rows))])
        verdict = std.judge(metrics, params, tolerance_dtype(m)[0], bench)
        result.status, result.reason = (PASS if verdict.passed else FAIL), verdict.reason
        result.metrics, result.benchmark = metrics.to_json(), bench.to_json() if bench else None
        if not verdict.passed:  # what a person reads to act on a failure (a pass has nothing to act on)
            result.worst = [describe_element(m, std, i) for i in metrics.worst_indices()]
        result.error_rows = rows
        if verdict.passed:
            doubt = mistrust(m, metrics, opts.strict)
            if doubt:
                result.status, result.reason = MISTRUSTED, doubt
    outside = writes_outside_view(m)
    if outside:
        result.status, result.reason = LAYOUT, f"{outside}; values inside the view: {result.reason}"
    return result


def compare_range(m: M.CaseManifest, opts: Options, start: int, stop: int,
                  checksums: bool = False) -> tuple[Metrics, Metrics | None, list]:
    """Metrics (and benchmark metrics, and failing-element rows) of output elements [start, stop).

    checksums: also check the golden's and inputs' recorded sha256, hashed on the side of the
    reads (for a whole case read by one process).
    """
    std, params = _standard(m, opts)
    cmp = Comparison(m, std, params, opts, checksums)
    try:
        result = cmp.run(start, stop)
        cmp.check_sha256()
        return result
    finally:
        cmp.close()


def _checksummed(m: M.CaseManifest) -> list[tuple[Path, str, str]]:
    """(file, recorded sha256, what) for every file gen wrote that verify reads: golden and inputs."""
    out = m.output
    files = [(out.golden, m.recorded_sha256(out.name, "golden_sha256"), "golden")]
    files += [(t.file, m.recorded_sha256(t.name, "sha256"), f"input {t.name}") for t in m.inputs if not t.null]
    return files


def check_files(m: M.CaseManifest) -> None:
    """Check every recorded checksum of the files verify reads (IntegrityError on a mismatch)."""
    for path, sha, what in _checksummed(m):
        check_file_sha256(path, sha, what)


class Comparison:
    """One case's chunked comparison under one standard."""

    def __init__(self, m: M.CaseManifest, std: Standard, params: dict, opts: Options, checksums: bool = False) -> None:
        self.m, self.std, self.opts = m, std, opts
        self.rule = std.rule(params)
        _, self.floor = tolerance_dtype(m)
        out = m.output
        sha = (lambda name, key: m.recorded_sha256(name, key)) if checksums else (lambda name, key: None)
        self.files: list[StorageFile] = []
        self.dump = self._open(out.dump, out.dtype.np_dtype, out.layout.storage_size, None, "dump")
        self.gold = self._open(out.golden, out.dtype.np_dtype, out.layout.storage_size,
                               sha(out.name, "golden_sha256"), "golden")
        self.inputs = {t.name: self._open(t.file, t.dtype.np_dtype, t.layout.storage_size, sha(t.name, "sha256"),
                                          f"input {t.name}") for t in m.inputs}
        self.rows: list = []

    def _open(self, path: Path, dtype, size: int, sha: str | None, what: str) -> StorageFile:
        f = StorageFile(path, dtype, size, sha256=sha, what=what, exact_size=True)
        self.files.append(f)
        return f

    def check_sha256(self) -> None:
        for f in self.files:
            f.check_sha256()

    def close(self) -> None:
        for f in self.files:
            f.close()

    def _emulate(self, start: int, stop: int) -> np.ndarray:
        shape = self.m.output.layout.shape
        values = {t.name: self.inputs[t.name].gather(t.layout, shape, start, stop) for t in self.m.inputs}
        return kernel_output(self.m, values)

    def _errors(self, a: np.ndarray, g: np.ndarray) -> ElementErrors:
        e = element_errors(a, g, self.floor, self.m.output.dtype, flush_ok=self.std.flush_ok,
                           signed_zeros=self.opts.signed_zeros)
        apply_rule(e, self.rule)
        return e

    def run(self, start: int, stop: int) -> tuple[Metrics, Metrics | None, list]:
        out = self.m.output
        metrics, bench = Metrics(), (Metrics() if self.std.benchmark else None)
        for s in range(start, stop, self.opts.chunk):
            e = min(stop, s + self.opts.chunk)
            a = self.dump.read(out.layout, s, e)
            g = self.gold.read(out.layout, s, e)
            emulated = self._emulate(s, e) if self.std.against == "emulator" or bench is not None else None
            if self.std.against == "emulator":
                g = emulated
            errs = self._errors(a, g)
            if self.std.relief and (errs.special.size or errs.violation.any()):
                metrics.relieved += self._recheck(errs, s)
            metrics.add(errs, s, track_small=bench is not None)
            if bench is not None:
                bench.add(self._errors(emulated, g), s, track_small=True)
            if self.opts.error_rows and len(self.rows) < CSV_ROW_LIMIT:
                bad = np.union1d(np.flatnonzero(errs.violation), errs.special)[:CSV_ROW_LIMIT - len(self.rows)]
                self.rows.extend((int(s + i), float(errs.g[i]), float(errs.a[i]), float(errs.abs[i]), float(errs.rel[i]),
                                  float(errs.ulp[i])) for i in bad)
        return metrics, bench, self.rows

    def _recheck(self, errs: ElementErrors, start: int) -> int:
        """Re-judge flagged elements against the op's term scale and edge results (default standard).

        Returns how many flagged elements turned out fine.
        """
        idx = np.union1d(np.flatnonzero(errs.violation), errs.special)
        bad_before = idx.size
        ai, gi = errs.a[idx].astype(np.float64), errs.g[idx].astype(np.float64)
        with np.errstate(all="ignore"):
            self._relieve(errs, idx, ai, gi, start)
        errs.violation = self.rule(errs)
        still = np.union1d(np.flatnonzero(errs.violation), errs.special)
        return int(bad_before - np.intersect1d(idx, still).size)

    def _relieve(self, errs: ElementErrors, idx: np.ndarray, ai: np.ndarray, gi: np.ndarray, start: int) -> None:
        m, dtype = self.m, self.m.output.dtype
        ins = self._gather(start + idx)
        ref = m.op.golden_f64(ins)
        den = np.maximum(np.maximum(np.abs(gi), ref.scale), self.floor)
        abs_err = errs.abs[idx].astype(np.float64)
        rel = abs_err / den
        accepted = gi  # what each element is judged against: the golden, or the device's edge result
        cleared = np.zeros(idx.size, dtype=bool)
        where, device = m.op.device_edges(ins)
        if where.any():
            alt = round_from_f64(device, dtype).astype(np.float64)
            same_special = (np.isnan(alt) & np.isnan(ai)) | (np.isinf(alt) & (alt == ai))
            cleared = where & same_special
            alt_rel = np.where(np.isfinite(alt) & np.isfinite(ai), np.abs(ai - alt) / den, np.inf)
            use_alt = where & (alt_rel < rel)
            rel = np.where(use_alt, alt_rel, rel)
            accepted = np.where(use_alt, alt, gi)
        finite = np.isfinite(ai) & np.isfinite(gi)
        keep = finite & (rel < errs.rel[idx])  # relief only ever lowers an element's error
        errs.rel[idx[keep]] = rel[keep]
        errs.signed[idx[keep]] = np.where(rel[keep] > 0, (np.abs(ai[keep]) - np.abs(accepted[keep])) / den[keep], 0.0)
        if cleared.any():
            errs.special = np.setdiff1d(errs.special, idx[cleared])

    def _gather(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        shape = self.m.output.layout.shape
        with np.errstate(invalid="ignore"):
            return {t.name: np.asarray(self.inputs[t.name].map[source_positions(t.layout, shape, flat)]).astype(np.float64)
                    for t in self.m.inputs}


def writes_outside_view(m: M.CaseManifest) -> str | None:
    """Storage elements outside the output view that the device changed (compared bit for bit)."""
    out = m.output
    if out.layout.is_contiguous:
        return None
    check_size(out.file, out.dtype.np_dtype, out.layout.storage_size, "initial output storage")
    check_file_sha256(out.file, m.recorded_sha256(out.name, "sha256"), "initial output storage")
    dump = np.fromfile(out.dump, dtype=out.dtype.uint_dtype)
    initial = np.fromfile(out.file, dtype=out.dtype.uint_dtype)
    changed = np.flatnonzero(~in_view_mask(out.layout) & (dump != initial))
    if not changed.size:
        return None
    return f"wrote outside the view: {changed.size} elements, first at storage index {changed[0]}"


def _check_status(result: CaseResult, path: Path, expected: int, required: bool) -> CaseResult:
    try:
        with open(path, "rb") as f:
            data = f.read(256)
    except FileNotFoundError:
        if required:
            result.status, result.reason = MISSING, f"no status file at {path}"
        return result
    except OSError as exc:
        result.status, result.reason = ERROR, f"{path}: cannot read the status file: {exc.strerror}"
        return result
    text = data.decode("ascii", errors="replace").strip()
    try:
        got = int(text.split()[0]) if len(data) < 256 and text.isascii() else None
    except (ValueError, IndexError):
        got = None
    if got is None:
        result.status, result.reason = ERROR, (f"{path}: status file must hold phase one's status as a decimal "
                                               f"integer, got {text[:40]!r}")
        return result
    if got != expected:
        result.status = STATUS
        result.reason = (f"phase one returned {got} ({M.STATUS_NAMES.get(got, 'unknown')}), "
                         f"expected {expected} ({M.STATUS_NAMES[expected]})")
    elif required:
        result.reason = f"phase one returned {got} as expected"
    return result


def describe_element(m: M.CaseManifest, std: Standard, flat: int) -> dict:
    """Coordinates, inputs, expected and actual value, and errors of one logical element."""
    out = m.output
    shape = out.layout.shape
    with np.errstate(all="ignore"):
        ins = {}
        for t in m.inputs:
            with StorageFile(t.file, t.dtype.np_dtype, t.layout.storage_size) as f:
                ins[t.name] = f.gather(t.layout, shape, flat, flat + 1)
        with StorageFile(out.dump, out.dtype.np_dtype, out.layout.storage_size) as f:
            a = f.read(out.layout, flat, flat + 1)
        if std.against == "emulator":
            g = kernel_output(m, ins)
        else:
            with StorageFile(out.golden, out.dtype.np_dtype, out.layout.storage_size) as f:
                g = f.read(out.layout, flat, flat + 1)
        e = element_errors(a, g, out.dtype.smallest_normal, out.dtype)
    expected, actual = float(g.astype(np.float64)[0]), float(a.astype(np.float64)[0])
    element = {"index": flat, "coords": list(out.layout.coords(flat)),
               "inputs": {k: float(v.astype(np.float64)[0]) for k, v in ins.items()},
               "expected": expected, "actual": actual,
               "abs_error": float(e.abs[0]), "rel_error": float(e.rel[0]), "ulp_error": float(e.ulp[0])}
    if e.special.size:  # errors of non-finite values are not numbers: say what disagreed
        element["mismatch"] = f"expected {_name(expected)}, got {_name(actual)}"
    return element


def _name(x: float) -> str:
    return "NaN" if np.isnan(x) else f"{x:.8g}"


def repro_command(m: M.CaseManifest, opts: Options) -> str:
    """One line that regenerates (if needed) and re-verifies just this case; gen keeps the dump."""
    std = f" --standard {opts.standard}" if opts.standard else ""
    tol = "".join(f" --tolerance {k}={v:g}" for k, v in opts.tolerance.items())
    return (f"aclnn-cli gen {m.raw.get('source')} --case {m.case_id} -o {m.dir.parent} && "
            f"aclnn-cli verify {m.dir}{std}{tol}")


def verify_dirs(case_dirs: list[Path], opts: Options = Options(), on_case=None, jobs: int = 1) -> RunResult:
    """Verify the cases in these directories (a manifest that does not load makes its case ERROR).

    With workers, each loads and judges a batch of directories itself, so reading thousands of
    manifests is not a serial step; a case too large for one worker comes back unjudged and is
    split across the pool here.
    """
    if jobs <= 1 or len(case_dirs) <= 1:
        manifests, broken = M.load_all(case_dirs)
        return verify_manifests(manifests, broken, opts, on_case, jobs)
    results: dict[str, CaseResult] = {}
    deferred: list[M.CaseManifest] = []
    size = max(1, min(256, len(case_dirs) // (4 * jobs)))
    with Runner(jobs) as run:
        futures = [run.submit(_load_and_verify, case_dirs[i:i + size], opts) for i in range(0, len(case_dirs), size)]
        for f in as_completed(futures):
            done, large = f.result()
            deferred += large
            for r in done:
                results[r.path] = r
                on_case and on_case(r)
        for m in deferred:
            results[str(m.dir)] = _verify_safely(m, opts, run)
            on_case and on_case(results[str(m.dir)])
    return RunResult([results[k] for k in sorted(results)], strict=opts.strict)


def _load_and_verify(case_dirs: list[Path], opts: Options) -> tuple[list[CaseResult], list[M.CaseManifest]]:
    """A worker's batch: load and judge each case; return the large ones unjudged (to be split)."""
    manifests, broken = M.load_all(case_dirs)
    done = [_broken_result(d, exc, opts) for d, exc in broken]
    large = [m for m in manifests if m.output.layout.numel > SPLIT]
    done += [_verify_safely(m, opts) for m in manifests if m.output.layout.numel <= SPLIT]
    return done, large


def _broken_result(d: Path, exc: UserError, opts: Options) -> CaseResult:
    return CaseResult(d.name, "?", "?", [], "?", ERROR, opts.standard or DEFAULT_STANDARD, str(exc), path=str(d))


def verify_manifests(manifests: list[M.CaseManifest], broken: list[tuple[Path, UserError]] = (),
                     opts: Options = Options(), on_case=None, jobs: int = 1) -> RunResult:
    """Verify many cases: small ones one per worker, large ones split into ranges across workers.

    Results come back sorted by case directory; `broken` (directory, error) pairs become ERROR.
    """
    results: dict[str, CaseResult] = {}
    for d, exc in broken:
        results[str(d)] = _broken_result(d, exc, opts)
        on_case and on_case(results[str(d)])
    units = sum(max(1, m.output.layout.numel // (SPLIT // 4)) for m in manifests)
    jobs = jobs_for(jobs, units)
    with Runner(jobs) as run:
        small = [m for m in manifests if m.output.layout.numel <= SPLIT or jobs == 1]
        futures = [run.submit(_verify_batch, b, opts) for b in batches(small, lambda m: m.output.layout.numel, run.jobs)]
        for m in manifests:
            if m.output.layout.numel > SPLIT and jobs > 1:
                results[str(m.dir)] = _verify_safely(m, opts, run)
                on_case and on_case(results[str(m.dir)])
        for f in as_completed(futures):
            for r in f.result():
                results[r.path] = r
                on_case and on_case(r)
    return RunResult([results[k] for k in sorted(results)], strict=opts.strict)


def _verify_batch(manifests: list[M.CaseManifest], opts: Options) -> list[CaseResult]:
    """Several small cases in one unit of work for the pool (see parallel.batches)."""
    return [_verify_safely(m, opts) for m in manifests]


def _verify_safely(m: M.CaseManifest, opts: Options, run: Runner | None = None) -> CaseResult:
    """A case's verdict; bad files (and I/O failures while reading them) make it ERROR, not the run."""
    try:
        return verify_case(m, opts, run)
    except (UserError, OSError) as exc:
        reason = str(exc) if isinstance(exc, UserError) else f"{getattr(exc, 'filename', '') or m.dir}: {exc.strerror or exc}"
        return CaseResult(m.case_id, m.op.name, m.output.dtype.name, list(m.output.layout.shape), m.product, ERROR,
                          opts.standard or DEFAULT_STANDARD, reason, path=str(m.dir), kind=_kind(m))


def _kind(m: M.CaseManifest) -> str:
    return "contract" if m.expect_status != 0 else "precision"
