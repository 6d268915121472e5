"""An independent float32 implementation of the ten ops (not aclnn_cli's code, not its formulas' order); complex
outputs in complex arithmetic of their dtype.

Computes in float32 and rounds once to the output dtype, to nearest even,
the way a correct device kernel does. Used to show the default gate passes
a correct kernel that is not our emulator.
"""

from __future__ import annotations

import math

import numpy as np

F = np.float32


def silu(dy, x):
    sig = F(1) / (F(1) + np.exp(-x))
    return dy * sig * (F(1) + x * (F(1) - sig))


def fast_gelu(dy, x):
    z = F(1.702) * x
    sig = F(1) / (F(1) + np.exp(-z))
    return dy * (sig + z * sig * (F(1) - sig))


def log_sigmoid(dy, x):
    return dy / (F(1) + np.exp(x))


def hardsigmoid(dy, x):
    return np.where((x > F(-3)) & (x < F(3)), dy / F(6), F(0))


def swish(dy, x, betaOptional=None):
    beta = F(1.0 if betaOptional is None else betaOptional)
    sig = F(1) / (F(1) + np.exp(-(beta * x)))
    return dy * (sig + beta * x * sig * (F(1) - sig))


def sigmoid(dy, y):
    return dy * y * (F(1) - y)


def softplus(dy, x, beta, threshold):
    z = F(beta) * x
    return np.where(z > F(threshold), dy, dy / (F(1) + np.exp(-z)))


def leaky_relu(dy, x, negativeSlope, selfIsResult=False):
    return np.where(x > 0, dy, dy * F(negativeSlope))


_ERF = np.vectorize(math.erf, otypes=[np.float64])
SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def gelu_v2(dy, x, approximate="none"):
    if approximate == "tanh":  # d/dx of 0.5 x (1 + tanh(u)), 1 + tanh(u) = 2 sigmoid(2u)
        u = F(SQRT_2_OVER_PI) * (x + F(0.044715) * x * x * x)
        q = F(1) / (F(1) + np.exp(F(-2) * u))
        du = F(SQRT_2_OVER_PI) * (F(1) + F(3 * 0.044715) * x * x)
        g = q + F(2) * x * q * (F(1) - q) * du
        return dy * np.where(np.isnan(g) & ~np.isnan(x), q, g)  # x = +-inf: the limits, q = 1 or 0
    cdf = F(0.5) * (F(1) + _ERF(x.astype(np.float64) / math.sqrt(2)).astype(F))
    pdf = np.exp(F(-0.5) * x * x) * F(1 / math.sqrt(2 * math.pi))
    return dy * (cdf + x * pdf)


def hardswish(dy, x):
    g = np.where(x >= F(-3), x / F(3) + F(0.5), F(0))  # NaN x: both tests false, g = 1 (the doc's kernel)
    return dy * np.where(x <= F(3), g, F(1))


def elu(dy, x, alpha=1.0, scale=1.0, inputScale=1.0, isResult=False):
    """The factor first, distributed: inputScale x + inputScale alpha scale; (alpha scale inputScale) e^(x inputScale)."""
    a, s, i = F(alpha), F(scale), F(inputScale)
    g = i * x + i * (a * s) if isResult else (a * s * i) * np.exp(x * i)
    return dy * np.where(x <= 0, g, s)  # NaN x: x <= 0 is false, dy * scale (the kernel's select)


def hardtanh(dy, x, min=-1.0, max=1.0):  # noqa: A002 (the API's names)
    """PyTorch's form: 0 where x <= min or x >= max (NaN compares false: dy passes)."""
    return np.where((x <= F(min)) | (x >= F(max)), F(0), dy)


def softshrink(dy, x, **attrs):  # (the API's attribute is named lambda, a Python keyword)
    """PyTorch's form: 0 where -lambda <= x <= lambda (NaN compares false: dy passes)."""
    lam = F(attrs["lambda"])
    return np.where((x >= -lam) & (x <= lam), F(0), dy)


def threshold(dy, x, threshold=0.0):
    """x > threshold passes dy (NaN x too); |threshold| <= FLT_EPSILON is ReLU's gradient, dy times a 0/1 mask."""
    t = F(threshold)
    keep = ~(x <= t)
    if abs(float(t)) <= float(np.finfo(F).eps):
        return dy * (~(x <= F(0))).astype(F)
    return np.where(keep, dy, F(0))


def threshold_int(dy, x, threshold=0.0):
    """Integers: x > threshold (the float32 the op receives) exactly, as x > floor(threshold) in Python's integers;
    a NaN threshold passes every dy (x <= NaN is false)."""
    t = float(F(threshold))
    if math.isnan(t) or math.isinf(t):
        keep = np.full(np.shape(x), math.isnan(t) or t < 0)
    else:
        keep = (np.asarray(x).astype(object) > math.floor(t)).astype(bool)
    return np.where(keep, dy, np.zeros_like(dy))


def selu(dy, result):
    """SELU's scale factored out: scale * (dy * (y / scale + alpha)) for y <= 0, scale * dy else (NaN y: the else)."""
    s, a = F(1.0507009873554805), F(1.6732632423543772)
    return s * (dy * np.where(result <= F(0), result / s + a, F(1)))


def mish(dy, x):
    """PyTorch's CPU order: tanh(log1p(e^x)) and sigmoid(x) by the library, dy (t + x s (1 - t^2))."""
    t = np.tanh(np.log1p(np.exp(x)))
    s = F(1) / (F(1) + np.exp(-x))
    return dy * (t + x * s * (F(1) - t * t))


def mish_grad(dy, x, tanhxOptional=None):
    """The graph op MishGrad: without tanhx mish above; with it ops-nn's golden's form, dy (t + x s (1 - t)(1 + t)),
    sigmoid by branch (e^x / (1 + e^x) below 0), not the kernel's (t t - 1) x / (e^-x + 1) subtracted."""
    if tanhxOptional is None:
        return mish(dy, x)
    t = tanhxOptional
    e = np.exp(-np.abs(x))
    s = np.where(x >= F(0), F(1) / (F(1) + e), e / (F(1) + e))
    return dy * (t + x * s * ((F(1) - t) * (F(1) + t)))


KERNELS = {
    "aclnnSiluBackward": silu,
    "aclnnFastGeluBackward": fast_gelu,
    "aclnnLogSigmoidBackward": log_sigmoid,
    "aclnnHardsigmoidBackward": hardsigmoid,
    "aclnnSwishBackward": swish,
    "aclnnSigmoidBackward": sigmoid,
    "aclnnSoftplusBackward": softplus,
    "aclnnLeakyReluBackward": leaky_relu,
    "aclnnGeluBackwardV2": gelu_v2,
    "aclnnGeluBackward": lambda dy, x: gelu_v2(dy, x, "tanh"),  # (GELU's tanh form: decision 101)
    "aclnnHardswishBackward": hardswish,
    "aclnnEluBackward": elu,
    "aclnnHardtanhBackward": hardtanh,
    "aclnnSoftshrinkBackward": softshrink,
    "aclnnThresholdBackward": threshold,
    "aclnnSeluBackward": selu,
    "aclnnMishBackward": mish,
    "aclnnMishGrad": mish_grad,
}


# Ops with integer outputs: computed in integers (float32 holds int32 only to 2^24, float64 int64 to 2^53).
INTEGER_KERNELS = {"aclnnThresholdBackward": threshold_int}


def sigmoid_complex(dy, y):
    """conj(y (1 - y)) dy in NumPy's complex arithmetic of the inputs' dtype, in another order than the AI CPU's
    (conj distributes over the product): (dy conj(y)) conj(1 - y), with 1 - y as a complex array's difference."""
    one_minus = np.subtract(np.ones_like(y), y)
    return np.multiply(np.multiply(dy, np.conjugate(y)), np.conjugate(one_minus))


# Ops with complex outputs: computed in complex arithmetic of the complex dtype (complex64: float32 parts).
COMPLEX_KERNELS = {"aclnnSigmoidBackward": sigmoid_complex}


def covers(op_name: str) -> bool:
    """Whether this file has an independent kernel for the op (user ops and new ops may have none)."""
    return op_name in KERNELS


def run(op_name: str, inputs: dict, tensors: dict, attributes: dict | None = None) -> np.ndarray:
    """Compute in float32; round once to the output dtype, or twice where the op computes in the
    promoted input dtype and casts (equal 16-bit inputs of a promoting op)."""
    from aclnn_cli.tensor import dtypes as D
    from aclnn_cli.ops import OPS

    op = OPS[op_name]
    first, second = (t.name for t in op.inputs[:2])  # gradOutput and self (or output)
    dy, x = inputs[first], inputs[second]
    # (an optional input the kernel reads, given, by name: MishGrad's tanhx)
    more = {t.name: inputs[t.name].astype(F) for t in op.inputs[2:]
            if t.optional and t.read_by_kernel and t.name in inputs}
    out = next(t for t in tensors.values() if t["role"] == "output")
    out_dtype = D.lookup(out["dtype"]).np_dtype
    numbers = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}  # (non-finite scalars as the manifest spells them)
    attrs = {k: numbers.get(v, v) if isinstance(v, str) else v for k, v in (attributes or {}).items()}
    if D.lookup(out["dtype"]).is_integer:
        return INTEGER_KERNELS[op_name](dy, x, **attrs).astype(out_dtype)
    if D.lookup(out["dtype"]).is_complex:
        with np.errstate(all="ignore"):
            return COMPLEX_KERNELS[op_name](dy.astype(out_dtype), x.astype(out_dtype), **attrs).astype(out_dtype)
    with np.errstate(all="ignore"):
        result = KERNELS[op_name](dy.astype(F), x.astype(F), **more, **attrs)
        if op.contract.dtypes == "promote" and dy.dtype == x.dtype:
            result = result.astype(dy.dtype).astype(F)
        return result.astype(out_dtype)
