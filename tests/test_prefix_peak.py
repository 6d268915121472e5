"""ops/accumulation.prefix_peak, the largest running sum of an order of terms (sum_allowance's peak), against its
definition: one np.cumsum over the order read in C order, bit for bit, at every chunking (the running sums carried
from chunk to chunk are the same additions), for orders given as transposed views (a channel's (s, n) order)."""

from __future__ import annotations

import numpy as np
import pytest

from aclnn_cli.ops import accumulation as A


def definition(order: np.ndarray) -> np.ndarray:
    k = order.shape[0]
    flat = np.ascontiguousarray(order).reshape(k, -1)
    return np.abs(np.cumsum(flat, axis=1)).max(axis=1, initial=0.0)


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 18])
def test_prefix_peak_is_one_cumsum_at_every_chunking(monkeypatch, chunk):
    monkeypatch.setattr(A, "PEAK_CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    for k, n, m in [(1, 1, 1), (3, 17, 5), (2, 1000, 3), (5, 0, 4), (1, 333, 1), (4, 50, 20)]:
        terms = rng.standard_normal((k, n * m)) * rng.choice([1e-300, 1.0, 1e300], (k, n * m))
        for order in (terms, terms.reshape(k, n, m), terms.reshape(k, n, m).transpose(0, 2, 1),
                      terms.reshape(k, n, m, 1)[:, :, ::-1]):
            assert A.prefix_peak(order).tobytes() == definition(order).tobytes(), (k, n, m, order.strides)
