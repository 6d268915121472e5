"""How far a correct kernel's sum over every row may stand from the exact sum: the allowance of an output
summed across rows (dgamma, gradWeight, gradBias), derived from the computation (docs/allowances.md).

The device computes each term in float32 (a few roundings) and adds the N terms in float32 in an order of
its own, then rounds once to the output dtype. Every addition rounds its result S_node (the exact sum of the
terms below that node) by a relative error delta with |delta| <= u = 2^-24. To first order the error is

    e = sum over the N - 1 additions of delta_node * S_node  +  sum over terms of eps_i * t_i,

with |eps_i| <= c u (c: the roundings that make a term). Higham and Mary (SIAM J. Sci. Comput. 41(5), 2019)
model the deltas as independent with mean zero; then Hoeffding's inequality gives, with probability at least
1 - 2 exp(-lambda^2 / 2),

    |e| <= lambda u sqrt(sum S_node^2 + c sum t_i^2).

What bounds S_node is the order. The orders a kernel uses (sequential, pairwise, blocked, each core's rows
summed on the core) make every node before the last step a contiguous range of rows, whose sum is a
difference of two prefix sums: |S_node| <= 2 peak, peak = max_k |t_1 + ... + t_k| in row order. The last step
adds at most PARTIALS partials in any order: its m-th node holds at most m of them, |S| <= 2 m peak (and never
more than sum |t_i|). So

    sum S_node^2 <= 4 peak^2 (N - P + sum_{m=2..P} m^2),  P = min(PARTIALS, N).

Against the worst case (N u sum|t_i|) this is what keeps a cancelling sum's allowance below the result: peak is
~ sqrt(N) times a term for zero-mean terms, while sum|t_i| is ~ N times. Second-order terms (the children's own
errors inside S_node, at most the same bound, ~1e-3 of peak at a million rows) are covered by SECOND_ORDER.
The output rounding (to fp16, bf16 or fp32) is the standard's own T |golden|, judged beside this.
"""

from __future__ import annotations

import numpy as np

LAMBDA = 8.0  # a correct element exceeds the bound with probability below 2 exp(-32) = 2.5e-14
PARTIALS = 64  # partials the last step may add in any order (a core each: the 950 has fewer)
SECOND_ORDER = 1.0 + 2.0**-6
ACCUMULATION_UNIT = 2.0**-24  # float32: the 950's kernels accumulate fp16, bf16 and fp32 in float32


def across_rows_allowance(peak: np.ndarray, total: np.ndarray, squares: np.ndarray, rows,
                          term_roundings: int, unit: float = ACCUMULATION_UNIT,
                          term_unit: float | None = None) -> np.ndarray:
    """The absolute allowance per element of a sum over `rows` rows (float64 arrays, one value per element).

    peak: an upper bound on the largest |prefix sum| in row order; total: sum |t_i| (caps every node);
    squares: an upper bound on sum t_i^2; term_roundings: c, the float32 roundings that make one term.
    rows: an int, or per element an int array (a scatter's elements sum different numbers of terms).
    term_unit: the unit of a term's roundings where it is not the accumulation's (a term made in the inputs'
    16-bit dtype: 2^-11, 2^-8): each then adds (term_unit t_i)^2 under the root, not (unit t_i)^2."""
    with np.errstate(all="ignore"):  # (a sum that is inf or NaN, from a non-finite input, has no allowance)
        peak = np.minimum(np.asarray(peak, np.float64), np.asarray(total, np.float64))
        p = np.clip(rows, 1, PARTIALS)
        contiguous = 4.0 * peak**2 * np.maximum(np.asarray(rows) - p, 0)
        last, node = np.zeros_like(peak), np.empty_like(peak)  # (node reused: a fresh array per step faulted its pages in)
        for m in range(2, int(np.max(p, initial=1)) + 1):  # (at most 63 steps: the last step's nodes, each capped by sum|t|)
            np.square(np.minimum(np.multiply(2.0 * m, peak, out=node), total, out=node), out=node)
            last += node if np.ndim(p) == 0 else np.where(m <= p, node, 0.0)
        terms = term_roundings * np.asarray(squares, np.float64)
        nodes = contiguous + last + (terms if term_unit is None else terms * (term_unit / unit) ** 2)
        return LAMBDA * unit * np.sqrt(nodes) * SECOND_ORDER


def sum_allowance(orders: list[np.ndarray], term_roundings: int, unit: float = ACCUMULATION_UNIT,
                  term_unit: float | None = None) -> np.ndarray:
    """The allowance of sums over each row of float64 terms (the exact terms to float64's rounding), for an
    output that is one sum per row or channel (BatchNorm's gradBias): across_rows_allowance with the peak taken
    over every order of the terms the kernel may add them in (each array: (k, terms), one such order; or
    (k, a, b, ...), the order being its trailing axes read in C order, so that a transposed view need not be
    copied: a channel's (n, s) and (s, n) orders). The float64 prefixes' own error (n u64 sum|t|) is added to
    the peak."""
    first = orders[0]
    k = first.shape[0]
    flat = first.reshape(k, -1)
    n = flat.shape[1]
    with np.errstate(all="ignore"):
        total = np.abs(flat).sum(axis=1)
        slack = (n + 2) * 2.0**-53 * total
        peak = np.max([prefix_peak(o) for o in orders], axis=0)
        squares = np.square(flat).sum(axis=1) * (1 + 2.0**-40)
        return across_rows_allowance(peak * (1 + 2.0**-40) + slack, total * (1 + 2.0**-40) + slack, squares, n,
                                     term_roundings, unit, term_unit)


PEAK_CHUNK = 1 << 18  # elements a prefix_peak step holds: the whole order's running sums never exist at once


def prefix_peak(order: np.ndarray) -> np.ndarray:
    """max_j |t_1 + ... + t_j| per row of an order (see sum_allowance), the running sums added one term at a
    time in float64 exactly as np.cumsum adds them, a chunk of the second axis at a time (a chunk's sums start
    from the carried one, so the additions and their roundings are the same as one cumsum's), in one buffer: a
    transposed order's chunk is gathered into it once, never reshaped into a copy first."""
    k, width = order.shape[0], order.shape[1] if order.ndim > 1 else 0
    per = int(np.prod(order.shape[2:], dtype=np.int64)) if order.ndim > 2 else 1
    step = max(1, PEAK_CHUNK // max(k * per, 1))
    peak, carry = np.zeros(k), np.zeros(k)
    buf = np.empty((k, 1 + min(step, width) * per))  # (the carried sum, then the chunk's terms, summed in place)
    for s in range(0, width, step):
        n = 1 + (min(width, s + step) - s) * per
        sums = buf[:, :n]
        sums[:, 0] = carry
        sums[:, 1:].reshape(order[:, s:s + step].shape)[...] = order[:, s:s + step]  # (a view: rows split, not copied)
        np.cumsum(sums, axis=1, out=sums)
        carry = sums[:, -1].copy()
        np.maximum(peak, np.abs(sums[:, 1:], out=sums[:, 1:]).max(axis=1, initial=0.0), out=peak)
    return peak
