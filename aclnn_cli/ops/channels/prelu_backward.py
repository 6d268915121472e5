"""aclnnPreluBackward: the gradients of PReLU, per channel (axis 1 of self) or with one weight for every element.

  gradInput  = gradOutput where self > 0, else weight[c] * gradOutput
  gradWeight[c] = sum over the channel's elements with self <= 0 of gradOutput * self
(hicann/ops-nn activation/p_relu_grad_update/docs/aclnnPreluBackward.md, e5c3fa93). weight holds C = self.shape[1]
values (in any shape of C elements: the op_api flattens it, aclnn_prelu_backward.cpp:196-201) or one value for every
element, whose gradWeight then sums over all of self (the reduce's axes, prelu_grad_reduce_tiling_arch35.cpp,
GetPreluGradReduceAxes). A 1-d self is one channel (aclnn_prelu_backward.cpp:89, 185-190). Both outputs are
rational: the golden of gradWeight is its exact sum (Fractions) rounded once.

The 950 (op_kernel/arch35/prelu_grad_update_dag.h, PReluGradDxCustom and PReluGradDaCustom, in the inputs' dtype T):
  dx = select(self > 0, dy, fl_T(weight * dy));  update = select(self > 0, 0, fl_T(self * dy))
and PReluGradReduce (p_relu_grad_reduce/op_kernel/arch35/prelu_grad_reduce_dag.h) widens update to float32, sums it
over the channel (ReduceSumOp) and casts back to T. So each gradWeight term is rounded once to T (2^-11 in float16,
2^-8 in bfloat16: update is a T tensor, prelu_grad_update.cpp:30), and the terms are added in float32: the
allowance counts both (ops/accumulation.py with `term_unit`). dx's product of two T values is rounded once: it
is the golden itself.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..accumulation import LAMBDA, SECOND_ORDER, sum_allowance
from ..base import Contract, OpSpec, Reference, TensorSpec, products
from ..dyadic import exact_row_sums
from ..families import Channels, broadcast_shape
from ..registry import register
from ..treesum import exact_sum_factor, row_sum64
from .prelu_backward_kernel import BITS, DY, GI, GW, SAMPLES, VARIANTS, W, X, input_bits, kernel, negative, positive

U = 2.0**-53


def _case_values(shapes) -> dict[str, int]:
    """N, the samples a channel's elements come from (its (s, n) order needs it); 1 where the whole self is one
    block (one weight value, or fewer than 2 dims)."""
    x = shapes[X]
    one = len(x) < 2 or math.prod(shapes[W]) == 1
    return {SAMPLES: 1 if one else int(x[0])}


def _orders(terms: np.ndarray, samples: int) -> list[np.ndarray]:
    """A channel's terms (k, M, 1) in the orders its sum may run in: (n, s) as stored and (s, n) (a transposed
    view, read by sum_allowance in C order)."""
    k, m = terms.shape[0], terms.shape[1]
    flat = terms.reshape(k, m)
    n = samples if samples > 1 and m % samples == 0 else 1
    return [flat, flat.reshape(k, n, m // n).transpose(0, 2, 1)] if n > 1 else [flat]


def term_units(bits: int) -> tuple[float, float]:
    """(relative, absolute) bound of one rounding to a dtype of `bits` significand bits: half an ulp, 2^-bits,
    and below its normal range half its smallest subnormal (float16 2^-25; bfloat16 and float32 keep float32's
    exponent range: 2^-150)."""
    return 2.0**-bits, 2.0**-25 if bits == 11 else 2.0**-150


def _weight_grad(terms: np.ndarray, samples: int, bits: int) -> Reference:
    """gradWeight's Reference: terms (k, M, 1) exact in float64 (two 24-bit factors), the sum pairwise (F_M u
    sum|t|); the allowance of a float32 sum of terms each rounded once to the dtype (relative 2^-bits, absolute
    the subnormal step: each term's share of the Hoeffding root, as every rounding's)."""
    m = terms.shape[1]
    mag = row_sum64(np.abs(terms))
    relative, absolute = term_units(bits)
    allowance = sum_allowance(_orders(terms, samples), 1, term_unit=relative).reshape(mag.shape)
    allowance = np.hypot(allowance, LAMBDA * SECOND_ORDER * absolute * math.sqrt(m))
    return Reference(row_sum64(terms), exact_sum_factor(m) * U * mag, mag, allowance)


def _reference(t) -> dict:
    """float64 on whole channels: gradInput exact (a product of two 24-bit values), gradWeight as _weight_grad."""
    dy, x, w = t[DY], t[X], t[W]
    neg = negative(x)
    gi = np.where(neg, w * dy, dy)
    return {GI: Reference(gi, np.zeros_like(gi), np.abs(gi)),
            GW: _weight_grad(np.where(neg, dy * x, 0.0), int(t[SAMPLES]), input_bits(t))}


def _ieee(t) -> dict:
    """Blocks with an inf or NaN input, in the kernel's IEEE order: the product is taken, then the select keeps
    0 where self > 0 (a NaN gradOutput there adds nothing), so a NaN self, or an infinity meeting 0 or its
    opposite, makes the sum NaN."""
    dy, x, w = t[DY], t[X], t[W]
    pos = positive(x)
    return {GI: np.where(pos, dy, w * dy), GW: np.where(pos, 0.0, x * dy).sum(axis=1, keepdims=True)}


def _exact(t) -> dict:
    """The doc's formulas on Fraction object arrays (any k channels)."""
    dy, x, w = t[DY], t[X], t[W]
    neg = x <= 0
    return {GI: np.where(neg, dy * w, dy), GW: np.where(neg, dy * x, 0).sum(axis=1, keepdims=True)}


def _exact_at(t, wanted) -> dict:
    """`_exact` at a few positions (float64 inputs): gradWeight's channel sums exact through ops/dyadic.py (each
    term dy * x exact in float64), gradInput's values exact as they are."""
    dy, x, w = t[DY], t[X], t[W]
    k, m = dy.shape[0], dy.shape[1]
    out = {}
    for name, where in wanted.items():
        where = np.asarray(where, np.int64).reshape(-1)
        if name == GW:
            terms = np.where(negative(x), dy * x, 0.0).reshape(k, m)[where]
            values = exact_row_sums(terms)
        else:
            gi = np.where(negative(x), w * dy, dy).reshape(-1)[where]
            values = [Fraction(float(v)) for v in gi]
        out[name] = np.array(list(values) + [None], dtype=object)[:-1]
    return out


def _shape_rule(d, attrs) -> str | None:
    """CheckShape (aclnn_prelu_backward.cpp:71-111), in its order: gradInput self's shape; weight's elements 1 or
    the channel count C (self's axis 1, 1 for a 1-d self; a 0-d self takes one), gradWeight [C] then, else
    weight's own shape; gradOutput broadcasting to self's shape."""
    x = d[X].shape
    if d[GI].shape != x:
        return f"gradInput shape {list(d[GI].shape)} is not self's {list(x)}"
    count = math.prod(d[W].shape)
    if count != 1:
        if not x:
            return f"weight has {count} elements; a 0-d self takes one"
        channels = x[1] if len(x) > 1 else 1
        if count != channels:
            return f"weight has {count} elements; it takes 1 or self's channel count {channels}"
        if d[GW].shape != (channels,):
            return f"gradWeight shape {list(d[GW].shape)} is not [{channels}] (self's channels)"
    elif d[GW].shape != d[W].shape:
        return f"gradWeight shape {list(d[GW].shape)} is not weight's {list(d[W].shape)}"
    if broadcast_shape(x, d[DY].shape) != x:
        return f"gradOutput shape {list(d[DY].shape)} does not broadcast to self's {list(x)}"
    return None


SPEC = register(OpSpec(
    name="aclnnPreluBackward",
    key="prelu_backward",
    header="aclnnop/aclnn_prelu_backward.h",
    summary="Gradients of PReLU: gradInput per element (gradOutput, or weight * gradOutput where self <= 0), "
            "gradWeight summed over each channel's elements with self <= 0 (over all of self for one weight).",
    formula="gradInput = gradOutput where self > 0, else weight[c] * gradOutput; gradWeight[c] = sum over self <= 0 "
            "of gradOutput * self (c: self's axis 1; one weight: every element)",
    tensors=(
        TensorSpec(DY, "input", {"normal": [0, 1]}),
        TensorSpec(X, "input", {"uniform": [-2.0, 2.0]}),
        TensorSpec(W, "input", {"uniform": [-1.0, 1.0]}),
        TensorSpec(GI, "output", {"constant": 0}),
        TensorSpec(GW, "output", {"constant": 0}),
    ),
    products=products("950", "A3", "A2", "910", overrides={"910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    family=Channels(driver=X, per_row=(W, GW), shared=W, precision=BITS),
    aliases={"x": X, "a": W},
    case_values=_case_values,
    reference=_reference,
    exact=_exact,
    exact_at=_exact_at,
    kernel=kernel,
    ieee=_ieee,
    variants=VARIANTS,
    contract=Contract(dtypes="same", shape_rule=_shape_rule),
    special_values="The doc defines none; the kernel's IEEE order: gradInput is gradOutput where self > 0 (self = +inf "
                   "included), else weight * gradOutput (a NaN self takes this branch; inf * 0 is NaN). gradWeight's "
                   "terms are gradOutput * self where self is not > 0, 0 elsewhere (a NaN gradOutput at self > 0 adds "
                   "nothing): a NaN self, or an infinite gradOutput at self = 0, makes that channel's sum NaN; "
                   "infinite terms of both signs NaN, of one sign that infinity.",
))

CONTRACT_NOTES = """\
aclnnPreluBackward phase one (activation/p_relu_grad_update/op_api/aclnn_prelu_backward.cpp, e5c3fa93), in order:
- 161001: gradOutput, self, weight, gradInput or gradWeight null (CheckNotNull).
- 161002: self's dtype outside {FLOAT, FLOAT16, BF16} on SoCs in [ASCEND910B, ASCEND910E] (A2, A3, 950), {FLOAT,
  FLOAT16} elsewhere (910); gradOutput, weight, gradInput, gradWeight not self's dtype (CheckDtypeValid).
- 161002: any tensor over 8 dims; gradInput not self's shape; weight's elements neither 1 nor C (self's axis 1, 1 for
  a 1-d self; a 0-d self with more than one); gradWeight not [C] (C elements) or not weight's shape (one element);
  gradOutput not broadcasting to self's shape (CheckShape).
- Empty gradOutput, self or weight: success, nothing launched, nothing written (aclnn_prelu_backward.cpp:168-173).
  An empty self with C > 0 leaves gradWeight's C values unwritten (the harness's canary), not the golden's zero sums:
  the bundled empty case has C = 0, every output empty.
- Not modelled: a gradOutput that broadcasts to self (phase one accepts it; the channels family reads gradOutput
  in self's shape, so such a case is refused when it loads, naming the shape); a float16 product past 65,504
  (inf on the device, a finite golden).
"""
