"""PyTorch CPU as an independent device for the contraction and window ops (issue 29): float32 kernels that are
PyTorch's own (torch.matmul, aten's convolution_backward, avg_pool2d_backward, max_pool2d_with_indices_backward),
written into a copy of a generated suite as the device's dumps, for verify to judge.

Under make test the independent kernels are NumPy ports (each op's test file); PyTorch's wheels are too large for
make test's install (decision 50), so these run under make test-torch, in a venv of their own. Nothing here copies
the ports: the operands are read through the manifest's numbers by the same readers (contraction_kernels.logical,
the convolution test's `parameters`, maxpool.params) and the dumps written by the same writers (write_dump,
independent_dumps, the convolution test's write_dumps); only the arithmetic is PyTorch's.
"""

from __future__ import annotations

import numpy as np
import torch

import harness
import maxpool
from contraction_kernels import logical

F = np.float32


def _t(a: np.ndarray) -> torch.Tensor:
    """A float32 torch tensor of a logical operand (its values exact: the operands are float32 or narrower)."""
    return torch.from_numpy(np.ascontiguousarray(a, F))


def matmul_float32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch.matmul of float32 operands: its own broadcast of the batch dims, 1-d operands, its own blocking."""
    return torch.matmul(_t(a), _t(b)).numpy()


def matmul(case, m) -> np.ndarray:
    """aclnnMatmul: the NumPy port's rules for cubeMathType USE_FP16 (test_op_matmul.sgemm), torch's product."""
    from test_op_matmul import sgemm

    return sgemm(case, m, matmul_float32)


def batch_mat_mul(case, m) -> np.ndarray:
    """aclnnBatchMatMul: torch.matmul of the logical operands (its batch of 1 broadcasts, as the API's does)."""
    return matmul_float32(logical(case, m, "self"), logical(case, m, "mat2"))


def _symmetric(padding) -> list[int]:
    """aten's padding, one value an axis: the case's (before, after) pairs where they are equal."""
    if any(p != q for p, q in padding):
        raise ValueError(f"padding {padding} is not symmetric")
    return [p for p, _ in padding]


def convolution_backward(x, w, gy, stride, padding, dilation, groups, transposed, output_padding, mask) -> dict:
    """aten.convolution_backward in float32 (gradBias's size Cout: a weight's first dim, transposed its second times
    groups). A padding whose sides differ (a 2-D padding of 4 values) is the same convolution of the input padded
    by those zeros with no padding: gradInput is the padded input's gradient with the padding cut off."""
    cout = w.shape[1] * groups if transposed else w.shape[0]
    if not transposed and any(p != q for p, q in padding):
        xp = np.pad(x, ((0, 0), (0, 0), *padding))
        got = convolution_backward(xp, w, gy, stride, [(0, 0)] * len(padding), dilation, groups, False,
                                   output_padding, mask)
        inner = (slice(None), slice(None), *(slice(p, p + n) for (p, _), n in zip(padding, x.shape[2:])))
        return {**got, "gradInput": None if got["gradInput"] is None else got["gradInput"][inner]}
    gi, gw, gb = torch.ops.aten.convolution_backward(
        _t(gy), _t(x), _t(w), [cout], list(stride), _symmetric(padding), list(dilation), transposed,
        list(output_padding), groups, list(mask))
    return {name: None if v is None else v.numpy() for name, v in zip(("gradInput", "gradWeight", "gradBias"),
                                                                      (gi, gw, gb))}


def convolution_args(case, m) -> tuple:
    """convolution_backward's arguments of a case: input, weight, gradOutput and the window parameters read as the
    NumPy port reads them (test_op_convolution_backward.parameters), outputPadding, and aten's output_mask: an
    output the case leaves null is not computed."""
    from test_op_convolution_backward import OUTPUTS, attributes, logical as read, parameters

    stride, padding, dilation, groups, transposed = parameters(m)
    ts = harness.tensors(m)
    mask = [bool(ts.get(n) and ts[n].get("dump")) for n in OUTPUTS]
    out_pad = attributes(m).get("outputPadding") or [0] * len(stride)
    return (*(read(case, m, n) for n in ("input", "weight", "gradOutput")), stride, padding, dilation, groups,
            transposed, out_pad, mask)


def _planes(case, m, name, n: int, dtype=F) -> torch.Tensor:
    """A tensor's logical values as aten's (1, planes, *last n axes): every (N, C) plane or volume pooled alike."""
    v = maxpool.blocks(case, m, name, n, dtype)
    return torch.from_numpy(np.ascontiguousarray(v)).unsqueeze(0)


def _self_shape(m) -> list[int]:
    return harness.tensors(m)["self"]["shape"]


def _empty(m) -> np.ndarray | None:
    """A self of no elements: nothing to compute, an empty gradient (aten refuses a batch of no planes)."""
    return np.zeros(_self_shape(m), F) if 0 in _self_shape(m) else None


def _avg_pool(n: int):
    """aten.avg_pool{n}d_backward: kernelSize, stride (empty: the kernel), padding, ceilMode, countIncludePad,
    divisorOverride (0: none) as the case gives them (maxpool.params spreads one value to every axis)."""
    backward = getattr(torch.ops.aten, f"avg_pool{n}d_backward")

    def kernel(case, m) -> np.ndarray:
        if (empty := _empty(m)) is not None:
            return empty
        a = maxpool.attrs(m)
        k, s, p, _ = maxpool.params(m, n)
        g = _planes(case, m, "gradOutput", n)
        x = torch.zeros((1, g.shape[1], *_self_shape(m)[-n:]), dtype=torch.float32)
        got = backward(g, x, list(k), list(s), list(p), bool(a.get("ceilMode", False)),
                       bool(a.get("countIncludePad", True)), a.get("divisorOverride") or None)
        return got.numpy().reshape(_self_shape(m))
    return kernel


def _max_pool(n: int):
    """aten.max_pool{n}d_with_indices_backward with the case's indices: a position of its (N, C) plane or volume
    ((d * H + h) * W + w), the layout torch's max_pool{n}d_with_indices returns (maxpool.forward derives the same),
    so they go in as they are, int64; aten adds each window's gradOutput at its index."""
    backward = getattr(torch.ops.aten, f"max_pool{n}d_with_indices_backward")

    def kernel(case, m) -> np.ndarray:
        if (empty := _empty(m)) is not None:
            return empty
        k, s, p, d = maxpool.params(m, n)
        g = _planes(case, m, "gradOutput", n)
        idx = _planes(case, m, "indices", n, np.int64)
        x = torch.zeros((1, g.shape[1], *_self_shape(m)[-n:]), dtype=torch.float32)
        got = backward(g, x, list(k), list(s), list(p), list(d), bool(maxpool.attrs(m).get("ceilMode", False)), idx)
        return got.numpy().reshape(_self_shape(m))
    return kernel


avg_pool2d_backward, avg_pool3d_backward = _avg_pool(2), _avg_pool(3)
max_pool2d_with_indices_backward, max_pool3d_with_argmax_backward = _max_pool(2), _max_pool(3)
