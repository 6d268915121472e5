"""What the MaxPool gradient tests share (aclnnMaxPool2dWithIndicesBackward, aclnnMaxPool3dWithArgmaxBackward): the
windows read from a case's manifest, PyTorch CPU's forward loop (the indices gen must derive), and the exact oracle
of Fractions, for n = 2 or 3 window axes. Nothing here uses the op's or the window family's code: the manifest's
numbers alone (tests/harness.py) and PyTorch's formulas, start = o * s - p, taps start + j * d."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

import harness


def attrs(m) -> dict:
    return {a["name"]: a["value"] for a in m.get("attributes", [])}


def spread(v, n: int, fill):
    """An aclIntArray of 1 or n values as n; `fill` where it is empty."""
    v = list(v or [])
    return tuple(fill) if not v else (v[0],) * n if len(v) == 1 else tuple(v[:n])


def params(m, n: int):
    """(kernel, stride, padding, dilation), n values each, as the case's attributes give them."""
    a = attrs(m)
    k = spread(a["kernelSize"], n, None)
    return k, spread(a.get("stride"), n, k), spread(a.get("padding"), n, (0,) * n), spread(a.get("dilation"), n, (1,) * n)


def blocks(case, m, name: str, n: int, dtype=np.float64) -> np.ndarray:
    """A tensor's logical values as (planes, last n axes)."""
    t = harness.tensors(m)[name]
    v = harness.view(harness.storage(case, t), t).astype(dtype)
    return v.reshape(math.prod(v.shape[:-n]), *v.shape[-n:])


def forward(x: np.ndarray, k, s, p, d, outs) -> np.ndarray:
    """PyTorch CPU's max_pool2d / max_pool3d indices of blocks x (planes, (D,) H, W): for each window, maxindex starts
    at its first tap inside the input, maxval at -inf; a tap replaces them where val > maxval or val is NaN (taps in
    scan order, the first axis outer). Every plane at once, one tap at a time."""
    sizes = x.shape[1:]
    flat_x = x.reshape(x.shape[0], math.prod(sizes))
    out = np.zeros((x.shape[0], *outs), np.int64)
    for o in itertools.product(*(range(q) for q in outs)):
        axes = [[o[i] * s[i] - p[i] + j * d[i] for j in range(k[i]) if 0 <= o[i] * s[i] - p[i] + j * d[i] < sizes[i]]
                for i in range(len(sizes))]
        taps = [int(np.ravel_multi_index(pos, sizes)) for pos in itertools.product(*axes)]
        best, at = np.full(x.shape[0], -math.inf), np.full(x.shape[0], taps[0], np.int64)
        for f in taps:
            v = flat_x[:, f]
            take = (v > best) | np.isnan(v)
            best, at = np.where(take, v, best), np.where(take, f, at)
        out[(slice(None), *o)] = at
    return out


def derived_are_forwards(case, m, n: int) -> bool:
    """Whether a case's indices are the forward's of its self."""
    idx = blocks(case, m, "indices", n, np.int64)
    return np.array_equal(idx, forward(blocks(case, m, "self", n), *params(m, n), idx.shape[1:]))


def oracle(n: int):
    """oracle(case, m): the exact gradient in logical order, each window's gradOutput (a Fraction) added at its
    index in its plane or volume."""
    def exact(case, m) -> list:
        g = blocks(case, m, "gradOutput", n)
        idx = blocks(case, m, "indices", n, np.int64)
        size = math.prod(harness.tensors(m)["self"]["shape"][-n:])
        out = [[Fraction(0)] * size for _ in range(g.shape[0])]
        for b in range(g.shape[0]):
            for v, i in zip(g[b].reshape(-1).tolist(), idx[b].reshape(-1).tolist()):
                out[b][i] += Fraction(v)
        return [v for block in out for v in block]
    return exact
