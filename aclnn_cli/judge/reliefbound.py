"""How far a correct float32 kernel's element may stand from its golden where its terms cancel: the relief's bound.

The default standard judges an element by its relative error |a - g| / |g| < T (T the output dtype's: 2^-7 bf16,
2^-10 fp16, 2^-13 fp32). Where the terms the element is made of cancel, |g| is far below them and a correct
kernel's float32 roundings alone can exceed T |g|; relief then re-judges the element against a larger divisor.
That divisor had been the term scale itself (Reference.scale, the terms' magnitude), which lets an element be off
by T * scale: for bf16, 2^-7 of the terms, 2^17 times what float32 arithmetic can do. A sign-flipped softmax
gradient element (8 x 4096, bf16), a GELU gradient flipped over its whole tail, a SELU gradient halved in
saturation: each passed.

What a correct kernel can do is derived from its computation (docs/allowances.md): an element made by adding n
terms in float32 in any order, each term made with a few roundings, stands within (n + FORMULA_ROUNDINGS) u scale
of the exact result (the worst case of every order, Higham's gamma_n; u = 2^-24, 2^-53 for float64 outputs). So
the relief divides by max(|g|, share * scale + shared / T) with share = (n + FORMULA_ROUNDINGS) u / T, at most 1
(never looser than before), and shared the error the element's row shares (Reference.shared: a rounding the
device makes once for many elements, such as BatchNormElemtBackward's fp16 means): an element at its full bound
has a relative error T (judge/comparison.py, _relieve). n comes from the op's family
(`relief_terms`): 0 for an elementwise op, a row's R for a Rows op whose elements are made from sums over their row;
a family that has not derived it (windows, dot products, scatters, ...) keeps the term scale (share 1), as do outputs
summed across rows and per-row outputs (their allowance is their own: ops/accumulation.py).
"""

from __future__ import annotations

from ..casedir import manifest as M
from ..ops.accumulation import ACCUMULATION_UNIT
from ..pipeline.stages import geometry

# The float32 roundings of one element's formula besides its sums: each operation rounds by at most u of a value
# no larger than the term scale, and each device function (exp, erf, tanh, log, a reciprocal) is taken to be within
# 4 of its ulps (the legitimate variants' Exp is 2 off; the 950's own accuracy is not published). 32 is the budget,
# not a count made per op: every bundled op's emulated kernel, legitimate variants and independent kernels pass
# under it (make test), and an op whose formula needs more would fail a correct kernel there.
FORMULA_ROUNDINGS = 32
UNIT = {8: 2.0**-53}  # (per output itemsize: float64 outputs are computed in float64; the rest as the device does)


def relief_share(m: M.CaseManifest, out: M.TensorEntry, limit: float | None) -> float:
    """The part of the term scale the relief divides by for output `out` (1: the term scale itself)."""
    family = m.op.family
    if not limit or out.name in family.across_rows or out.name in family.per_row:
        return 1.0
    terms = family.relief_terms(None if family.element_local else geometry(m))
    return 1.0 if terms is None else share(terms, limit, out.dtype.itemsize)


def share(terms: int, limit: float, itemsize: int = 4) -> float:
    """(terms + FORMULA_ROUNDINGS) u / T, at most 1: for an elementwise op's element, terms 0 (the report's plots)."""
    return min(1.0, (terms + FORMULA_ROUNDINGS) * UNIT.get(itemsize, ACCUMULATION_UNIT) / limit)
