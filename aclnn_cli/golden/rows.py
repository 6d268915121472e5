"""Goldens of Rows-family ops (ops/families/): whole blocks in, every output's certified golden out.

The inputs are binary floats, so each output is a fixed function of them and its exact value exists. The
op's float64 `reference` gives value and bound per element; where value - bound and value + bound round
to one output value, that is the correctly rounded result. Elsewhere the op's `exact` recomputes the
block (Fractions, or Decimal where exp is involved) and the exact value is rounded once. Outputs summed
over every row (dgamma) are accumulated block by block: values, bounds and scales added, plus a bound for
the float64 additions themselves; their uncertain elements are recomputed exactly over every block.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping

import numpy as np

from ..tensor.dtypes import BFLOAT16, DType, canonical_nans, round_fraction, round_from_f64
from ..ops.accumulation import ACCUMULATION_UNIT, across_rows_allowance
from ..ops.base import OpSpec, Reference
from ..ops.dyadic import EXACT_SUM_UNITS, quantum
from .rational import through_reference

F64_UNIT = 2.0**-53


CERTIFY_RUN = 1 << 20  # elements certified at a time: its float64 temporaries (about five) stay 40 MiB


def certify(value: np.ndarray, bound: np.ndarray, dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    """(value rounded to dtype, where that rounding is not proven to be the exact result's). Element by element,
    so a long output is taken CERTIFY_RUN elements at a time: the same results, without five float64 temporaries of
    the output's size (a ResNet-50 layer's gradInput: 1 GB)."""
    if value.size <= CERTIFY_RUN:
        return _certify(value, bound, dtype)
    flat, bounds = value.reshape(-1), np.broadcast_to(bound, value.shape).reshape(-1)
    out = None
    for s in range(0, flat.size, CERTIFY_RUN):
        run = _certify(flat[s:s + CERTIFY_RUN], bounds[s:s + CERTIFY_RUN], dtype)
        out = out or tuple(np.empty(flat.size, r.dtype) for r in run)
        for whole, part in zip(out, run):
            whole[s:s + part.size] = part
    return tuple(a.reshape(value.shape) for a in out)


def _certify(value: np.ndarray, bound: np.ndarray, dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):
        rounded = round_from_f64(value, dtype)
        as64 = rounded.astype(np.float64)
        lo = round_from_f64(value - bound, dtype).astype(np.float64)
        hi = round_from_f64(value + bound, dtype).astype(np.float64)
        uncertain = np.isfinite(value) & ((lo != as64) | (hi != as64))
        uncertain |= (as64 == 0) & (value != 0) & (bound >= np.abs(value))  # a tiny value's sign
    return canonical_nans(rounded), uncertain  # (which NaN a formula gives depends on the CPU's code path)


def _is_float(a: np.ndarray) -> bool:
    return np.issubdtype(a.dtype, np.floating) or a.dtype.kind == "V" or str(a.dtype) == "bfloat16"


def widened(blocks: Mapping[str, np.ndarray], dtype=np.float64) -> dict[str, np.ndarray]:
    """Float inputs widened (exactly, for float64) to dtype; integer inputs as they are."""
    return {k: v.astype(dtype) if _is_float(v) else v for k, v in blocks.items()}


def reference_blocks(op: OpSpec, blocks: Mapping[str, np.ndarray], attrs: Mapping,
                     golden: bool = False) -> dict[str, Reference]:
    """The op's float64 reference on whole blocks, per output. Blocks where an input the kernel reads is not
    finite take the IEEE formula (op.ieee, else the kernel, in float64) with bound 0: their sums are NaN or
    infinite as the device's are, and there is nothing to certify. golden: only a golden's value and bound are
    wanted (op.golden_reference, where the op gives one; one marked ops/base.narrow_blocks takes the finite blocks
    as stored, and its mapping of outputs is returned as it is: gen reads each output once)."""
    reference = op.golden_reference if golden and op.golden_reference is not None else op.reference
    if golden and getattr(reference, "narrow_blocks", False) and finite_blocks(op, blocks).all():
        with np.errstate(all="ignore"):  # (ops/base.narrow_blocks: no float64 copies; a mapping as it is, see there)
            got = reference({**blocks, **attrs})
        return got if isinstance(got, Mapping) else op.by_output(got)
    wide = widened(blocks)
    k = next(iter(wide.values())).shape[0] if wide else 0
    finite = finite_blocks(op, wide)
    with np.errstate(all="ignore"):
        if finite.all():
            return op.by_output(reference({**wide, **attrs}))
        good = _take(wide, finite)
        bad = _take(wide, ~finite)
        special = op.by_output((op.ieee or op.kernel or _value_of(op))({**bad, **attrs}))
        ref = op.by_output(reference({**good, **attrs})) if finite.any() else {}
    across = set(op.family.across_rows)
    out: dict[str, Reference] = {}
    for t in op.outputs:
        sv = np.asarray(special[t.name], dtype=np.float64)
        if t.name in across:
            r = ref.get(t.name)
            value = sv + (r.value if r is not None else 0.0)
            bound = r.bound if r is not None else np.zeros_like(sv)
            scale = np.abs(sv) + (r.scale if r is not None else 0.0)
            out[t.name] = Reference(value, np.broadcast_to(bound, value.shape).copy(), scale)
            continue
        value = np.empty((k, *sv.shape[1:]))
        bound, scale = np.zeros_like(value), np.abs(value)
        value[~finite], scale[~finite] = sv, np.abs(sv)
        extra = {}
        if finite.any():
            r = ref[t.name]
            value[finite], bound[finite], scale[finite] = r.value, r.bound, r.scale
            for field in ("allowance", "shared"):  # (none where an input is not finite: nothing to judge there)
                if getattr(r, field) is not None:
                    extra[field] = np.zeros_like(value)
                    extra[field][finite] = getattr(r, field)
        out[t.name] = Reference(value, bound, scale, **extra)
    return out


def finite_blocks(op: OpSpec, blocks: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per block, whether every float input the kernel reads is finite there (widened or as stored)."""
    k = next(iter(blocks.values())).shape[0] if blocks else 0
    finite = np.ones(k, dtype=bool)
    for t in op.inputs:
        if t.read_by_kernel and t.name in blocks and _is_float(blocks[t.name]):
            ok = finite_values(blocks[t.name])  # (reduced over its own axes: a strided block's reshape would copy)
            finite &= ok.all(axis=tuple(range(1, ok.ndim))) if ok.ndim > 1 else ok
    return finite


EXPONENT_BITS = {np.dtype(np.float16): 0x7C00, BFLOAT16.np_dtype: 0x7F80}  # a 16-bit float's exponent field


def finite_values(a: np.ndarray) -> np.ndarray:
    """np.isfinite(a), for a 16-bit float from its bits (inf and NaN are the values whose exponent field is all
    ones): NumPy widens float16 element by element for isfinite, and a ResNet-50 layer's blocks (51M values) took
    a tenth of its verify."""
    bits = EXPONENT_BITS.get(a.dtype)
    if bits is None:
        return np.isfinite(a)
    return (a.view(np.uint16) & bits) != bits  # (a view of the same item size: a strided array's too, no copy)


def _take(arrays: Mapping[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[rows] for k, v in arrays.items()}


def _value_of(op: OpSpec):
    return lambda t: {k: r.value for k, r in op.by_output(op.reference(t)).items()}


def exact_block(op: OpSpec, block: Mapping[str, np.ndarray], attrs: Mapping) -> dict[str, np.ndarray]:
    """op.exact on a block: float inputs as Fraction object arrays, integers as they are. An op without `exact`:
    its reference on them (golden/rational.py), or NotRational."""
    frac = {}
    for k, v in block.items():
        if _is_float(v):  # (a non-finite input stays a float: what it touches comes out inf or NaN, as IEEE says)
            flat = [Fraction(x) if math.isfinite(x) else x for x in v.astype(np.float64).reshape(-1).tolist()]
            frac[k] = np.array(flat + [None], dtype=object)[:-1].reshape(v.shape)
        else:
            frac[k] = v
    exact_attrs = {k: Fraction(v) if isinstance(v, float) else v for k, v in attrs.items()}
    if op.exact is None:  # (the reference on Fractions, where it is rational: NotRational where not)
        return through_reference(op, {**frac, **exact_attrs})
    with np.errstate(all="ignore"):  # (an infinity met: inf - inf is NaN, as IEEE says, without a warning)
        result = op.by_output(op.exact({**frac, **exact_attrs}))
    return {k: np.asarray(v, dtype=object) for k, v in result.items()}


def exact_elements(op: OpSpec, block: Mapping[str, np.ndarray], attrs: Mapping, name: str,
                   where: np.ndarray) -> np.ndarray:
    """The exact values of output `name` at flat positions `where` of a block: op.exact_at where the op gives
    it (a few elements of a long block), else op.exact on the whole block (or its reference on Fractions)."""
    if op.exact_at is not None:
        exact_attrs = {k: Fraction(v) if isinstance(v, float) and math.isfinite(v) else v for k, v in attrs.items()}
        with np.errstate(all="ignore"):
            wide = block if getattr(op.exact_at, "narrow_blocks", False) else widened(block)  # (ops/base.narrow_blocks)
            got = op.by_output(op.exact_at({**wide, **exact_attrs}, {name: where}))
        return np.asarray(got[name], dtype=object).reshape(-1)
    return exact_block(op, block, attrs)[name].reshape(-1)[where]


def round_exact(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Exact values (Fraction or Decimal) rounded once to dtype, as float64; a float (inf or NaN: a non-finite
    input reached it) as it is."""
    return np.array([float(v) if isinstance(v, float) else round_fraction(Fraction(v), dtype)
                     for v in values.reshape(-1)], dtype=np.float64)


class AcrossRows:
    """One output summed over every row: the float64 partials of each chunk of rows added, with their bounds,
    and what the allowance needs (ops/accumulation.py): a bound on the largest prefix sum in row order and on
    the sum of the terms' squares, from each chunk's partial and term scale (sum |t| over the chunk bounds
    every prefix inside it, and its square bounds the chunk's sum of squares)."""

    def __init__(self, size: int) -> None:
        self.value, self.bound, self.scale = np.zeros(size), np.zeros(size), np.zeros(size)
        self.peak, self.squares = np.zeros(size), np.zeros(size)
        self.sums = np.zeros(size)  # sum over the float64 additions of |their result|: their roundings' bound
        self.rows = 0  # (or, per element, an int64 array: Scatter's elements get different numbers of terms)
        self.quantum = np.full(size, np.inf)  # the smallest dyadic.quantum of the partials added (inf: all zero)
        self.running = np.zeros(size)  # the largest |running sum| the additions computed

    def add(self, r: Reference, rows) -> None:
        scale = r.scale.reshape(-1)
        with np.errstate(all="ignore"):
            np.maximum(self.peak, np.abs(self.value) + scale, out=self.peak)
            self.squares += scale * scale
        value = r.value.reshape(-1)
        nonzero = np.flatnonzero(value)  # (a chunk of a Scatter op touches a few elements of a wide output)
        self.quantum[nonzero] = np.minimum(self.quantum[nonzero], quantum(value[nonzero]))
        self.value += value
        with np.errstate(all="ignore"):
            self.sums += np.abs(self.value)
            np.maximum(self.running, np.abs(self.value), out=self.running)
        self.bound += r.bound.reshape(-1)
        self.scale += scale
        self.rows += rows

    def total_bound(self) -> np.ndarray:
        """The partials' bounds plus each float64 addition's rounding: at most F64_UNIT of its exact result, which
        is within a factor 1 + 2^-52 of the computed one (`sums`). (Bounding each by the whole scale instead made
        a chunk of sqrt(rows) rows, and so many additions, send thousands of columns to the exact pass.) Scales,
        bounds and sums are added with errors far below the slack."""
        return (self.bound + F64_UNIT * (1 + 2.0**-50) * self.sums) * (1 + 2.0**-40)

    def certifying_bound(self) -> np.ndarray:
        """total_bound, less the additions' roundings where none can have happened: every partial a multiple of
        `quantum` and every running sum computed within 2^52 of it (then each exact result is a multiple of it
        below 2^53 of it: dyadic.quantum). The golden's certification takes this one; the allowance keeps
        total_bound, its slack for the float64 sums."""
        with np.errstate(invalid="ignore"):
            exact = self.running <= EXACT_SUM_UNITS * self.quantum
        return np.where(exact, self.bound * (1 + 2.0**-40), self.total_bound())

    def allowance(self, term_roundings: int, sum_roundings: int = 0) -> np.ndarray:
        """A correct float32 kernel's largest distance from the exact sum, per element (ops/accumulation.py).
        The prefixes were summed in float64: total_bound() covers their error too. `rows` is per element where
        the elements get different numbers of terms (Scatter); sum_roundings: float32 roundings of the whole sum."""
        slack = self.total_bound()
        with np.errstate(all="ignore"):
            peak = np.maximum(self.peak, np.abs(self.value)) * (1 + 2.0**-40) + slack
            total = self.scale * (1 + 2.0**-40) + slack
            allowance = across_rows_allowance(peak, total, self.squares * (1 + 2.0**-40), self.rows, term_roundings)
            if sum_roundings:
                allowance = allowance + sum_roundings * ACCUMULATION_UNIT * (1 + 2.0**-40) * (np.abs(self.value) + slack)
        return allowance


def across_chunk_rows(rows: int) -> int:
    """Rows per chunk for an op with an output summed over every row: about sqrt(rows), so that a chunk's sum
    |t|, which bounds the prefixes inside it, is of the size of the prefixes themselves (a zero-mean sum of N
    terms wanders ~ sqrt(N) terms; a chunk of sqrt(N) terms adds up to about as much)."""
    return max(1, math.isqrt(max(rows, 1)))
