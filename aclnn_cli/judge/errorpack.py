"""ErrorStats' data in compact forms: how a worker's range travels to the parent (Sparse, Span) and how a
case's summary waits until someone reads it (PackedErrors, a few bytes; `json()` builds verify JSON's
`errors`, docs/verify.md "The HTML report")."""

from __future__ import annotations

import marshal
from dataclasses import dataclass

import numpy as np

# per work dtype (its type char): the integer view, the shift to the exponent field, its width, its bias
FLOAT_BITS = {"f": (np.int32, 23, 8, 127), "d": (np.int64, 52, 11, 1023)}


@dataclass(frozen=True)
class Sparse:
    """A histogram's non-zero counts (how a range's travels)."""

    size: int
    index: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, counts: np.ndarray) -> "Sparse":
        index = np.flatnonzero(counts)
        return cls(counts.size, index, counts[index])

    def full(self) -> np.ndarray:
        out = np.zeros(self.size, np.int64)
        out[self.index] = self.counts
        return out


@dataclass(frozen=True)
class Span:
    """The map's blocks from the first to the last one a range touched (how a range's map travels)."""

    size: int
    start: int
    ulp: np.ndarray
    flagged: np.ndarray

    @classmethod
    def of(cls, ulp: np.ndarray, flagged: np.ndarray) -> "Span":
        touched = np.flatnonzero((ulp != 0) | (flagged != 0))
        lo, hi = (int(touched[0]), int(touched[-1]) + 1) if touched.size else (0, 0)
        return cls(ulp.size, lo, ulp[lo:hi].copy(), flagged[lo:hi].copy())

    def full(self) -> tuple[np.ndarray, np.ndarray]:
        ulp, flagged = np.zeros(self.size), np.zeros(self.size, np.int64)
        cut = slice(self.start, self.start + self.ulp.size)
        ulp[cut], flagged[cut] = self.ulp, self.flagged
        return ulp, flagged


def nonzero(counts: np.ndarray) -> tuple[bytes, bytes]:
    keys = np.flatnonzero(counts)
    return keys.tobytes(), counts[keys].tobytes()


class PackedErrors(bytes):
    """ErrorStats.summary's data in a few bytes (marshal of plain values and arrays' bytes): what a run holds
    per case (in its spill file) until the JSON or HTML is written. `json()` builds verify JSON's `errors`."""

    __slots__ = ()

    def json(self) -> dict:
        context, histogram, nonfinite, names, index, rows, flagged, relieved, emap = marshal.loads(self)
        index = np.frombuffer(index, np.int64)
        rows = np.frombuffer(rows, np.float64).reshape(index.size, 4 + len(names))
        columns = rows.T.tolist()
        sample = {"index": index.tolist(), "expected": columns[0], "actual": columns[1], "ulp_error": columns[2],
                  "flagged": rows[:, 3].astype(np.int8).tolist(), "inputs": dict(zip(names, columns[4:])),
                  "flagged_total": flagged, "relieved_total": relieved}
        data = {**context, "ulp_histogram": _histogram_json(histogram, nonfinite), "sample": sample, "map": None}
        if emap is not None:
            n_rows, cols, block, shape, ulp, per_block = emap
            counts = None if per_block is None else np.frombuffer(per_block, np.int64).reshape(shape).tolist()
            data["map"] = {"rows": n_rows, "cols": cols, "block": list(block),
                           "ulp_max": _rounded(np.frombuffer(ulp, np.float64).reshape(shape)), "flagged": counts}
        return data


def _histogram_json(histogram: tuple, nonfinite: int) -> dict:
    exact = 0
    sides: dict[str, dict[int, int]] = {"toward_zero": {}, "away_from_zero": {}}
    for kind, keys, counts in histogram:
        _, _, bits, bias = FLOAT_BITS[kind]
        for key, n in zip(np.frombuffer(keys, np.int64).tolist(), np.frombuffer(counts, np.int64).tolist()):
            exponent = key & ((1 << bits) - 1)
            if exponent == 0:  # zero (a subnormal ulp error is no error worth a bin)
                exact += n
                continue
            side = sides["toward_zero" if key >> bits else "away_from_zero"]
            side[exponent - bias] = side.get(exponent - bias, 0) + n
    return {"exact": exact, "nonfinite": nonfinite, **{name: sorted([k, n] for k, n in side.items())
                                                       for name, side in sides.items()}}


def halve(grid: np.ndarray, combine) -> np.ndarray:
    """combine (np.max, np.sum) over 2 x 2 blocks (the last row or column alone where the count is odd)."""
    r, c = grid.shape
    padded = np.zeros((r + r % 2, c + c % 2), grid.dtype)  # (0 is neutral: errors and counts are >= 0)
    padded[:r, :c] = grid
    return combine(padded.reshape(padded.shape[0] // 2, 2, padded.shape[1] // 2, 2), axis=(1, 3))


def _rounded(grid: np.ndarray) -> list:
    """Block values to 4 significant digits (a plot's colour needs no more; the JSON stays short)."""
    return [[float(f"{x:.4g}") for x in row] for row in grid.tolist()]
