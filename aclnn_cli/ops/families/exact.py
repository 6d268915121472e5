"""`fill: exact` (oneDNN benchdnn's integer fills): operands of small nonzero integers chosen so that every partial
sum, in any order, is an integer the accumulator and the output hold exactly; the device's result is then the golden
bit for bit, and verify demands it (the `bitwise` standard).

A sum of K terms, each a product of two operand values in [-r, r] (degree 2), or one value (degree 1: gradBias's sum
of gradOutput), has every partial sum within K r^degree; a binary format of p significant bits holds every integer up
to 2^p. So r is the largest integer with K r^degree <= 2^p for each output, p its dtype's precision or that of the
narrower dtype the op says the device rounds it through (`OpSpec.rounded_through`: float16 where the cube's result
leaves as float16), and at most 2^min(p of the operands' dtypes, 11): the cube's HFLOAT32 and
float16 operands (cubeMathType 1 to 3) keep 11 significant bits. The values are nonzero so that no output's sign of
zero depends on the order (a sum of zero terms is +0 or -0 by how a kernel starts it).
"""

from __future__ import annotations

from typing import Mapping

from ...values.fill import NonzeroInt

CUBE_BITS = 11  # HFLOAT32 and float16 keep 11 significant bits


def exact_range(sums: Mapping[str, tuple[int, int, int, str]], operand_bits: int) -> int | str:
    """The largest r for sums {output: (K, degree, p, its dtype's name)}, operands of at most `operand_bits` bits;
    or why there is none (one line naming the output, its K and the largest K an exact fill reaches)."""
    r = 1 << min(operand_bits, CUBE_BITS)
    for name, (k, degree, p, dtype) in sums.items():
        if k <= 0:
            continue
        if k > 1 << p:
            return (f"{name} sums K = {k:,} terms; {dtype} holds integers exactly only up to 2^{p} = {1 << p:,}, "
                    f"so an exact fill reaches K = {1 << p:,} at most here")
        r = min(r, _root_floor((1 << p) // k, degree))  # (k r^d <= 2^p exactly when r^d <= floor(2^p / k))
    return r


def _root_floor(n: int, degree: int) -> int:
    """floor(n ** (1 / degree)) for n >= 1, in integers."""
    if degree == 1:
        return n
    r = int(round(n ** (1.0 / degree)))
    while r**degree > n:
        r -= 1
    while (r + 1) ** degree <= n:
        r += 1
    return max(r, 1)


def precision(op, output: str, shapes, values, dtypes) -> int:
    """The significant bits an output's result keeps: its dtype's, or fewer where the op rounds it through a narrower
    dtype for these attributes (`OpSpec.rounded_through`)."""
    through = op.rounded_through(values, dtypes, shapes).get(output) if op.rounded_through else None
    return min(dtypes[output].precision, through.precision if through is not None else dtypes[output].precision)


def exact_fills(operands, sums, dtypes) -> dict | str:
    """{operand: its fill} with r from `exact_range`, or why none."""
    got = exact_range(sums, min(dtypes[n].precision for n in operands))
    if isinstance(got, str):
        return got
    return {n: NonzeroInt((got,)) for n in operands}
