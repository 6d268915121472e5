"""How a per-channel float32 sum may be accumulated, for every op that sums a channel over its samples and positions
(BatchNormBackward, BatchNormReduceBackward, PreluBackward): in 16 bits (defects: such a sum stalls once it outgrows
its terms' ulp) or as a float32 running sum in (n, s) order (legitimate: another order than the device's tree). One
factory, so that an op names its sums and gets the same kernels as the others."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..base import defect, legitimate
from ..treesum import narrow_running_sum, running_sum


def accumulation_variants(kernel: Callable, sums: str) -> tuple[Callable, Callable, Callable]:
    """(float16 accumulation, bfloat16 accumulation, float32 running sums): kernel(t, row_sum=...) with `sums` (what
    the op's channel sums are, for the variants' descriptions) accumulated so."""
    import ml_dtypes

    @defect
    def fp16(t):
        return kernel(t, row_sum=narrow_running_sum(np.float16))

    @defect
    def bf16(t):
        return kernel(t, row_sum=narrow_running_sum(ml_dtypes.bfloat16))

    @legitimate
    def sequential(t):
        return kernel(t, row_sum=running_sum)

    fp16.__doc__ = f"Defect: {sums} accumulated sequentially in float16 (stalls once a sum outgrows its terms' ulp)."
    bf16.__doc__ = f"Defect: {sums} accumulated sequentially in bfloat16 (8 significant bits)."
    sequential.__doc__ = f"Legitimate: {sums} float32 running sums in (n, s) order (a plain loop)."
    return fp16, bf16, sequential
