"""Error data for the HTML report, gathered in verify's streaming pass with memory bounded at any size.

Three pieces per case, each mergeable across chunks and worker ranges in any order with the same result
(so a case split across workers reports what one process would):

- a signed histogram of ulp errors in log2 bins (bin k: |ulp error| in [2^k, 2^(k+1))). The sign is the
  error balance's: toward zero when |actual| < |expected|, so a biased kernel (truncation) is one-sided;
- a sample of elements (inputs, expected, actual, signed ulp error, flagged): SPREAD elements spread over
  the view, fixed by its size alone; up to FLAGGED elements that broke the standard's rule (after relief)
  or mismatched a NaN/Inf, and up to RELIEVED that only the op's relief accepted (a cancellation zone the
  gate forgives), each chosen by a hash of their index when there are more: a kernel's failures, and what
  was forgiven, are always in the sample;
- for views of 2 or more dims, a map: the view as rows (its leading dims) x its last dim, cut into at most
  GRID x GRID blocks; per block the largest ulp error and the count of flagged elements (a maximum and a
  count, not a sum: merged in any order, they are the same numbers).

`ErrorStats.summary` turns the collector into a few bytes (errorpack.PackedErrors), which become JSON data
(verify JSON's `errors`, documented in docs/verify.md) when someone reads them: a run that writes no JSON or HTML
never builds them (and, Options.error_data off, never collects them).
"""

from __future__ import annotations

import marshal
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Mapping

import numpy as np

from .errorpack import FLOAT_BITS, PackedErrors, Sparse, Span, halve, nonzero

SPREAD = 256  # elements spread over the view
PASSING_SPREAD = 32  # of them kept for a passing case (every 8th): plots one click away, a small JSON
FLAGGED = 64  # flagged elements kept at most
RELIEVED = 32  # relieved elements kept at most
GRID = 32  # blocks per axis of the map at most
PASSING_GRID = 16  # per axis for a passing case (blocks merged 2 x 2)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: spreads consecutive indices over 64 bits

Gather = Callable[[np.ndarray], Mapping[str, np.ndarray]]  # logical output indices -> input values


def index_hash(index: np.ndarray) -> np.ndarray:
    """A fixed pseudo-random 64-bit key per logical index (the same in every process and chunking)."""
    return index.astype(np.uint64) * _GOLDEN  # (wraps modulo 2^64, as meant)


@lru_cache(maxsize=256)
def spread_points(numel: int, k: int = SPREAD) -> np.ndarray:
    """k sorted logical indices spread over [0, numel): one in each of k equal stretches, at a jittered place
    (a plain stride would fall on the same column of every row when it divides the row length)."""
    if numel <= k:
        points = np.arange(numel, dtype=np.int64)
    else:
        j = np.arange(k + 1, dtype=object)  # exact for any numel (k products of up to 2^62 x 256)
        bounds = np.array(j * numel // k, dtype=np.int64)
        jitter = (index_hash(np.arange(1, k + 1)) >> np.uint64(11)).astype(np.float64) * 2.0**-53
        width = bounds[1:] - bounds[:-1]
        points = bounds[:-1] + np.minimum((jitter * width).astype(np.int64), width - 1)
    points.flags.writeable = False
    return points


@lru_cache(maxsize=256)
def passing_points(numel: int) -> np.ndarray:
    """The spread points a passing case keeps: every 8th (PASSING_SPREAD of them)."""
    points = spread_points(numel)
    if points.size > PASSING_SPREAD:
        points = points[::points.size // PASSING_SPREAD][:PASSING_SPREAD]
        points.flags.writeable = False
    return points


_NO_KEYS = np.empty(0, np.uint64)
_NO_KEYS.flags.writeable = False
_NO_INDEX = np.empty(0, np.int64)
_NO_INDEX.flags.writeable = False


@dataclass
class Sample:
    """Elements kept for plots: logical index, and per element (expected, actual, signed ulp error, flagged,
    then one value per input)."""

    index: np.ndarray = field(default_factory=lambda: _NO_INDEX)
    rows: np.ndarray | None = None  # float64 [n, 4 + inputs]

    def add(self, index: np.ndarray, rows: np.ndarray) -> None:
        if self.rows is None:
            self.index, self.rows = index, rows
        else:
            self.index, self.rows = np.concatenate((self.index, index)), np.concatenate((self.rows, rows))

    def keep(self, which: np.ndarray) -> None:
        self.index = self.index[which]
        self.rows = self.rows[which] if self.rows is not None else None


@dataclass(frozen=True)
class MapGeometry:
    """The view as rows x cols (leading dims x last dim) cut into blocks of block_rows x block_cols."""

    rows: int
    cols: int
    block_rows: int
    block_cols: int

    @classmethod
    def of(cls, shape: tuple[int, ...], grid: int = GRID) -> "MapGeometry | None":
        if len(shape) < 2 or not math.prod(shape):
            return None
        rows, cols = math.prod(shape[:-1]), shape[-1]
        return cls(rows, cols, -(-rows // grid), -(-cols // grid))

    @property
    def grid(self) -> tuple[int, int]:
        return -(-self.rows // self.block_rows), -(-self.cols // self.block_cols)

    def cells(self, index: np.ndarray) -> np.ndarray:
        """Block (row-major cell number) of each logical index."""
        r, c = np.divmod(index, self.cols)
        return (r // self.block_rows) * self.grid[1] + c // self.block_cols

    def fold_max(self, grid: np.ndarray, values: np.ndarray, start: int) -> None:
        """grid (the blocks, row-major) = max(grid, the largest of `values`, logical elements start + i, per block).

        About one pass over the chunk whatever the shape. Rows longer than the chunk holds many of: each row's
        column blocks are runs of the flat index, reduced at once. Narrower rows: the chunk padded to whole
        rows, reduced over the rows of each block row, then over column blocks (reduceat along the rows:
        numpy's max over axis 0 of a narrow array is ten times slower).
        """
        n, cols = values.size, self.cols
        gr, gc = self.grid
        first, last = start // cols, (start + n - 1) // cols
        col_starts = np.arange(0, cols, self.block_cols, dtype=np.int64)
        bounds = np.arange(first // self.block_rows, last // self.block_rows + 1) * self.block_rows - first
        bounds[0] = 0
        if (last - first + 1) * gc <= n // 32:
            row_starts = np.arange(first, last + 1, dtype=np.int64)[:, None] * cols
            lo = np.clip(row_starts + col_starts - start, 0, n)
            hi = np.clip(row_starts + np.minimum(col_starts + self.block_cols, cols) - start, 0, n)
            # The runs inside the chunk tile it in order (each ends where the next begins): reduce over
            # them alone. Runs outside it stay 0, which is neutral (ulp errors are >= 0).
            inside = (hi > lo).ravel()
            runs = np.zeros(lo.size, values.dtype)
            runs[inside] = np.maximum.reduceat(values, lo.ravel()[inside])
            runs = runs.reshape(lo.shape)
            blocks = np.maximum.reduceat(runs, bounds, axis=0)
        else:
            lead = start - first * cols
            rows = values if lead == 0 and n % cols == 0 else np.zeros((last - first + 1) * cols, values.dtype)
            if rows is not values:
                rows[lead:lead + n] = values
            by_block_row = np.maximum.reduceat(rows.reshape(-1, cols), bounds, axis=0)
            blocks = np.maximum.reduceat(by_block_row, col_starts, axis=1)
        span = grid.reshape(gr, gc)[first // self.block_rows:last // self.block_rows + 1]
        np.maximum(span, blocks, out=span)


@dataclass
class Reservoir:
    """Up to `size` elements of one kind (flagged, relieved): those of lowest index hash, so the same ones
    whatever the chunking or the order ranges merge in; `total` counts every one offered."""

    size: int
    sample: Sample = field(default_factory=Sample)
    keys: np.ndarray = field(default_factory=lambda: _NO_KEYS)
    total: int = 0

    def offer(self, index: np.ndarray, rows_of: Callable[[np.ndarray], np.ndarray]) -> None:
        """index: logical indices; rows_of(positions in index) gives the rows of those kept (only they are read)."""
        self.total += int(index.size)
        keys = index_hash(index)
        at = np.arange(index.size)
        if self.keys.size >= self.size:  # (only those that would displace a kept one)
            better = keys < self.keys.max()
            at, keys = at[better], keys[better]
        if at.size > self.size:
            pick = np.argpartition(keys, self.size - 1)[:self.size]
            at, keys = at[pick], keys[pick]
        if at.size:
            self.sample.add(index[at], rows_of(at))
            self.keys = np.concatenate((self.keys, keys))
            self._trim()

    def merge(self, other: "Reservoir") -> None:
        self.total += other.total
        if other.sample.rows is not None:
            self.sample.add(other.sample.index, other.sample.rows)
            self.keys = np.concatenate((self.keys, other.keys))
            self._trim()

    def _trim(self) -> None:
        if self.keys.size > self.size:
            pick = np.argpartition(self.keys, self.size - 1)[:self.size]
            self.sample.keep(pick)
            self.keys = self.keys[pick]


@dataclass
class ErrorStats:
    """The collector: one per compared range of a case (see the module docstring)."""

    numel: int
    input_names: tuple[str, ...]
    geometry: MapGeometry | None
    context: Mapping  # what the report needs beside the errors (summary's first keys; read, never changed)
    histogram: dict = field(default_factory=dict)  # work dtype char -> counts per (sign, exponent) key
    nonfinite: int = 0  # elements where actual or expected is NaN/Inf (not in the histogram)
    spread: Sample = field(default_factory=Sample)
    flagged: Reservoir = field(default_factory=lambda: Reservoir(FLAGGED))
    relieved: Reservoir = field(default_factory=lambda: Reservoir(RELIEVED))
    map_ulp: np.ndarray | None = None  # float64 per block: the largest |ulp error|
    map_flagged: np.ndarray | None = None  # int64 per block

    @classmethod
    def for_view(cls, shape: tuple[int, ...], input_names: tuple[str, ...], context: Mapping | None = None
                 ) -> "ErrorStats":
        geometry = MapGeometry.of(shape) if len(shape) > 1 else None
        stats = cls(math.prod(shape), input_names, geometry, context or {})
        if geometry is not None:
            cells = math.prod(geometry.grid)
            stats.map_ulp, stats.map_flagged = np.zeros(cells), np.zeros(cells, np.int64)
        return stats

    def add(self, e, start: int, gather: Gather) -> None:
        """Fold in one chunk's judged errors (ElementErrors after relief) of logical elements start + i.

        The chunk is folded in when someone asks (the next chunk, a merge, pickling, the summary, or the
        comparison before it closes files that `gather` reads): a case read in one chunk from files read whole
        (thousands of small cases) is then summarised knowing its verdict, and a passing case samples only the
        elements it keeps. The result is the same either way.
        """
        self.settle()
        if e.ulp.size:
            self._pending = (e, start, gather)

    def settle(self, passed: bool = False) -> None:
        """Fold in the chunk kept for later (while its reader is still open). passed: the verdict, if known."""
        pending = self.__dict__.pop("_pending", None)
        if pending is None:
            return
        e, start, gather = pending
        n = e.ulp.size
        self._histogram(e)
        points = passing_points(self.numel) if passed else spread_points(self.numel)
        if start == 0 and n == self.numel:  # (the whole case in one chunk)
            self.spread.add(points, self._rows(e, points, 0, gather))
        else:
            lo, hi = points.searchsorted((start, start + n))
            if hi > lo:
                local = points[lo:hi] - start
                self.spread.add(local + start, self._rows(e, local, start, gather))
        if self.geometry is not None:
            self.geometry.fold_max(self.map_ulp, e.ulp, start)
        bad = e.flagged()
        if bad.size:
            if self.geometry is not None:
                self.map_flagged += np.bincount(self.geometry.cells(bad + start), minlength=self.map_flagged.size)
            self.flagged.offer(bad + start, lambda at: self._rows(e, bad[at], start, gather))
        relieved = getattr(e, "relieved", None)
        if relieved is not None and relieved.size:
            self.relieved.offer(relieved + start, lambda at: self._rows(e, relieved[at], start, gather))

    def __getstate__(self) -> dict:
        """A worker's range travels settled (without its reader) and small, and stays small where it lands
        until merged: the histogram's non-zero counts, the map's block rows it touched (a 1G-element case is
        a thousand ranges, all held by the parent at once)."""
        self.settle()
        state = dict(self.__dict__)
        state["histogram"] = {k: c if isinstance(c, Sparse) else Sparse.of(c) for k, c in self.histogram.items()}
        if self.map_ulp is not None and not isinstance(self.map_ulp, Span):
            state["map_ulp"], state["map_flagged"] = Span.of(self.map_ulp, self.map_flagged), None
        return state

    def _unpack(self) -> None:
        """Full arrays again, after a trip through pickle (before this one takes in others)."""
        self.histogram = {kind: c.full() if isinstance(c, Sparse) else c for kind, c in self.histogram.items()}
        if isinstance(self.map_ulp, Span):
            self.map_ulp, self.map_flagged = self.map_ulp.full()

    def _histogram(self, e) -> None:
        """Counts per (toward zero, exponent of |ulp error|): the exponent fields of the errors' own bits."""
        kind = e.ulp.dtype.char
        view, shift, bits, _ = FLOAT_BITS[kind]
        key = e.ulp.view(view) >> shift  # (|ulp error| >= 0: sign bit clear)
        signed = e.signed if e.signed.dtype.char == kind else e.signed.astype(e.ulp.dtype)  # (hand-made data)
        sign = signed.view(view) >> shift  # (arithmetic shift: a negative one has every bit above set)
        sign &= 1 << bits  # the sign, just above the exponent field
        key |= sign
        counts = np.bincount(key, minlength=2 << bits)
        if e.nonfinite.size:  # (their errors are zeroed: key 0)
            counts[0] -= e.nonfinite.size
            self.nonfinite += int(e.nonfinite.size)
        mine = self.histogram.get(kind)
        self.histogram[kind] = counts if mine is None else mine + counts

    def _rows(self, e, local: np.ndarray, start: int, gather: Gather) -> np.ndarray:
        """(expected, actual, signed ulp error, flagged, inputs...) of chunk elements `local`, one row each."""
        flagged = e.violation[local] if e.violation is not None else np.zeros(local.size, bool)
        if e.special.size:
            flagged = flagged | np.isin(local, e.special)
        values = gather(local + start)
        # (the histogram's sign: the sign bit of `signed`)
        return np.stack((e.g[local], e.a[local], np.copysign(e.ulp[local], e.signed[local]), flagged,
                         *(values[name] for name in self.input_names)), axis=1, dtype=np.float64)

    def merge(self, other: "ErrorStats") -> None:
        """Fold in the stats of another (disjoint) range of the same case."""
        self.settle()
        other.settle()
        self._unpack()
        for kind, counts in other.histogram.items():
            sparse = counts if isinstance(counts, Sparse) else Sparse.of(counts)
            mine = self.histogram.setdefault(kind, np.zeros(sparse.size, np.int64))
            mine[sparse.index] += sparse.counts
        self.nonfinite += other.nonfinite
        if other.spread.rows is not None:
            self.spread.add(other.spread.index, other.spread.rows)
        self.flagged.merge(other.flagged)
        self.relieved.merge(other.relieved)
        if self.map_ulp is not None and other.map_ulp is not None:
            span = other.map_ulp if isinstance(other.map_ulp, Span) else Span.of(other.map_ulp, other.map_flagged)
            cut = slice(span.start, span.start + span.ulp.size)
            np.maximum(self.map_ulp[cut], span.ulp, out=self.map_ulp[cut])
            self.map_flagged[cut] += span.flagged

    def summary(self, passed: bool) -> PackedErrors:
        """This case's error data, packed (PackedErrors.json gives verify JSON's `errors`, context first). A
        passing case keeps every 8th spread element and a map of 2 x 2 merged blocks: its plots one click
        away, its JSON small."""
        self.settle(passed)
        self._unpack()
        histogram = tuple((kind, *nonzero(counts)) for kind, counts in self.histogram.items())
        index, rows = self._sample(passed)
        emap = None
        if self.geometry is not None:
            g = self.geometry
            ulp, flagged = self.map_ulp.reshape(g.grid), self.map_flagged.reshape(g.grid)
            block = (g.block_rows, g.block_cols)
            if passed and max(g.grid) > PASSING_GRID:  # merge 2 x 2 blocks
                ulp, flagged = halve(ulp, np.max), halve(flagged, np.sum)
                block = (2 * g.block_rows, 2 * g.block_cols)
            emap = (g.rows, g.cols, block, ulp.shape, ulp.tobytes(), flagged.tobytes() if flagged.any() else None)
        return PackedErrors(marshal.dumps((self.context, histogram, self.nonfinite, self.input_names,
                                           index.tobytes(), rows.tobytes(), self.flagged.total, self.relieved.total,
                                           emap)))

    def _sample(self, passed: bool) -> tuple[np.ndarray, np.ndarray]:
        """(indices, rows) of the elements kept, by index."""
        index, rows = self.spread.index, self.spread.rows
        if rows is None:
            rows = np.empty((0, 4 + len(self.input_names)))
        if passed and index.size > PASSING_SPREAD:  # (chunks folded in before the verdict kept every spread point)
            keep = np.isin(index, passing_points(self.numel))
            index, rows = index[keep], rows[keep]
        for kept in (self.flagged.sample, self.relieved.sample):
            if kept.rows is not None:
                index, rows = np.concatenate((index, kept.index)), np.concatenate((rows, kept.rows))
        if index.size > 1 and not (index[1:] > index[:-1]).all():  # (ranges merged out of order; kept ones)
            index, first = np.unique(index, return_index=True)  # (a kept element may also be a spread one)
            rows = rows[first]
        return index, rows
