"""verify: the verdict of each case (status file, dump, comparison, mistrust, layout) and runs of
many cases across workers. The comparison itself (chunks, relief, checksums) is comparison.py's.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
import shlex
import sys
from pathlib import Path

from ..casedir import manifest as M

from ..casedir import dirs as casedirs
from ..files import statcache
from ..device.outcome import read_status_file, read_verdict, status_mismatch
from ..pipeline.blockdigests import recorded as recorded_blocks
from ..errors import UserError
from ..ops.user import ENV as USER_OPS_ENV
from .comparison import CSV_ROW_LIMIT, Options, check_files, checksummed_files, checksummed_names, compare_range
from .judgeddtype import tolerance_dtype
from .judging import OutputJudging, case_judging
from .elements import describe_elements, writes_outside_view
from .mistrust import mistrust
from .smallbatch import precompare
from ..pipeline.parallel import Runner, paused_gc
from ..pipeline.stages import RANGE, Stage, case_elements, is_large, ranges, run_stage, run_stage_on_dirs
from .results import (ERROR, FAIL, LAYOUT, MISSING, MISTRUSTED, PASS, STATUS, UNCERTIFIED, CaseResult, Repro, RunResult,
                      by_path, rows_of)
from ..standards.rules import DEFAULT_STANDARD, STANDARDS, find_standard
from ..tensor.storage import check_file_sha256, check_size

__all__ = ["CSV_ROW_LIMIT", "Options", "check_run_tolerances", "tolerance_dtype", "verify_case", "verify_dirs",
           "verify_manifests"]



def check_run_tolerances(manifests: list[M.CaseManifest], opts: Options) -> None:
    """The run's --standard/--rtol/--atol/--tolerance must be valid for every case it judges.

    Checked before any case is judged, so a bad setting is a usage error (exit 2), never a verdict.
    """
    seen = set()
    for m in manifests:
        name = opts.standard or m.standard or DEFAULT_STANDARD
        dtype = tolerance_dtype(m)[0]
        if dtype.is_integer or dtype.is_complex:  # (their own standard, whatever the run names: judging._standard)
            continue
        if (name, dtype.name) in seen or name not in STANDARDS:  # a case's own unknown standard: its ERROR
            continue
        seen.add((name, dtype.name))
        try:
            find_standard(name).params(dtype, opts.tolerance)
        except (KeyError, ValueError) as exc:
            raise UserError(f"{exc.args[0]} (judging {dtype.name} cases)",
                            where="--rtol/--atol/--tolerance") from None


def verify_case(m: M.CaseManifest, opts: Options = Options(), run: Runner | None = None,
                compared: tuple | None = None, judging: tuple[OutputJudging, ...] | None = None) -> CaseResult:
    """Judge one case. With a Runner, a large case's ranges are compared by its workers.
    compared: its comparison, made already with its checksums checked (smallbatch.py's, for a small case).
    judging: how its outputs are judged (judging.case_judging), if made already: else made here, once.

    A case with several outputs (a Rows op's dx and dgamma) judges each on its own, against its own
    allowance; the case passes when every output does, and its reason names each output."""
    judging = judging or case_judging(m, opts)
    outs = tuple(j.out for j in judging)
    out, std, params = judging[0].out, judging[0].std, judging[0].params
    where = str(m.dir)
    result = CaseResult(m.case_id, m.op.name, out.dtype.name, list(out.layout.shape), sys.intern(m.product), PASS, std.name, "",
                        params=params, path=where, repro=_repro(m, opts), kind=_kind(m))
    run_verdict = read_verdict(where)  # the device run of this case did not complete (aclnn-cli run)
    if run_verdict is not None:
        result.status, result.reason = run_verdict
        return result
    status_path = casedirs.join(where, M.STATUS_FILE)
    if m.expect_status != 0:
        return _check_status(result, status_path, m.expect_status, required=True)
    if not m.judged:  # (every output null: an outputMask of all false, which the API accepts and computes nothing for)
        _check_status(result, status_path, 0, required=True)
        if result.status == PASS:
            result.reason = "every output is null (nothing asked): phase one returned 0, nothing to compare"
        return result
    _check_status(result, status_path, 0, required=False)  # optional for a positive case: absent is fine
    if result.status != PASS:
        return result
    if compared is not None:
        # smallbatch.py judged it: one small contiguous output (no storage outside its view), its dump read, its
        # golden and inputs hashed or proven by the suite's record, all under WORTH_BYTES (no case record)
        _settle(result, m, [(out, _verdict_of(judging[0], [compared]))], opts.strict)
        return result
    for o in outs:
        if o.dump_path is None or not os.path.lexists(o.dump_path):
            result.status, result.reason = MISSING, f"no dump at {o.dump}"
            return result
    try:
        for o in outs:
            if is_large(o.layout.numel) or not o.layout.is_contiguous:  # (small contiguous: checked on open)
                check_size(o.dump, o.dtype.np_dtype, o.layout.storage_size, "dump")
                check_size(o.golden, o.dtype.np_dtype, o.layout.storage_size, "golden")
                for t in m.inputs:
                    if not t.null:
                        check_size(t.file, t.dtype.np_dtype, t.layout.storage_size, f"input {t.name}")
    except UserError as exc:
        result.status, result.reason = ERROR, str(exc)
        return result
    nbytes = sum(o.layout.storage_size * o.dtype.itemsize for o in outs) + sum(
        t.layout.storage_size * t.dtype.itemsize for t in m.inputs if not t.null)
    worth = nbytes >= statcache.WORTH_BYTES  # (a small case has no record to read, nor one worth writing)
    before, proven = None, False
    digests = checksummed_names(m)
    recorded = worth and statcache.unchanged(where, digests)
    proven = recorded and not opts.rehash  # (else: hash them, as they are read)
    if worth and not recorded:  # (--rehash of files the record vouches for: the same record would be written)
        before = statcache.snapshot(where, list(digests))
    memo: dict = {}  # (the case's relief memo: the outputs and passes of one case share its blocks' reference)
    judged = [(j.out, _judge_output(m, j, opts, run, proven, i == 0, memo)) for i, j in enumerate(judging)]
    if all(v is None for _, v in judged):
        result.reason = "empty tensor: nothing to compare (phase one and layout only)"
        proven or check_files(m)
    else:
        _settle(result, m, judged, opts.strict)
    if before is not None:  # every digest checked out: a later verify need not hash these files again
        statcache.record(where, before, digests)
    for o in outs:
        outside = writes_outside_view(m, o)
        if outside:
            name = f"{o.name}: " if len(outs) > 1 else ""
            result.status, result.reason = LAYOUT, f"{name}{outside}; values inside the view: {result.reason}"
            break
    return result


@dataclass
class _OutputVerdict:
    """One output's judgement (the case's verdict is made from these)."""

    std: object
    passed: bool
    reason: str
    metrics: object
    bench: object
    rows: list
    verdict_rows: tuple = ()  # the standard's rows (standards.Row), not yet naming this output


def _judge_output(m: M.CaseManifest, judged: OutputJudging, opts: Options, run: Runner | None, proven: bool,
                  first: bool, memo: dict | None = None) -> _OutputVerdict | None:
    """Compare one output (None: it is empty). first: its comparison also hashes the inputs.

    An output of a family whose elements share roundings (a Rows op's row sums) that fails with relief on its
    flagged elements is judged once more with every element against its term scale (Options.relieve_all):
    the row sum's shared error may lean a row's errors one way while each is within its bound; a defect's
    errors stay over it."""
    v = _compare_output(m, judged, opts, run, proven, first, memo)
    if v is not None and not v.passed and v.std.relief and m.op.family.shared_errors and not opts.relieve_all:
        v = _compare_output(m, judged, replace(opts, relieve_all=True), run, True, False, memo)
    return v


def _compare_output(m: M.CaseManifest, judged: OutputJudging, opts: Options, run: Runner | None, proven: bool,
                    first: bool, memo: dict | None = None) -> _OutputVerdict | None:
    out = judged.out
    n = out.layout.numel
    if n == 0:
        return None
    pieces = ranges(n, run.jobs) if run is not None and is_large(n) else [(0, n)]
    if len(pieces) > 1:  # workers read ranges: whole-file checksums are separate units beside them
        blocks = None if proven else recorded_blocks(m, out)  # (else each range checks the golden it reads)
        sums = [] if proven else [run.submit(check_file_sha256, *item) for item in checksummed_files(m)
                                  if _hashed_whole(item, out, first, blocks)]
        parts = run.map(compare_range, [(m, opts, s, e, False, None, out.name, True, blocks) for s, e in pieces])
        for f in sums:
            f.result()
    else:
        parts = [compare_range(m, opts, 0, n, not proven, judged, out.name, first, relief_memo=memo)]
    return _verdict_of(judged, parts)


def _verdict_of(judged: OutputJudging, parts: list) -> _OutputVerdict:
    """One output's verdict from its comparison's parts (ranges): (metrics, benchmark metrics, error rows)."""
    std, params = judged.std, judged.params
    metrics, bench, rows = parts[0]
    for other, other_bench, other_rows in parts[1:]:
        metrics.merge(other)
        if bench is not None:
            bench.merge(other_bench)
        rows.extend(other_rows[:max(0, CSV_ROW_LIMIT - len(rows))])
    verdict = std.judge(metrics, params, judged.dtype, bench)
    return _OutputVerdict(std, verdict.passed, verdict.reason, metrics, bench, rows, verdict.rows)


def _hashed_whole(item: tuple, out: M.TensorEntry, first: bool, blocks) -> bool:
    """Whether a split comparison of `out` hashes this checksummed file in a unit of its own: its golden (unless
    its ranges check its blocks) and scale, and with the first output the inputs (as a whole case's comparison
    hashes what it reads: each output its own golden, the first the inputs)."""
    path, _, what = item
    if what.startswith("input "):
        return first
    if what == "golden":
        return path == out.golden and not blocks
    return what == f"{out.name} allowance"


def _settle(result: CaseResult, m: M.CaseManifest, judged: list, strict: bool) -> None:
    """The case's verdict from its outputs': the first failing output's metrics (else the first's), and a
    reason naming each output when there are several."""
    several = len(judged) > 1
    if several:
        failing = [(o, v) for o, v in judged if v is not None and not v.passed]
        out, v = failing[0] if failing else next((o, v) for o, v in judged if v is not None)
        result.reason = "; ".join(f"{o.name}: {w.reason}" for o, w in judged if w is not None)
    else:
        (out, v), = judged
        failing, result.reason = not v.passed, v.reason
    result.status = PASS if v.passed else FAIL
    if several and out is not judged[0][0]:
        result.dtype, result.shape = out.dtype.name, list(out.layout.shape)
    metrics = v.metrics
    result.metrics = metrics.to_json()
    if v.bench:  # (unset fields keep their defaults: None, [])
        result.benchmark = v.bench.to_json()
    if metrics.errors:
        result.errors = metrics.errors.summary(v.passed)  # (the HTML report's)
    if not v.passed:  # what a person reads to act on a failure (a pass has nothing to act on)
        result.worst = describe_elements(m, v.std, metrics.worst_items(), out)
    if v.rows:
        result.error_rows = v.rows
    result.rows = rows_of([(o.name, w.verdict_rows) for o, w in judged if w is not None])  # (every output's)
    if v.passed and not failing:
        doubt = mistrust(m, metrics, strict)
        if doubt:
            result.status, result.reason = MISTRUSTED, doubt
    uncertified = m.uncertified_elements
    if uncertified:  # (never silent: every report renders the reason)
        result.reason += (f"; golden: {uncertified} {UNCERTIFIED}; the float64 value rounded once, which a correct "
                          f"kernel may miss by one ulp)")


def _check_status(result: CaseResult, path: str, expected: int, required: bool) -> CaseResult:
    try:
        got = read_status_file(path)  # (a regular file only, opened without blocking, bounded)
    except UserError as exc:
        result.status, result.reason = ERROR, str(exc)
        return result
    if got is None:
        if required:
            result.status, result.reason = MISSING, f"no status file at {path}"
        return result
    if got != expected:
        result.status, result.reason = STATUS, status_mismatch(got, expected)
    elif required:
        result.reason = f"phase one returned {got} as expected"
    return result


def _repro(m: M.CaseManifest, opts: Options) -> Repro:
    """The repro line of a case, less the case id and path its result holds (results of a run share one).
    Every user value is shell-quoted; a user op's case names the op files it needs (--ops)."""
    out = os.path.dirname(str(m.dir)) or "."  # str(m.dir.parent), for a path as Path writes it
    user_paths = "" if _bundled(m.op.name) else os.environ.get(USER_OPS_ENV, "")  # (a bundled op's line names none)
    return _repro_of(m.op.name, str(m.raw.get('source')), out, opts.standard, tuple(opts.tolerance.items()), user_paths)


@functools.lru_cache(maxsize=256)
def _repro_of(op: str, source: str, out: str, standard: str | None, tolerance: tuple, user_paths: str) -> Repro:
    """_repro's line, made once for the many cases of a run that share a suite file, an output root and options."""
    std = f" --standard {shlex.quote(standard)}" if standard else ""
    tol = "".join(f" --tolerance {shlex.quote(f'{k}={v:g}')}" for k, v in tolerance)
    cli = _cli(op, user_paths)
    return Repro(f"{cli} gen {shlex.quote(source)}", out, f"{std}{tol}", cli)


@functools.lru_cache(maxsize=64)
def _cli(op: str, user_paths: str) -> str:
    """`aclnn-cli`, with `--ops PATH` for each path --ops/ACLNN_CLI_OPS gave when `op` is not bundled."""
    if not user_paths or _bundled(op):
        return "aclnn-cli"
    return " ".join(["aclnn-cli", *(f"--ops {shlex.quote(p)}" for p in user_paths.split(os.pathsep) if p)])


@functools.lru_cache(maxsize=256)
def _bundled(op: str) -> bool:
    """Whether op is declared in aclnn-cli's own ops/ (not in a user's --ops file)."""
    from ..ops.declcheck import is_bundled
    from ..ops.registry import DECLARED_IN

    return op in DECLARED_IN and is_bundled(DECLARED_IN[op])


def verify_dirs(case_dirs: list[Path], opts: Options = Options(), on_case=None, jobs: int = 1,
                root: Path | None = None) -> RunResult:
    """Verify the cases in these directories (a manifest that does not load makes its case ERROR).

    With workers, each loads and judges a batch of directories itself, so reading thousands of
    manifests is not a serial step; a case too large for one worker is split across the pool.
    root: the suite's directory, where its small cases' stat record is kept (statcache.SuiteRecord).
    """
    return _run(lambda stage, collect: run_stage_on_dirs(stage, case_dirs, jobs, collect), opts, on_case, root)


def verify_manifests(manifests: list[M.CaseManifest], broken: list[tuple[Path, UserError]] = (),
                     opts: Options = Options(), on_case=None, jobs: int = 1, root: Path | None = None) -> RunResult:
    """Verify many cases: small ones in batches per worker, large ones split into ranges across workers.

    Results come back sorted by case directory; `broken` (directory, error) pairs become ERROR.
    """
    results = [_broken_result(d, exc, opts) for d, exc in broken]
    for r in results:
        on_case and on_case(r)
    return _run(lambda stage, collect: run_stage(stage, manifests, jobs, lambda m, r: collect(m.case_id, 0, r)),
                opts, on_case, root, results)


def _run(run_on, opts: Options, on_case, root: Path | None, results: list | None = None) -> RunResult:
    """The run's results, from run_on(stage, collect); the suite's stat record read before and written after."""
    results = results if results is not None else []
    record = statcache.SuiteRecord.load(str(root), opts.rehash) if root is not None else None
    fresh: dict[str, list[str]] = {}
    examined: list[str] = []  # (the cases the small-batch pass read: the others keep their lines, never wrong)

    def collect(case_id: str, elements: int, r) -> None:
        if type(r) is tuple:  # (a small case the small-batch pass read: the record's lines of its files, if proven)
            r, lines = r
            key = record.case_key(r.path)
            examined.append(key)
            if lines is not None:
                fresh[key] = record.previous[key] if lines is True else lines
        results.append(r)
        on_case and on_case(r)

    run_on(_stage(opts, record), collect)
    if record is not None:
        record.write(examined, fresh)
    return _by_directory(results, opts)


def _stage(opts: Options, record: statcache.SuiteRecord | None = None) -> Stage:
    return Stage(size=case_elements, batch=_verify_batch, split=_verify_split, broken=_broken_result,
                 args=(opts, record), splittable=_splittable)


def _splittable(m: M.CaseManifest) -> bool:
    """Whether a large case is split into ranges across workers: not where a block of its Rows op is larger than a
    range. Relief reads a flagged element's whole block, so each range gathered it again (a 4096 x 4096 matmul is one
    block of 16M elements, flagged in every range: 16 gathers of both operands); such a case is one worker's, its
    blocks gathered once."""
    geo = m.geometry if m.expect_status == 0 and not m.op.family.element_local else None
    return geo is None or geo.block <= RANGE


def _by_directory(results: list[CaseResult], opts: Options) -> RunResult:
    """The run's results sorted by case directory (one per directory: the last one judged).

    (Collected in a list, not a dict keyed by path: a result keeps its path compactly, see results.py.)
    """
    return RunResult(by_path(results), strict=opts.strict)


def _broken_result(d: Path, exc: UserError, opts: Options, record=None) -> CaseResult:
    return CaseResult(d.name, "?", "?", [], "?", ERROR, opts.standard or DEFAULT_STANDARD, str(exc), path=str(d))


@paused_gc()
def _verify_batch(manifests: list[M.CaseManifest], opts: Options, record: statcache.SuiteRecord | None = None) -> list:
    """Several small cases in one unit of work for the pool (see parallel.batches); those that can be are
    compared in one vectorised pass first (smallbatch.py). With the suite's record, a case whose files that pass
    read has (result, the record's lines of its files, or None if one could not be proven) in place of its
    result."""
    judgings = [_judging(m, opts) for m in manifests]
    proofs: dict | None = {} if record is not None else None
    compared = precompare(manifests, opts, judgings, record, proofs)
    results: list = [_verify_safely(m, opts, compared=compared.get(i), judging=judgings[i])
                     for i, m in enumerate(manifests)]
    for i, lines in (proofs or {}).items():
        results[i] = (results[i], lines)
    return results


def _judging(m: M.CaseManifest, opts: Options) -> tuple[OutputJudging, ...] | None:
    """How the case is judged, once for the batch's passes (None: it cannot be; verify_case says why)."""
    try:
        return case_judging(m, opts)
    except Exception:
        return None


def _verify_split(run: Runner, m: M.CaseManifest, opts: Options, record=None) -> CaseResult:
    return _verify_safely(m, opts, run)


def _verify_safely(m: M.CaseManifest, opts: Options, run: Runner | None = None, compared: tuple | None = None,
                   judging: tuple[OutputJudging, ...] | None = None) -> CaseResult:
    """A case's verdict; bad files (and I/O failures while reading them) make it ERROR, not the run."""
    try:
        return verify_case(m, opts, run, compared, judging)
    except (UserError, OSError) as exc:
        reason = str(exc) if isinstance(exc, UserError) else f"{getattr(exc, 'filename', '') or m.dir}: {exc.strerror or exc}"
        return CaseResult(m.case_id, m.op.name, m.output.dtype.name, list(m.output.layout.shape), m.product, ERROR,
                          opts.standard or DEFAULT_STANDARD, reason, path=str(m.dir), kind=_kind(m))


def _kind(m: M.CaseManifest) -> str:
    return "contract" if m.expect_status != 0 else "precision"
