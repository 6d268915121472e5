"""One case's comparison under one standard: options, thresholds, the chunked pass with its
relief, checksums beside the reads, writes outside the view, and the worst elements described.

Dumps are compared chunk by chunk. With the default standard, elements that break the plain rule
are re-judged once with what the op knows (relief): the magnitude of the terms that cancel
(condition-aware scale) and the device's documented edge results. Relief only ever lowers an
element's error and touches only flagged elements, so the common path reads nothing but dump,
golden and (for their checksums) the inputs. verify.py decides verdicts and runs many cases.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from ..casedir import manifest as M
from ..pipeline.blockdigests import BlockCheck
from .compare import ElementErrors, Metrics, apply_rule, element_errors
from .complexerr import modulus
from .heldrelief import Held, fold
from .identical import add_differing, differing_errors, exact_never_flagged
from .workspace import Buffers, Workspace, give_back, take
from ..tensor.dtypes import round_from_f64
from ..tensor.layout import source_positions
from ..tensor.pages import Pages
from .emulated import emulated
from .judgeddtype import tolerance_dtype
from .judging import OutputJudging, output_judging
from .reliefbound import relief_share
from .rowrelief import rows_relief
from ..tensor.storage import CHUNK, StorageFile, check_file_sha256
from ..files.regular import SMALL_FILE
from ..tensor.wholefiles import LoadedFile, OpenedOnUse

CSV_ROW_LIMIT = 100_000
SPARSE_BACKOFF = 15  # chunks compared densely, without a look at their bits, after one that mostly differs


@dataclass(frozen=True)
class Options:
    """How verify judges: the standard and tolerances asked for, and what each case's result carries."""

    standard: str | None = None  # overrides each case's own
    tolerance: Mapping[str, float] = field(default_factory=dict)  # overrides the standard's parameters
    signed_zeros: bool = False
    error_rows: bool = False  # collect failing elements (for --csv-errors)
    error_data: bool = False  # gather the HTML report's error data (for --json and --html; errorstats.py)
    chunk: int = 0  # elements per chunk (0: CHUNK, or SPARSE_CHUNK where chunks are judged from their differing elements)
    strict: bool = False  # MISTRUSTED fails the run (by default it is a warning)
    rehash: bool = False  # hash every golden and input, whatever the stat cache proves (statcache.py)
    # Every element judged against its term scale, not only the flagged ones (verify's second look at a
    # Rows op whose first verdict failed: a row sum's one error is shared by the whole row, so errors within
    # the bound element by element can still lean one way, and only the scale tells that from bias).
    relieve_all: bool = False


def compare_range(m: M.CaseManifest, opts: Options, start: int, stop: int, checksums: bool = False,
                  judged: OutputJudging | None = None, out_name: str | None = None,
                  hash_inputs: bool = True, golden_blocks: list[str] | None = None,
                  relief_memo: dict | None = None) -> tuple[Metrics, Metrics | None, list]:
    """Metrics (and benchmark metrics, and failing-element rows) of output elements [start, stop).

    checksums: also check the golden's and inputs' recorded sha256, hashed on the side of the
    reads (for a whole case read by one process). judged: how the output is judged (judging.py), if known.
    golden_blocks: the golden's recorded block digests, to check the blocks this range reads (blockdigests.py).
    relief_memo: the case's relief memo (Comparison's), shared by the comparisons of one case in one process.
    """
    out = m.output if out_name is None else next(t for t in m.judged if t.name == out_name)
    judged = judged or output_judging(m, opts, out)
    cmp = Comparison(m, judged, opts, checksums, whole=start == 0 and stop == out.layout.numel, hash_inputs=hash_inputs,
                     relief_memo=relief_memo)
    try:
        cmp.blocks = golden_blocks and BlockCheck(golden_blocks, start, stop, out.layout.numel, out.golden)
        result = cmp.run(start, stop)
        cmp.check_sha256()
        return result
    finally:
        cmp.close()


def checksummed_files(m: M.CaseManifest) -> list[tuple[Path, str, str]]:
    """(file, recorded sha256, what) for every file gen wrote that verify reads: goldens (and allowance files)
    and inputs."""
    files = []
    for out in m.judged:
        files.append((out.golden, m.recorded_sha256(out.name, "golden_sha256"), "golden"))
        if out.allowance_path is not None:
            files.append((Path(out.allowance_path), m.recorded_sha256(out.name, "allowance_sha256"), f"{out.name} allowance"))
    files += [(t.file, m.recorded_sha256(t.name, "sha256"), f"input {t.name}") for t in m.inputs if not t.null]
    return files


def checksummed_names(m: M.CaseManifest) -> dict[str, str]:
    """{file name: recorded sha256} of checksummed_files(m), from the paths' text (no Path objects: per small case)."""
    names = {}
    for out in m.judged:
        sha = m.recorded_sha256(out.name, "golden_sha256")  # (first: a missing one is the error, as there)
        names[os.path.basename(str(out.golden_path))] = sha
        if out.allowance_path is not None:
            names[os.path.basename(out.allowance_path)] = m.recorded_sha256(out.name, "allowance_sha256")
    for t in m.inputs:
        if not t.null:
            sha = m.recorded_sha256(t.name, "sha256")
            names[os.path.basename(t.file_path)] = sha
    return names


def check_files(m: M.CaseManifest) -> None:
    """Check every recorded checksum of the files verify reads (IntegrityError on a mismatch)."""
    for path, sha, what in checksummed_files(m):
        check_file_sha256(path, sha, what)


# A float16/bfloat16 chunk judged from its differing elements costs a few passes over its bits and a fixed
# Python cost: 4x CHUNK (512 KiB of bits per file) cut a 64M-element float16 compare by a third (measured).
SPARSE_CHUNK = 4 * CHUNK
# Inputs read element by element (StorageFile.read_at) where fewer than one element is wanted per this many bytes of
# storage: under four per 4 KiB page, a page fault each through the map costs more than a pread each (4.5 us, 1 us).
FEW_PER_PAGE = 1024


class Comparison:
    """One case's chunked comparison under one standard."""

    def __init__(self, m: M.CaseManifest, judged: OutputJudging, opts: Options, checksums: bool = False,
                 whole: bool = False, hash_inputs: bool = True, outputs: bool = True,
                 relief_memo: dict | None = None) -> None:
        """judged: the output and how it is judged (judging.py). whole: this comparison reads every element (small
        files are then read whole, in one go). hash_inputs: with checksums, the inputs' too (a case with
        several outputs hashes its inputs with the first output's comparison only). outputs=False: the dump and
        golden are not opened (smallbatch.py read them, and asks only for relief: release_held). relief_memo: a dict
        kept for the case, where a Rows op's relief keeps the blocks it evaluated (rowrelief.py), else one of its own."""
        std, params = judged.std, judged.params
        self.m, self.std, self.opts = m, std, opts
        self.blocks: BlockCheck | None = None  # (compare_range's: a range checking its golden blocks)
        self.out = out = judged.out
        self.rule = judged.rule
        self.limit = params.get(std.element_limit) if std.element_limit else None  # (an allowance's divisor)
        self.relief_share = relief_share(m, out, self.limit) if std.relief else 1.0
        self._last_rows = {} if relief_memo is None else relief_memo  # (rowrelief.py: the blocks evaluated last)
        self.floor = judged.floor
        self.complex_gamma = judged.complex_gamma
        sha = (lambda name, key: m.recorded_sha256(name, key)) if checksums else (lambda name, key: None)
        in_sha = sha if hash_inputs else (lambda name, key: None)
        self.whole = whole
        self.files: list[StorageFile | LoadedFile] = []
        if outputs:
            self.dump = self._open(out.dump_path, out.dtype.np_dtype, out.layout.storage_size, None, "dump")
            self.gold = self._open(out.golden_path, out.dtype.np_dtype, out.layout.storage_size,
                                   sha(out.name, "golden_sha256"), "golden")
            # (read in place where they are large: tensor/pages.py; each chunk is only read)
            self.dump_reads, self.gold_reads = (Pages(f) if isinstance(f, StorageFile) else f
                                                for f in (self.dump, self.gold))
        specs = {t.name: (t.file_path, t.dtype.np_dtype, t.layout.storage_size, in_sha(t.name, "sha256"),
                          f"input {t.name}") for t in m.inputs if not t.null}
        self.inputs = OpenedOnUse(lambda name: self._open(*specs[name]))
        if checksums and out.allowance_path is not None:
            self._open(out.allowance_path, np.dtype(np.float64), out.layout.numel, sha(out.name, "allowance_sha256"), f"{out.name} allowance")
        if checksums and hash_inputs:  # (hashed as they are read: all of them, now)
            for name in specs:
                self.inputs[name]
        self.rows: list = []

    def _context(self) -> dict:
        """What the report needs beside the errors: the thresholds' dtype, the floor, the op's attributes."""
        return {"judged_dtype": tolerance_dtype(self.m)[0].name, "floor": self.floor,
                "attributes": {k: _plain(v) for k, v in self.m.attribute_values.items()}}

    def _open(self, path: str, dtype, size: int, sha: str | None, what: str) -> StorageFile | LoadedFile:
        if self.whole and size * dtype.itemsize <= SMALL_FILE:
            f = LoadedFile(path, dtype, size, sha256=sha, what=what)
        else:
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
        return emulated(self.m, self.out, self.inputs, start, stop)  # (only the bitwise and benchmark standards)

    def _errors(self, a: np.ndarray, g: np.ndarray, bufs: Buffers | None = None, ulps: bool = True) -> ElementErrors:
        e = element_errors(a, g, self.floor, self.out.dtype, flush_ok=self.std.flush_ok,
                           signed_zeros=self.opts.signed_zeros, bufs=bufs, complex_gamma=self.complex_gamma, ulps=ulps)
        apply_rule(e, self.rule)
        return e

    def run(self, start: int, stop: int) -> tuple[Metrics, Metrics | None, list]:
        out = self.out
        metrics, bench = Metrics(), (Metrics() if self.std.benchmark else None)
        if self.opts.error_data:
            # (a Rows op's element depends on whole rows: the report samples no inputs per element)
            from .errorstats import ErrorStats  # (the report's data: only with --json or --html)

            names = tuple(t.name for t in self.m.inputs if not t.null) if self.m.op.family.element_local else ()
            metrics.errors = ErrorStats.for_view(out.layout.shape, names, self._context())
        # Chunks mostly bit-identical to the golden are judged from the elements that differ (identical.py),
        # unless every element's errors are asked for (the report's data, the failing rows, the benchmark).
        plain = not (self.opts.error_data or self.opts.error_rows or self.opts.relieve_all) and bench is None
        # A verdict printed to the console only, by a standard that reads no ulp error, measures none, nor the RMSE,
        # for a case of more than a chunk: no report shows them (a results file, the HTML report and the CSV rows are
        # not plain), and they were a fifth of a large float32 comparison. Their metrics are NaN, "not measured". A
        # case of one chunk is measured whole, as the small cases' batch (smallbatch.py) measures it.
        ulps = not plain or self.std.reads_ulps or self.out.layout.numel <= CHUNK
        sparse = plain and self.std.against == "golden" and exact_never_flagged(self.rule, out.dtype, self.floor)
        chunk = self.opts.chunk or (SPARSE_CHUNK if sparse and out.dtype.itemsize == 2 else CHUNK)
        ws = None if stop - start <= chunk else (  # (one chunk: nothing to reuse)
            Workspace(chunk) if metrics.errors is not None else take(chunk))  # (the report's data keeps chunks)
        native, skip = out.dtype.np_dtype, 0
        # (flagged elements re-judged in batches, unless each element's final errors are wanted at once)
        held = Held() if plain and self.std.relief and self._relief_batches() else None
        for s in range(start, stop, chunk):
            if held is not None and held.full:  # (after the chunks they came from were added: see fold)
                self.release_held(metrics, held)
            e = min(stop, s + chunk)
            bufs = ws.next() if ws is not None else None
            a = self.dump_reads.read(out.layout, s, e, bufs.get("a_native", native, e - s) if bufs else None)
            g = self.gold_reads.read(out.layout, s, e, bufs.get("g_native", native, e - s) if bufs else None)
            if self.blocks:
                self.blocks.update(s, g)
            if sparse and skip:
                skip -= 1
            elif sparse:
                d = differing_errors(a, g, self.floor, out.dtype, flush_ok=self.std.flush_ok,
                                     signed_zeros=self.opts.signed_zeros, bufs=bufs)
                if d is not None:
                    apply_rule(d.sub, self.rule)
                    self._relief(metrics, held, d.sub, s, d.at)
                    add_differing(metrics, d, s)
                    continue
                skip = SPARSE_BACKOFF  # (most elements differ here: likely in the next chunks too)
            emulated = self._emulate(s, e) if self.std.against == "emulator" or bench is not None else None
            if self.std.against == "emulator":
                g = emulated
            errs = self._errors(a, g, bufs, ulps)
            self._relief(metrics, held, errs, s)
            metrics.add(errs, s, track_small=bench is not None)
            if metrics.errors is not None:
                metrics.errors.add(errs, s, self._input_values)
            if bench is not None:
                bench.add(self._errors(emulated, g), s, track_small=True)
            if self.opts.error_rows and len(self.rows) < CSV_ROW_LIMIT:
                bad = errs.flagged()[:CSV_ROW_LIMIT - len(self.rows)]
                self.rows.extend((int(s + i), float(errs.g[i]), float(errs.a[i]), float(errs.abs[i]), float(errs.rel[i]),
                                  float(errs.ulp[i])) for i in bad)
        if self.blocks:
            self.blocks.finish()
        if held is not None:
            self.release_held(metrics, held)
        metrics._settle()  # (its worst candidates were in the workspace, which the next comparison reuses)
        if ws is not None and metrics.errors is None:
            give_back(ws)
        if metrics.errors is not None and not all(isinstance(self.inputs.get(t.name), LoadedFile) for t in self.m.inputs
                                                if not t.null):
            metrics.errors.settle()  # (its sample reads inputs these files hold: they close when we return)
        return metrics, bench, self.rows

    def _relief_batches(self) -> bool:
        """Whether flagged elements may be held and relieved in one batch across chunks: an elementwise op's (each
        from its own inputs), or one whose case is a single block relieved element by element from its own terms
        (reference_at: a contraction's dot products), which every chunk's relief gathers anyway. Otherwise a batch
        would gather every row its held elements lie in."""
        m = self.m
        return m.op.family.element_local or (m.op.reference_at is not None and m.geometry.a1 == 1)

    def _recheck(self, errs: ElementErrors, start: int, at: np.ndarray | None = None) -> int:
        """Re-judge flagged elements against the op's term scale and edge results (default standard).

        at: the chunk positions of errs' elements (identical.py's differing elements), if not all of them.
        Returns how many flagged elements turned out fine. Only they are judged again: relief changes
        nothing elsewhere, and the rule is element by element (elsewhere it flagged nothing).
        """
        was_flagged = errs.violation.copy() if self.opts.relieve_all else None
        idx = np.arange(errs.violation.size) if self.opts.relieve_all else errs.flagged()
        ai, gi = errs.a[idx].astype(np.float64), errs.g[idx].astype(np.float64)
        with np.errstate(all="ignore"):
            self._relieve(errs, idx, ai, gi, start + (idx if at is None else at[idx]))
        still = self.rule(errs.subset(idx))
        errs.violation[idx] = still
        if errs.special.size:  # (masks, not np.isin's sort: every element of a broken kernel's chunk is here)
            special = np.zeros(errs.violation.size, bool)
            special[errs.special] = True
            still = still | special[idx]
        errs.relieved = idx[~still]  # (the report shows them as forgiven)
        if self.opts.relieve_all:
            errs.relieved = errs.relieved[was_flagged[errs.relieved]]  # (forgiven: what the rule had flagged)
        return int(errs.relieved.size)

    def _relief(self, metrics: Metrics, held: Held | None, errs: ElementErrors, start: int,
                at: np.ndarray | None = None) -> None:
        """The default standard's relief of a chunk's flagged elements (at: errs' chunk positions, if a subset):
        held for a batch across chunks (heldrelief.py), else re-judged now."""
        if not self.std.relief or not (self.opts.relieve_all or errs.special.size or errs.violation.any()):
            return
        if held is None or not held.take(errs, start, at):
            metrics.relieved += self._recheck(errs, start, at)

    def release_held(self, metrics: Metrics, held: Held) -> None:
        """Re-judge the held flagged elements in one batch and fold them into metrics (heldrelief.py)."""
        got = held.batch()
        if got is None:
            return
        e, flat = got
        with np.errstate(all="ignore"):
            self._relieve(e, np.arange(flat.size), e.a.astype(np.float64), e.g.astype(np.float64), flat)
        fold(metrics, e, flat, self.rule(e))

    def _relieve(self, errs: ElementErrors, idx: np.ndarray, ai: np.ndarray, gi: np.ndarray, flat: np.ndarray) -> None:
        """Lower flagged elements idx (logical elements `flat`) to their error against the op's scale and edges."""
        m, dtype = self.m, self.out.dtype
        shared = known = 0.0
        local = m.op.family.element_local
        if not local:  # (whole rows, never the element alone: rowrelief.py)
            scale, where, device, shared = rows_relief(m, self.out, self.inputs, flat, self.limit, self._last_rows)
        else:
            ins = self._gather(flat)
            ref = m.op.golden_f64(ins)
            scale = ref.scale
            if ref.lean is not None:  # (what the kernel's literals lean every element by: SELU's alpha scale)
                known = np.broadcast_to(ref.lean, np.shape(scale)).reshape(-1)
            where, device = m.op.device_edges(ins)
        # The balance's divisor stays the term scale: a correct kernel's systematic float32 lean (a constant's
        # rounding, shared by every element: SELU's lambda * alpha) is small beside the terms, not beside float32's
        # bound on them, which the element's own error is judged against (reliefbound.py).
        balance_den = np.maximum(np.maximum(np.abs(gi), scale), self.floor)
        # An element-local op's second look (relieve_all: every element, its reference declaring the lean its
        # literals give every element) leaves the elements the rule did not flag as the first look judged them, less
        # that lean in the balance: their errors are not relieved, and their lean stays relative to |golden|, where a
        # rounding mode's bias (half an ulp of the output, toward zero) shows whatever the terms.
        unflagged = (~errs.violation[idx] if local and self.opts.relieve_all and errs.violation is not None
                     else np.zeros(idx.size, bool))
        balance_den = np.where(unflagged, np.maximum(np.abs(gi), self.floor), balance_den)
        if self.relief_share < 1:
            scale = scale * self.relief_share + np.asarray(shared, dtype=np.float64) / self.limit
        den = np.maximum(np.maximum(np.abs(gi), scale), self.floor)
        abs_err = errs.abs[idx].astype(np.float64)
        rel = abs_err / den
        accepted = gi  # what each element is judged against: the golden, or the device's edge result
        cleared = np.zeros(idx.size, dtype=bool)
        if where.any():
            alt = round_from_f64(device, dtype).astype(np.float64)
            same_special = (np.isnan(alt) & np.isnan(ai)) | (np.isinf(alt) & (alt == ai))
            cleared = where & same_special
            alt_rel = np.where(np.isfinite(alt) & np.isfinite(ai), np.abs(ai - alt) / den, np.inf)
            use_alt = where & (alt_rel < rel)
            rel = np.where(use_alt, alt_rel, rel)
            accepted = np.where(use_alt, alt, gi)
            known = np.where(use_alt, 0.0, known)  # (the device's own result carries its literals already)
        finite = np.isfinite(ai) & np.isfinite(gi)
        keep = finite & ~unflagged & (rel < errs.rel[idx])  # relief only ever lowers an element's error
        lowered, rel_kept = idx[keep], rel[keep]
        errs.rel[lowered] = rel_kept
        # (the balance leaves out what a correct kernel's row sums share with the element, Reference.shared, and what
        # its literals lean it by, Reference.lean)
        lean = np.abs(ai) - np.abs(accepted) - known
        lean = np.sign(lean) * np.maximum(np.abs(lean) - shared, 0.0)
        errs.signed[lowered] = np.where(rel_kept > 0, lean[keep] / balance_den[keep], 0.0)
        if unflagged.any():  # (forgiven by the first look: flushed, a zero error where the values differ)
            lean_only = finite & unflagged & ~((errs.abs[idx] == 0) & (ai != gi))
            errs.signed[idx[lean_only]] = lean[lean_only] / balance_den[lean_only]
        if cleared.any():
            errs.special = np.setdiff1d(errs.special, idx[cleared])

    def _gather(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        return {**self._input_values(flat, mapped=True), **self.m.attribute_values}  # (the op takes its attributes too)

    def _input_values(self, flat: np.ndarray, mapped: bool = False) -> dict[str, np.ndarray]:
        """The inputs feeding logical output elements `flat`, as float64. mapped: through a memory map of each
        storage (relief's many elements), unless they are few and far apart; else a storage is read element by
        element (the report's few sample elements: a map's pages would count toward RSS)."""
        shape = self.out.layout.shape
        values = {}
        if not self.m.op.family.element_local:
            return values
        with np.errstate(invalid="ignore"):
            for t in self.m.inputs:
                if t.null:
                    continue
                f = self.inputs[t.name]
                if isinstance(f, LoadedFile) and t.layout.shape == shape and t.layout.is_contiguous:
                    values[t.name] = _real(f.map[flat])  # (the common case: storage is the view)
                    continue
                at = source_positions(t.layout, shape, flat)
                if isinstance(f, StorageFile) and (not mapped or at.size * FEW_PER_PAGE < f.size * f.dtype.itemsize):
                    values[t.name] = _real(f.read_at(at))  # (a pread each: no map, no page fault per element)
                else:
                    values[t.name] = _real(np.asarray(f.map[at]))
        return values


def _real(x: np.ndarray) -> np.ndarray:
    """Input values as float64 for the report's sample and the relief: a complex input's moduli (as its output's
    expected and actual are: judge/complexerr.py)."""
    return modulus(x) if x.dtype.kind == "c" else x.astype(np.float64)


def _plain(value):
    """An attribute's value as plain data for the report (JSON and marshal take these types)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, (bool, int, float)) for v in value):
        return list(value)
    return str(value)

