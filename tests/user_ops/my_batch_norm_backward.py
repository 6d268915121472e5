"""A user op of the Channels family, written from ops-nn's doc (norm/batch_norm_grad_v3/docs/aclnnBatchNormBackward.md)
for an input of any rank from 2 to 8 (N, C, *spatial). Per channel c, over its M = N * S elements, g = weight[c]:

  training:   h = (x - saveMean) * saveInvstd
              gradInput = g * saveInvstd * (dy - sum(dy) / M - h * sum(dy * h) / M)
              gradWeight = sum(dy * h),  gradBias = sum(dy)
  inference:  invstd = 1 / sqrt(runningVar + eps)
              gradInput = dy * g * invstd,  gradWeight = sum(dy * (x - runningMean) * invstd),  gradBias = sum(dy)

A null weight is ones, a null mean zeros, a null variance or invstd ones. eps is a C double, outputMask an
aclBoolArray (a false entry: that output may be null; it is computed and dropped). aclnnBatchNormBackward is bundled,
so this one is named aclnnMyBatchNormBackward (a user op cannot take a bundled op's name).
"""

from fractions import Fraction

import numpy as np

from aclnn_cli.ops import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, register
from aclnn_cli.ops import exact as X
from aclnn_cli.ops.accumulation import sum_allowance
from aclnn_cli.ops.families import Channels
from aclnn_cli.ops.treesum import exact_sum_factor, row_sum64, tree_sum

U = 2.0**-53
FILL = {"weight": 1, "runningMean": 0, "runningVar": 1, "saveMean": 0, "saveInvstd": 1}
PER_CHANNEL = (*FILL, "gradWeight", "gradBias")
FORMATS = {2: "NC", 3: "NCL", 4: "NCHW", 5: "NCDHW"}


def _per_channel(t):
    """weight, mean and invstd of the mode (null ones filled): (k, 1, 1) arrays or numbers."""
    mean, spread = ("saveMean", "saveInvstd") if t["training"] else ("runningMean", "runningVar")
    return t.get("weight", FILL["weight"]), t.get(mean, FILL[mean]), t.get(spread, FILL[spread])


def _channel_sum(terms, units, roundings):
    """A sum over each channel (k, M, 1) -> (k, 1, 1): the terms each within `units` u of the exact ones, numpy's
    pairwise sum, and the allowance of a float32 kernel whose terms take `roundings` roundings."""
    k, m = terms.shape[0], terms.shape[1]
    mag = row_sum64(np.abs(terms))
    return Reference(row_sum64(terms), (exact_sum_factor(m) + units) * U * mag + 2.0**-1000, mag,
                     allowance=sum_allowance([terms.reshape(k, m)], roundings).reshape(k, 1, 1))


def reference(t):
    """float64 on whole channels: gradInput (k, M, 1), gradWeight and gradBias (k, 1, 1)."""
    dy, x = t["gradOut"], t["input"]
    g, mean, spread = _per_channel(t)
    m = dy.shape[1]
    gb = _channel_sum(dy, 0, 0)
    if t["training"]:
        h = (x - mean) * spread                                        # within 2.01 u of h
        gw = _channel_sum(dy * h, 3.02, 3)
        scale = np.abs(g * spread) * (np.abs(dy) + (gb.scale + np.abs(h) * gw.scale) / m)
        value = g * spread * (dy - gb.value / m - h * (gw.value / m))
        bound = (exact_sum_factor(m) + 12) * U * scale + 2.0**-1000     # the sums' errors and 8 roundings after them
        return {"gradInput": Reference(value, bound, scale), "gradWeight": gw, "gradBias": gb}
    inv = 1 / np.sqrt(spread + t["eps"])                               # within 3.5 u
    value = dy * g * inv
    return {"gradInput": Reference(value, 5 * U * np.abs(value) + 2.0**-1000, np.abs(value)),
            "gradWeight": _channel_sum(dy * (x - mean) * inv, 6.5, 4), "gradBias": gb}


def _inv_sqrt(q):
    """1 / sqrt(q) to 60 digits, as a Fraction (exact where it is a power of two: the only rounding ties)."""
    return np.array([X.evaluate(lambda v=v: 1 / X.dec(v).sqrt()) for v in np.ravel(q)], dtype=object)


def exact(t):
    """The doc's formulas on Fraction arrays, any k whole channels."""
    dy, x = t["gradOut"], t["input"]
    g, mean, spread = _per_channel(t)
    m = dy.shape[1]
    gb = dy.sum(axis=1, keepdims=True)
    if t["training"]:
        h = (x - mean) * spread
        gw = (dy * h).sum(axis=1, keepdims=True)
        return {"gradInput": g * spread * (dy - gb / m - h * gw / m), "gradWeight": gw, "gradBias": gb}
    q = np.broadcast_to(np.asarray(spread + t["eps"], dtype=object), (dy.shape[0], 1, 1))
    inv = np.array([Fraction(v) for v in _inv_sqrt(q)], dtype=object).reshape(q.shape)
    return {"gradInput": dy * g * inv, "gradWeight": (dy * (x - mean) * inv).sum(axis=1, keepdims=True),
            "gradBias": gb}


def kernel(t, project=True):
    """float32, each channel's sums in the 950's tree order (treesum.tree_sum)."""
    dy, x = t["gradOut"], t["input"]
    f = dy.dtype.type
    g, mean, spread = (f(v) if np.ndim(v) == 0 else v for v in _per_channel(t))
    gb = tree_sum(dy, axis=1)
    if t["training"]:
        h = (x - mean) * spread
        gw = tree_sum(dy * h, axis=1)
        c = ((h * gw if project else f(0)) + gb) * f(1 / dy.shape[1])
        return {"gradInput": (g * spread) * (dy - c), "gradWeight": gw, "gradBias": gb}
    inv = (1 / np.sqrt(np.asarray(spread, np.float64) + t["eps"])).astype(f)
    return {"gradInput": (dy * g) * inv, "gradWeight": tree_sum(dy * ((x - mean) * inv), axis=1), "gradBias": gb}


@defect
def _no_projection(t):
    """Defect: training's gradInput without the h * mean(dy * h) term."""
    return kernel(t, project=False)


def _mask_rule(descs, attrs):
    """161002 here: outputMask not 3 values, or a requested output null; input not 2-8-d (`dims` holds for every
    tensor: the (C,) ones are 1-d), gradOut not input's shape."""
    mask = attrs["outputMask"]
    if len(mask) != 3:
        return f"outputMask has {len(mask)} values, not 3"
    for on, name in zip(mask, ("gradInput", "gradWeight", "gradBias")):
        if on and descs[name].null:
            return f"{name} is null while outputMask asks for it"
    if len(descs["input"].shape) < 2:
        return "input has fewer than 2 dims (N, C, ...)"
    return None if descs["gradOut"].shape == descs["input"].shape else "gradOut's shape is not input's"


def _tensor(name, role, fill, optional=False):
    return TensorSpec(name, role, fill, optional=optional,
                      formats=FORMATS if name in ("gradOut", "input", "gradInput") else {})


SPEC = register(OpSpec(
    name="aclnnMyBatchNormBackward", key="my_batch_norm_backward",
    summary="Gradients of batch norm over axis 1 of an (N, C, ...) input, training or inference.",
    formula="training: h = (x - saveMean) * saveInvstd; gradInput = w * saveInvstd * (dy - mean(dy) - h * mean(dy * h)); "
            "inference: gradInput = dy * w / sqrt(runningVar + eps); gradWeight = sum(dy * h); gradBias = sum(dy)",
    tensors=(_tensor("gradOut", "input", {"normal": [0, 1]}), _tensor("input", "input", {"normal": [0, 1]}),
             _tensor("weight", "input", {"uniform": [-2, 2]}, True),
             _tensor("runningMean", "input", {"uniform": [-0.25, 0.25]}, True),
             _tensor("runningVar", "input", {"uniform": [0.25, 4]}, True),
             _tensor("saveMean", "input", {"uniform": [-0.25, 0.25]}, True),
             _tensor("saveInvstd", "input", {"uniform": [0.5, 2]}, True),
             *(_tensor(n, "output", {"constant": 0}, True) for n in ("gradInput", "gradWeight", "gradBias"))),
    attributes=(AttrSpec("training", "bool", default=True), AttrSpec("eps", "double", default=1e-5),
                AttrSpec("outputMask", "bool_list", default=(True, True, True))),
    signature=("gradOut", "input", *FILL, "training", "eps", "outputMask", "gradInput", "gradWeight", "gradBias"),
    products={p: ("float32", "float16", "bfloat16") for p in ("950", "A3", "A2")},
    dims=(1, 8), empty_ok=False,
    family=Channels(driver="input", per_row=PER_CHANNEL),
    reference=reference, exact=exact, kernel=kernel,
    contract=Contract(shape_rule=_mask_rule),
    variants={"my-bn-no-projection": _no_projection},
))
