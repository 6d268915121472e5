"""Many small cases compared in one vectorised pass (small cases at a plain script's speed).

A small case's comparison is one chunk. Done case by case, the fixed cost of opening four files through the
chunked machinery and of some thirty NumPy calls on tiny arrays outweighs the work. Here a batch of such cases
is read with one open and one read per file (sizes and checksums checked as LoadedFile checks them), their bits
compared in one pass over all of them, and the errors of the elements each case's chunk would judge computed by
one `element_errors` call (it is element by element: an element's errors do not depend on its neighbours).
A case's chunk is judged as Comparison.run judges it: from the elements whose bits differ from the golden's
(identical.py: a correct float16/bfloat16 kernel's), or every element where most differ (float32). Each case's
Metrics are then folded from its own slice by the functions the per-case path calls (identical.add_differing,
Metrics.add), on the same numbers.

Only what this pass proves plainly is kept: a case whose file cannot be read as gen wrote it (missing, not
regular, another size, another checksum), whose golden holds an Inf or NaN, or which has an element that is
flagged or a special mismatch (relief would read its inputs) is left out, and verify judges it by the usual
path, which gives its verdict or its error. So this pass changes no verdict and no message; it only skips
work. tests/test_small_batch.py checks results and metrics against the per-case path.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

from ..casedir import manifest as M
from ..files import statcache
from ..files.regular import open_regular
from ..tensor.storage import CHUNK
from ..tensor.dtypes import DType
from ..standards.rules import Standard
from .comparison import Comparison, Options
from .compare import NO_INDEX, ElementErrors, Metrics, apply_rule, element_errors
from .sums import sum_squares
from .identical import _MAGNITUDE, MOSTLY, Differing, add_differing, exact_never_flagged
from .heldrelief import Held
from .judging import OutputJudging, output_judging

BATCH_ELEMENTS = 1 << 19  # elements compared in one pass (bounds its memory: 16 MiB of errors at most)
SMALL_CASE = CHUNK  # cases of at most this many output elements (one chunk) are batched
Parts = tuple[Metrics, None, list]  # compare_range's result


def precompare(manifests: list[M.CaseManifest], opts: Options, judgings: list | None = None,
               record: statcache.SuiteRecord | None = None, proofs: dict | None = None) -> dict[int, Parts]:
    """{index into manifests: compare_range(m, opts, 0, n, checksums=True)'s result} for the cases this pass
    judged; the others are absent (verify compares them itself). judgings: each case's judging.case_judging (None
    where it could not be made), if known. record: the suite's stat record (what proves files unchanged without
    hashing them); proofs, if given: {index: the record's lines of that case's golden and inputs, True where they
    are the lines the record holds, None where a file of it could not be proven}, filled in for every case this
    pass read (the others, not looked at, keep their lines)."""
    if opts.error_data or opts.error_rows or opts.relieve_all:  # (every element's errors are wanted)
        return {}
    groups: dict[tuple, tuple[_Judged, list[tuple[int, M.CaseManifest]]]] = {}
    firsts: dict[int, OutputJudging] = {}
    for i, m in enumerate(manifests):
        judged = _first(m, opts, judgings[i] if judgings is not None else ())
        how = judged and _judged(m, opts, judged)
        if how is not None:
            groups.setdefault(how.key, (how, []))[1].append((i, m))
            firsts[i] = judged
    done: dict[int, Parts] = {}
    for how, members in groups.values():
        batch, size = [], 0
        for item in members:
            batch.append(item)
            size += item[1].judged[0].layout.numel
            if size >= BATCH_ELEMENTS:
                done.update(_compare_batch(batch, how, opts, firsts, record, proofs))
                batch, size = [], 0
        if batch:
            done.update(_compare_batch(batch, how, opts, firsts, record, proofs))
    return done


def _first(m: M.CaseManifest, opts: Options, judging) -> OutputJudging | None:
    """The case's one output's judging: given, else made here (None: the usual path says why it cannot be)."""
    if judging:
        return judging[0]
    if judging is None:
        return None
    try:
        return output_judging(m, opts, m.judged[0] if m.judged else None)
    except Exception:
        return None


@dataclass(frozen=True)
class _Judged:
    """How the cases of one pass are judged: their output dtype, standard (parameters, rule) and floor, as
    Comparison.run judges a case's one chunk."""

    dtype: DType
    std: Standard
    params: dict
    rule: object
    floor: float
    signed_zeros: bool
    sparse_ok: bool  # chunks may be judged from their differing elements (identical.exact_never_flagged)

    @property
    def key(self) -> tuple:
        return self.dtype.name, id(self.rule), self.floor, self.signed_zeros  # (rule: one per standard and parameters)


_KNOWN: dict[tuple, _Judged] = {}  # _Judged.key -> the one made for it (a run's thousands of cases share a few)


def _judged(m: M.CaseManifest, opts: Options, judged: OutputJudging) -> _Judged | None:
    """How this pass judges the case, or None: not for this pass (the usual path judges it)."""
    try:
        if m.expect_status != 0 or len(m.judged) != 1 or not m.op.family.element_local or m.uncertified_elements:
            return None
        out = m.judged[0]
        lay, n = out.layout, out.layout.numel
        if (not 0 < n <= SMALL_CASE or (opts.chunk and n > opts.chunk) or out.allowance_path is not None
                or out.dtype.name not in _MAGNITUDE or not lay.is_contiguous or out.dump_path is None):
            return None
        nbytes = n * out.dtype.itemsize + sum(t.layout.storage_size * t.dtype.itemsize for t in m.inputs if not t.null)
        if nbytes >= statcache.WORTH_BYTES:  # (its stat record may prove its files: verify_case's way)
            return None
        std, params = judged.std, judged.params
        if std.against != "golden" or std.benchmark:
            return None
        rule, floor = judged.rule, judged.floor
        key = (out.dtype.name, id(rule), floor, opts.signed_zeros)
        how = _KNOWN.get(key)
        if how is None or how.rule is not rule or how.std is not std or how.params is not params:
            if len(_KNOWN) > 256:
                _KNOWN.clear()
            how = _KNOWN[key] = _Judged(out.dtype, std, params, rule, floor, opts.signed_zeros,
                                        exact_never_flagged(rule, out.dtype, floor))
        return how
    except Exception:  # (anything odd about the case: the usual path says what)
        return None


def _read_into(path: str, view: memoryview, recheck: bool = False) -> os.stat_result | None:
    """The file's stat data (taken before it was read) if the file at path is a regular file of exactly len(view)
    bytes, now read into view; else None. (Anything else, a FIFO holding gen's bytes included, is the per-case
    path's ERROR.) recheck: None too if the stat data moved while it was read (what the suite's record may prove
    is the stat data: the bytes read must be the ones it names, as a hash covers the bytes it read)."""
    try:
        fd, st = open_regular(path)  # (NotRegular, an OSError, for a FIFO or anything else but a regular file)
    except OSError:
        return None
    try:
        if st.st_size != len(view):
            return None
        got = os.readv(fd, [view]) if len(view) else 0
        if recheck and _moved(st, os.fstat(fd)):
            return None
    except OSError:
        return None
    finally:
        os.close(fd)
    return st if got == len(view) else None


def _moved(before: os.stat_result, after: os.stat_result) -> bool:
    return (before.st_size, before.st_mtime_ns, before.st_ctime_ns) != (after.st_size, after.st_mtime_ns,
                                                                       after.st_ctime_ns)


def _read_checked(path: str, view: memoryview, digest: str, name: str, have, lines: list | None,
                  taken: int = 0) -> bool:
    """Whether a golden or input was read into view as gen wrote it: its stat data as the suite's record has it
    (have: the case's lines), else its sha256 the digest recorded. lines (None: no record kept): its line is
    added, unless racily clean (changed within RACY_NS of taken)."""
    st = _read_into(path, view, recheck=bool(have))
    if st is None:
        return False
    line = statcache.line(name, digest, st) if have or lines is not None else None
    if not (line in have or hashlib.sha256(view).hexdigest() == digest):
        return False
    if lines is not None and (line in have or statcache.settled(st, taken)):
        lines.append(line)
    return True


def _read_case(m: M.CaseManifest, dump: memoryview, golden: memoryview, scratch: bytearray,
               record: statcache.SuiteRecord | None = None) -> list[str] | None:
    """Whether a case's dump and golden were read into their views, every file as gen wrote it (golden and
    inputs hashed, the inputs through scratch; one the suite's record proves unchanged is not hashed, an input not
    even read): None if not, else the record's lines of the files proven (all of them, unless one was racy)."""
    out = m.judged[0]
    have, lines, taken = (), None, 0
    if record is not None:
        key = record.case_key(str(m.dir))
        have, lines, taken = record.lines(key), ([] if key is not None else None), record.taken
    try:
        if _read_into(out.dump_path, dump) is None or not _read_checked(
                out.golden_path, golden, m.recorded_sha256(out.name, "golden_sha256"),
                os.path.basename(out.golden_path), have, lines, taken):
            return None
        for t in m.inputs:
            if t.null:
                continue
            nbytes = t.layout.storage_size * t.dtype.itemsize
            digest, name = m.recorded_sha256(t.name, "sha256"), os.path.basename(t.file_path)
            if have:  # (proven by its stat data alone: not read)
                line = statcache.line(name, digest, os.lstat(t.file_path))
                if line in have:
                    if lines is not None:
                        lines.append(line)
                    continue
            if len(scratch) < nbytes:
                scratch.extend(bytes(nbytes - len(scratch)))
            if not _read_checked(t.file_path, memoryview(scratch)[:nbytes], digest, name, have, lines, taken):
                return None
    except Exception:  # (a malformed record: the usual path names it)
        return None
    return lines if lines is not None else []


def _compare_batch(batch: list[tuple[int, M.CaseManifest]], how: _Judged, opts: Options,
                   firsts: dict[int, OutputJudging], record: statcache.SuiteRecord | None = None,
                   proofs: dict | None = None) -> dict[int, Parts]:
    """The batch's cases compared in one pass: {index: parts} of those it judged (module docstring). firsts: each
    case's output's judging, by index. record, proofs: as precompare's."""
    dtype = how.dtype
    sizes = np.array([m.judged[0].layout.numel for _, m in batch], dtype=np.int64)
    starts = np.zeros(len(batch) + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    a, g = np.empty(int(starts[-1]), dtype.np_dtype), np.empty(int(starts[-1]), dtype.np_dtype)
    a_bytes, g_bytes, item = memoryview(a.view(np.uint8)), memoryview(g.view(np.uint8)), dtype.itemsize
    scratch = bytearray()
    read = [_read_case(m, a_bytes[s * item:e * item], g_bytes[s * item:e * item], scratch, record)
            for (_, m), s, e in zip(batch, starts[:-1].tolist(), starts[1:].tolist())]
    keep = np.array([lines is not None for lines in read], dtype=bool)
    if proofs is not None:  # (a case's lines, where every file it checks has one; True: the record's own)
        for (i, m), lines in zip(batch, read):
            if lines and len(lines) == 1 + sum(not t.null for t in m.inputs):
                proofs[i] = True if lines == record.lines(record.case_key(str(m.dir))) else lines
            else:
                proofs[i] = None  # (looked at, not proven: its lines leave the record)
    if not keep.any():
        return {}
    u, (mask, nonfinite_bits) = dtype.uint_dtype, _MAGNITUDE[dtype.name]
    differ = a.view(u) != g.view(u)
    at = np.flatnonzero(differ)
    cut = np.searchsorted(at, starts)
    magnitude = g.view(u) & u.type(mask)  # (few passes over the batch, each a reduction where one will do)
    zero_goldens = np.zeros(len(batch), dtype=np.int64)
    if magnitude.min() == 0:
        zero_goldens = np.diff(np.searchsorted(np.flatnonzero(magnitude == 0), starts))
    if magnitude.max() >= nonfinite_bits:  # (an Inf or NaN golden: the per-case bookkeeping)
        keep[np.searchsorted(starts, np.flatnonzero(magnitude >= nonfinite_bits), side="right") - 1] = False
    # Per case, as Comparison.run judges its one chunk: from the elements that differ (identical.py), or every
    # element (the dense pass) where most differ or the rule may flag an exact element.
    dense = np.diff(cut) * MOSTLY > sizes if how.sparse_ok else np.ones(len(batch), dtype=bool)
    if dense.any():
        differ |= np.repeat(dense, sizes)
        at = np.flatnonzero(differ)  # the elements judged: a case's are at[cut[k]:cut[k + 1]]
        cut = np.searchsorted(at, starts)
    sub = element_errors(a[at], g[at], how.floor, dtype, flush_ok=how.std.flush_ok, signed_zeros=how.signed_zeros)
    apply_rule(sub, how.rule)
    odd = np.concatenate([sub.nonfinite, sub.special])
    if odd.size:  # (special: the per-case bookkeeping of non-finite elements, and their relief)
        keep[np.searchsorted(cut, odd, side="right") - 1] = False
    flagged = np.zeros(len(batch), dtype=bool)
    if how.std.relief:  # (flagged elements: the op's relief, as Comparison.run gives it)
        flagged[np.searchsorted(cut, np.flatnonzero(sub.violation), side="right") - 1] = True
    done = {}
    kept = np.flatnonzero(keep).tolist()
    folded = _folded(sub, at, cut, starts, zero_goldens, sizes, [k for k in kept if cut[k] < cut[k + 1] and not flagged[k]])
    for k in kept:
        lo, hi, n = int(cut[k]), int(cut[k + 1]), int(sizes[k])
        if lo == hi:  # (bit for bit the golden: what add_differing makes of no differing element)
            done[batch[k][0]] = (Metrics(elements=n, compared=n, zero_goldens=int(zero_goldens[k])), None, [])
        elif k in folded:
            done[batch[k][0]] = (folded[k], None, [])
        else:  # (flagged elements, re-judged with the op's relief as Comparison.run re-judges them)
            try:
                metrics = _relieved(batch[k][1], firsts[batch[k][0]], how, opts, sub, slice(lo, hi),
                                    None if dense[k] else at[lo:hi] - starts[k], n, int(zero_goldens[k]))
            except Exception:  # (a user op's function failing, say: the per-case path makes it the case's ERROR)
                metrics = None
            if metrics is not None:
                done[batch[k][0]] = (metrics, None, [])
    return done


def _folded(sub: ElementErrors, at: np.ndarray, cut: np.ndarray, starts: np.ndarray, zero_goldens: np.ndarray,
            sizes: np.ndarray, ks: list[int]) -> dict[int, Metrics]:
    """{k: Metrics} of cases ks (each with elements in sub, none flagged for relief), from reductions over the
    segments of sub: what add_differing (or Metrics.add, for a dense case) folds from the case's slice, one
    NumPy call per metric for the whole batch instead of a dozen per case. Counts, maxima and their first
    indices, and the worst elements are the same; sums agree to their rounding (decision 56)."""
    if not ks:
        return {}
    lens = np.diff(cut)
    segments = np.flatnonzero(lens)  # (the non-empty segments tile sub, in order)
    row = np.full(lens.size, -1, dtype=np.int64)
    row[segments] = np.arange(segments.size)
    heads, seg_lens = cut[segments], lens[segments]

    def total(x):
        return np.add.reduceat(x, heads, dtype=np.float64)

    def first_max(x):  # (each segment's maximum and the first position holding it)
        top = np.maximum.reduceat(x, heads)
        hits = np.append(np.flatnonzero(x == np.repeat(top, seg_lens)), x.size)
        return top, hits[np.searchsorted(hits, heads)]

    sum_rel, sum_signed, sum_ulp = total(sub.rel), total(sub.signed), total(sub.ulp)
    with np.errstate(over="ignore", under="ignore"):  # (sums.sum_squares: squares in the work type)
        sum_sq_abs = total(np.square(sub.abs))
    # A square the work type cannot hold as a normal number (overflowing, or subnormal: float32's dot rounds those
    # its own way) makes its case's sum the per-case function's own, on the case's slice.
    odd = (sub.abs >= 2.0 ** 63) | ((sub.abs < 2.0 ** -63) & (sub.abs > 0))
    if odd.any():
        for j in np.unique(np.searchsorted(heads, np.flatnonzero(odd), side="right") - 1).tolist():
            sum_sq_abs[j] = sum_squares(sub.abs[heads[j]:heads[j] + seg_lens[j]])
    max_ulp = np.maximum.reduceat(sub.ulp, heads)
    max_abs, max_abs_at = first_max(sub.abs)
    max_rel, max_rel_at = first_max(sub.rel)
    flagged = np.append(np.flatnonzero(sub.violation), sub.abs.size)
    violations, first_violation = np.diff(np.searchsorted(flagged, cut)), flagged[np.searchsorted(flagged, cut[:-1])]
    out = {}
    for k in ks:
        j, lo, hi, base, n = int(row[k]), int(cut[k]), int(cut[k + 1]), int(starts[k]), int(sizes[k])
        m = Metrics(elements=n, compared=n, zero_goldens=int(zero_goldens[k]), sum_rel=float(sum_rel[j]),
                    sum_signed=float(sum_signed[j]), sum_sq_abs=float(sum_sq_abs[j]), sum_ulp=float(sum_ulp[j]),
                    max_ulp=float(max_ulp[j]))
        if max_abs[j] > 0:
            m.max_abs, m.max_abs_at = float(max_abs[j]), int(at[max_abs_at[j]]) - base
        top = float(max_rel[j])
        if top > 0:
            m.max_rel, m.max_rel_at = top, int(at[max_rel_at[j]]) - base
        if violations[k]:
            m.violations, m.first_violation = int(violations[k]), int(at[first_violation[k]]) - base
        positions = at[lo:hi]
        m._pending = (sub.rel[lo:hi], top, lambda i, positions=positions, base=base: int(positions[i]) - base)
        m._settle()  # (its worst candidates, picked as add_differing's are)
        out[k] = m
    return out


def _relieved(m: M.CaseManifest, judged: OutputJudging, how: _Judged, opts: Options, sub: ElementErrors, s: slice,
              positions: np.ndarray | None, n: int, zero_goldens: int) -> Metrics | None:
    """A case's Metrics with its flagged elements held and re-judged with the op's relief, as Comparison.run
    does for its one chunk (positions: the case's differing elements, or None: every element); None when
    too many are flagged to hold (the per-case path re-judges them at once)."""
    e = ElementErrors(sub.a[s], sub.g[s], sub.abs[s], sub.rel[s], sub.signed[s], sub.ulp[s], sub.golden_abs[s],
                      how.dtype, NO_INDEX, NO_INDEX, violation=sub.violation[s])
    held = Held()
    if not held.take(e, 0, positions):
        return None
    metrics = Metrics()
    if positions is None:
        metrics.add(e, 0)
    else:
        add_differing(metrics, Differing(n, positions, e, zero_goldens), 0)
    relief = Comparison(m, judged, opts, whole=True, outputs=False)
    try:
        relief.release_held(metrics, held)
    finally:
        relief.close()
    metrics._settle()
    return metrics
