"""Error data for the HTML report, gathered in verify's streaming pass with memory bounded at any size.

Three pieces per case, each mergeable across chunks and worker ranges in any order with the same result
(so a case split across workers reports what one process would):

- a signed histogram of ulp errors in log2 bins (bin k: |ulp error| in [2^k, 2^(k+1))). The sign is the
  error balance's: toward zero when |actual| < |expected|, so a biased kernel (truncation) is one-sided;
- a sample of elements (inputs, expected, actual, signed ulp error, flagged): SPREAD elements spread over
  the view, fixed by its size alone, plus up to FLAGGED elements that broke the standard's rule (after
  relief) or mismatched a NaN/Inf, chosen by a hash of their index when there are more: a kernel's
  failures are always in the sample;
- for views of 2 or more dims, a map: the view as rows (its leading dims) x its last dim, cut into at most
  GRID x GRID blocks; per block the largest ulp error and the count of flagged elements (a maximum and a
  count, not a sum: merged in any order, they are the same numbers).

`ErrorStats.summary` turns the collector into a few bytes (PackedErrors) and `PackedErrors.json` those into
JSON data (verify JSON's `errors`, documented in README) when someone reads them: a run that writes no JSON
or HTML never builds them.
"""

from __future__ import annotations

import marshal
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Mapping

import numpy as np

SPREAD = 256  # elements spread over the view
PASSING_SPREAD = 32  # of them kept for a passing case (every 8th): plots one click away, a small JSON
FLAGGED = 64  # flagged elements kept at most
GRID = 32  # blocks per axis of the map at most
PASSING_GRID = 16  # per axis for a passing case (blocks merged 2 x 2)

# per work dtype (its type char): the integer view, the shift to the exponent field, its width, its bias
_FLOAT_BITS = {"f": (np.int32, 23, 8, 127), "d": (np.int64, 52, 11, 1023)}
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
            runs = np.maximum.reduceat(values, np.minimum(lo, n - 1).ravel()).reshape(lo.shape)
            runs[hi <= lo] = 0  # (runs outside the chunk; 0 is neutral: ulp errors are >= 0)
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
class ErrorStats:
    """The collector: one per compared range of a case (see the module docstring)."""

    numel: int
    input_names: tuple[str, ...]
    geometry: MapGeometry | None
    context: Mapping  # what the report needs beside the errors (summary's first keys; read, never changed)
    histogram: dict = field(default_factory=dict)  # work dtype char -> counts per (sign, exponent) key
    nonfinite: int = 0  # elements where actual or expected is NaN/Inf (not in the histogram)
    spread: Sample = field(default_factory=Sample)
    flagged: Sample = field(default_factory=Sample)
    flagged_keys: np.ndarray = field(default_factory=lambda: _NO_KEYS)
    flagged_total: int = 0
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
        bad = e.special
        if e.violation is not None and e.violation.any():
            bad = np.union1d(np.flatnonzero(e.violation), bad)
        if bad.size:
            self._flag(e, bad, start, gather)

    def __getstate__(self) -> dict:
        """A worker's range travels settled (without its reader) and small, and stays small where it lands
        until merged: the histogram's non-zero counts, the map's block rows it touched (a 1G-element case is
        a thousand ranges, all held by the parent at once)."""
        self.settle()
        state = dict(self.__dict__)
        state["histogram"] = {kind: c if isinstance(c, _Sparse) else _Sparse.of(c) for kind, c in self.histogram.items()}
        if self.map_ulp is not None and not isinstance(self.map_ulp, _Span):
            state["map_ulp"], state["map_flagged"] = _Span.of(self.map_ulp, self.map_flagged), None
        return state

    def _unpack(self) -> None:
        """Full arrays again, after a trip through pickle (before this one takes in others)."""
        self.histogram = {kind: c.full() if isinstance(c, _Sparse) else c for kind, c in self.histogram.items()}
        if isinstance(self.map_ulp, _Span):
            self.map_ulp, self.map_flagged = self.map_ulp.full()

    def _histogram(self, e) -> None:
        """Counts per (toward zero, exponent of |ulp error|): the exponent fields of the errors' own bits."""
        kind = e.ulp.dtype.char
        view, shift, bits, _ = _FLOAT_BITS[kind]
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

    def _flag(self, e, bad: np.ndarray, start: int, gather: Gather) -> None:
        """Count the chunk's flagged elements into the map, and keep the FLAGGED of lowest hash overall."""
        index = bad + start
        self.flagged_total += int(bad.size)
        if self.geometry is not None:
            self.map_flagged += np.bincount(self.geometry.cells(index), minlength=self.map_flagged.size)
        keys = index_hash(index)
        if self.flagged_keys.size >= FLAGGED:  # only those that would displace a kept one are read
            better = keys < self.flagged_keys.max()
            bad, index, keys = bad[better], index[better], keys[better]
            if not keys.size:
                return
        if keys.size > FLAGGED:
            pick = np.argpartition(keys, FLAGGED - 1)[:FLAGGED]
            bad, index, keys = bad[pick], index[pick], keys[pick]
        self.flagged.add(index, self._rows(e, bad, start, gather))
        self.flagged_keys = np.concatenate((self.flagged_keys, keys))
        self._trim_flagged()

    def _trim_flagged(self) -> None:
        if self.flagged_keys.size > FLAGGED:
            pick = np.argpartition(self.flagged_keys, FLAGGED - 1)[:FLAGGED]
            self.flagged.keep(pick)
            self.flagged_keys = self.flagged_keys[pick]

    def merge(self, other: "ErrorStats") -> None:
        """Fold in the stats of another (disjoint) range of the same case."""
        self.settle()
        other.settle()
        self._unpack()
        for kind, counts in other.histogram.items():
            sparse = counts if isinstance(counts, _Sparse) else _Sparse.of(counts)
            mine = self.histogram.setdefault(kind, np.zeros(sparse.size, np.int64))
            mine[sparse.index] += sparse.counts
        self.nonfinite += other.nonfinite
        if other.spread.rows is not None:
            self.spread.add(other.spread.index, other.spread.rows)
        if other.flagged.rows is not None:
            self.flagged.add(other.flagged.index, other.flagged.rows)
            self.flagged_keys = np.concatenate((self.flagged_keys, other.flagged_keys))
            self._trim_flagged()
        self.flagged_total += other.flagged_total
        if self.map_ulp is not None and other.map_ulp is not None:
            span = other.map_ulp if isinstance(other.map_ulp, _Span) else _Span.of(other.map_ulp, other.map_flagged)
            cut = slice(span.start, span.start + span.ulp.size)
            np.maximum(self.map_ulp[cut], span.ulp, out=self.map_ulp[cut])
            self.map_flagged[cut] += span.flagged

    def summary(self, passed: bool) -> "PackedErrors":
        """This case's error data, packed (PackedErrors.json gives verify JSON's `errors`, context first). A
        passing case keeps every 8th spread element and a map of 2 x 2 merged blocks: its plots one click
        away, its JSON small."""
        self.settle(passed)
        self._unpack()
        histogram = tuple((kind, *_nonzero(counts)) for kind, counts in self.histogram.items())
        index, rows = self._sample(passed)
        emap = None
        if self.geometry is not None:
            g = self.geometry
            ulp, flagged = self.map_ulp.reshape(g.grid), self.map_flagged.reshape(g.grid)
            block = (g.block_rows, g.block_cols)
            if passed and max(g.grid) > PASSING_GRID:  # merge 2 x 2 blocks
                ulp, flagged = _halve(ulp, np.max), _halve(flagged, np.sum)
                block = (2 * g.block_rows, 2 * g.block_cols)
            emap = (g.rows, g.cols, block, ulp.shape, ulp.tobytes(), flagged.tobytes() if flagged.any() else None)
        return PackedErrors(marshal.dumps((self.context, histogram, self.nonfinite, self.input_names, index.tobytes(),
                                           rows.tobytes(), self.flagged_total, emap)))

    def _sample(self, passed: bool) -> tuple[np.ndarray, np.ndarray]:
        """(indices, rows) of the elements kept, by index."""
        index, rows = self.spread.index, self.spread.rows
        if rows is None:
            rows = np.empty((0, 4 + len(self.input_names)))
        if passed and index.size > PASSING_SPREAD:  # (chunks folded in before the verdict kept every spread point)
            keep = np.isin(index, passing_points(self.numel))
            index, rows = index[keep], rows[keep]
        if self.flagged.rows is not None:
            index, rows = np.concatenate((index, self.flagged.index)), np.concatenate((rows, self.flagged.rows))
        if index.size > 1 and not (index[1:] > index[:-1]).all():  # (ranges merged out of order; flagged ones)
            index, first = np.unique(index, return_index=True)  # (a flagged element may also be a spread one)
            rows = rows[first]
        return index, rows


@dataclass(frozen=True)
class _Sparse:
    """A histogram's non-zero counts (how a range's travels)."""

    size: int
    index: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, counts: np.ndarray) -> "_Sparse":
        index = np.flatnonzero(counts)
        return cls(counts.size, index, counts[index])

    def full(self) -> np.ndarray:
        out = np.zeros(self.size, np.int64)
        out[self.index] = self.counts
        return out


@dataclass(frozen=True)
class _Span:
    """The map's blocks from the first to the last one a range touched (how a range's map travels)."""

    size: int
    start: int
    ulp: np.ndarray
    flagged: np.ndarray

    @classmethod
    def of(cls, ulp: np.ndarray, flagged: np.ndarray) -> "_Span":
        touched = np.flatnonzero((ulp != 0) | (flagged != 0))
        lo, hi = (int(touched[0]), int(touched[-1]) + 1) if touched.size else (0, 0)
        return cls(ulp.size, lo, ulp[lo:hi].copy(), flagged[lo:hi].copy())

    def full(self) -> tuple[np.ndarray, np.ndarray]:
        ulp, flagged = np.zeros(self.size), np.zeros(self.size, np.int64)
        ulp[self.start:self.start + self.ulp.size], flagged[self.start:self.start + self.ulp.size] = self.ulp, self.flagged
        return ulp, flagged


def _nonzero(counts: np.ndarray) -> tuple[bytes, bytes]:
    keys = np.flatnonzero(counts)
    return keys.tobytes(), counts[keys].tobytes()


class PackedErrors(bytes):
    """ErrorStats.summary's data in a few bytes (marshal of plain values and arrays' bytes): what a run holds
    per case (in its spill file) until the JSON or HTML is written. `json()` builds verify JSON's `errors`."""

    __slots__ = ()

    def json(self) -> dict:
        context, histogram, nonfinite, names, index, rows, flagged_total, emap = marshal.loads(self)
        index = np.frombuffer(index, np.int64)
        rows = np.frombuffer(rows, np.float64).reshape(index.size, 4 + len(names))
        columns = rows.T.tolist()
        sample = {"index": index.tolist(), "expected": columns[0], "actual": columns[1], "ulp_error": columns[2],
                  "flagged": rows[:, 3].astype(np.int8).tolist(), "inputs": dict(zip(names, columns[4:])),
                  "flagged_total": flagged_total}
        data = {**context, "ulp_histogram": _histogram_json(histogram, nonfinite), "sample": sample, "map": None}
        if emap is not None:
            n_rows, cols, block, shape, ulp, flagged = emap
            data["map"] = {"rows": n_rows, "cols": cols, "block": list(block),
                           "ulp_max": _rounded(np.frombuffer(ulp, np.float64).reshape(shape)),
                           "flagged": None if flagged is None else np.frombuffer(flagged, np.int64).reshape(shape).tolist()}
        return data


def _histogram_json(histogram: tuple, nonfinite: int) -> dict:
    exact = 0
    sides: dict[str, dict[int, int]] = {"toward_zero": {}, "away_from_zero": {}}
    for kind, keys, counts in histogram:
        _, _, bits, bias = _FLOAT_BITS[kind]
        for key, n in zip(np.frombuffer(keys, np.int64).tolist(), np.frombuffer(counts, np.int64).tolist()):
            exponent = key & ((1 << bits) - 1)
            if exponent == 0:  # zero (a subnormal ulp error is no error worth a bin)
                exact += n
                continue
            side = sides["toward_zero" if key >> bits else "away_from_zero"]
            side[exponent - bias] = side.get(exponent - bias, 0) + n
    return {"exact": exact, "nonfinite": nonfinite, **{name: sorted([k, n] for k, n in side.items())
                                                       for name, side in sides.items()}}


def _halve(grid: np.ndarray, combine) -> np.ndarray:
    """combine (np.max, np.sum) over 2 x 2 blocks (the last row or column alone where the count is odd)."""
    r, c = grid.shape
    padded = np.zeros((r + r % 2, c + c % 2), grid.dtype)  # (0 is neutral: errors and counts are >= 0)
    padded[:r, :c] = grid
    return combine(padded.reshape(padded.shape[0] // 2, 2, padded.shape[1] // 2, 2), axis=(1, 3))


def _rounded(grid: np.ndarray) -> list:
    """Block values to 4 significant digits (a plot's colour needs no more; the JSON stays short)."""
    return [[float(f"{x:.4g}") for x in row] for row in grid.tolist()]
