"""Helpers of tests/test_gate_edges.py: cases of every op and dtype, broken dumps, tolerance sets at the
edges of each standard's accepted ranges, and what makes a case of ordinary magnitude (tolerances.py)."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.casedir import manifest as M
from aclnn_cli.judge.comparison import tolerance_dtype
from aclnn_cli.pipeline.stages import geometry, own_geometry
from aclnn_cli.standards.rules import STANDARDS, Standard
from aclnn_cli.ops import OPS

DTYPES = ("float16", "bfloat16", "float32")
BROKEN = ("sign", "zero")
TUNABLE = [name for name, s in STANDARDS.items() if s.defaults(D.FLOAT32)]  # bitwise has no tolerance


# Ops whose defaults do not give a case of ordinary magnitude (tolerances.py) on these small shapes:
# - MseLoss's, L1Loss's, SoftMarginLoss's, BinaryCrossEntropy's, SmoothL1Loss's, BinaryCrossEntropyWithLogits's and
#   KlDiv's means divide a 128-element gradient by 128 (every |golden| under 1/8): reduction none.
# - Rows ops take rows of 2: NLL's gradient is nonzero at one class per row, so two classes make half the
#   elements informative (with 32 classes a case is 1/32 informative: not ordinary); its mean divides by
#   the total weight (every |golden| about 1/rows): reduction none.
# - Adaptive pooling's gradOutput has a size of its own: `tensors` gives it from the case's dims.
# - An output summed over every row (gradWeight, gradBias, dgamma) of random-signed terms cancels: its term
#   scale is ~sqrt(rows) times |golden|, not ordinary. Positive gradients and a positive x̂ make it ordinary.
# The property (no accepted value passes a sign flip or zeros) is claimed for ordinary cases only.
ORDINARY = {
    "mse_loss_backward": {"attributes": {"reduction": 0}},
    "l1_loss_backward": {"attributes": {"reduction": 0}},
    "soft_margin_loss_backward": {"attributes": {"reduction": 0}},
    "binary_cross_entropy_backward": {"attributes": {"reduction": 0}},
    "smooth_l1_loss_backward": {"attributes": {"reduction": 0}},
    "binary_cross_entropy_with_logits_backward": {"attributes": {"reduction": 0}},
    "kl_div_backward": {"attributes": {"reduction": 0}},
    "nll_loss_backward": {"attributes": {"reduction": 0}},
    # (samples of 2 classes at 2 x 2 positions: as the 1-D op's rows of 2, half the elements informative)
    "nll_loss2d_backward": {"attributes": {"reduction": 0}, "dims": lambda shape: [shape // 8, 2, 2, 2]},
    "layer_norm_backward": {"inputs": {"gradOut": {"uniform": [0.5, 1.5]}, "input": {"uniform": [0.5, 2.0]}}},
    "rms_norm_grad": {"inputs": {"dy": {"uniform": [0.5, 1.5]}, "x": {"uniform": [0.5, 2.0]}}},
    "layer_norm_grad": {"inputs": {"dy": {"uniform": [0.5, 1.5]}, "x": {"uniform": [0.5, 2.0]}}, "product": "950"},
    "batch_norm_backward": {"inputs": {"gradOut": {"uniform": [0.5, 1.5]}, "input": {"uniform": [0.5, 2.0]}}},
    # (sumDy and sumDyXmu 0: gradInput = gradOut invstd weight, its terms' scale itself)
    "batch_norm_elemt_backward": {"inputs": {"gradOut": {"uniform": [0.5, 1.5]}, "sumDy": {"constant": 0.0},
                                             "sumDyXmu": {"constant": 0.0}}},
    # (sums of one sign, input - mean positive: sumDyXmu near its terms' scale sum|dy x| + |mean| sum|dy|)
    "batch_norm_reduce_backward": {"inputs": {"gradOut": {"uniform": [0.5, 1.5]}, "input": {"uniform": [0.5, 2.0]},
                                              "mean": {"uniform": [-0.05, 0.05]}}},
    # (every element on the weight branch: gradWeight sums terms of one sign, gradInput is weight x gradOutput)
    "prelu_backward": {"inputs": {"gradOutput": {"uniform": [0.5, 1.5]}, "self": {"uniform": [-2.0, -0.5]},
                                  "weight": {"uniform": [0.5, 1.5]}}},
    # (GroupNorm's N, C, HxW, group are the API's arguments, from the case's dims: [rows, 2] as rows samples of
    # 2 channels in 1 group)
    "group_norm_backward": {"attributes": lambda dims: {"N": dims[0], "C": dims[1], "HxW": 1, "group": 1},
                            "inputs": {"gradOut": {"uniform": [0.5, 1.5]}, "input": {"uniform": [0.5, 2.0]}}},
    # (a batch of 2 x 2 matrices, K = 2: dot products of random-signed terms cancel as row sums do)
    "batch_mat_mul": {"dims": lambda shape: [shape // 4, 2, 2],
                      "inputs": {"self": {"uniform": [0.5, 1.5]}, "mat2": {"uniform": [0.5, 2.0]}}},
    "matmul": {"dims": lambda shape: [shape // 4, 2, 2],
               "inputs": {"self": {"uniform": [0.5, 1.5]}, "mat2": {"uniform": [0.5, 2.0]}}},
    # (samples of one 4 x 4 channel, a 3 x 3 kernel padded by 1: a few terms per element, every input positive)
    "convolution_backward": {"dims": lambda shape: [shape // 16, 1, 4, 4],
                             "attributes": {"stride": [1, 1], "padding": [1, 1], "dilation": [1, 1],
                                            "outputPadding": [0, 0]},
                             "inputs": {"gradOutput": {"uniform": [0.5, 1.5]}, "input": {"uniform": [0.5, 2.0]},
                                        "weight": {"uniform": [0.5, 2.0]}}},
    # (time steps of 4 samples of one channel, a 3-tap kernel padded by 1: a few terms per element, every input
    # positive)
    "conv_tbc_backward": {"dims": lambda shape: [shape // 4, 4, 1],
                          "attributes": {"pad": 1},
                          "inputs": {"self": {"uniform": [0.5, 1.5]}, "input": {"uniform": [0.5, 2.0]},
                                     "weight": {"uniform": [0.5, 2.0]}}},
    # (planes of 4 x 4 pooled by 2 x 2 windows side by side: one term per element, positive gradients)
    "avg_pool2d_backward": {"dims": lambda shape: [shape // 16, 4, 4], "attributes": {"kernelSize": [2], "padding": [0]},
                            "inputs": {"gradOutput": {"uniform": [0.5, 1.5]}}},
    # (volumes of 2 x 4 x 4 pooled by 2 x 2 x 2 windows side by side: one term per element)
    "avg_pool3d_backward": {"dims": lambda shape: [shape // 32, 2, 4, 4],
                            "attributes": {"kernelSize": [2], "stride": [], "padding": [0]},
                            "inputs": {"gradOutput": {"uniform": [0.5, 1.5]}}},
    # (planes of 4 x 4 pooled adaptively to 2 x 2: windows of 2 x 2 side by side, one term per element)
    "adaptive_avg_pool2d_backward": {"dims": lambda shape: [shape // 16, 4, 4],
                                     "tensors": lambda dims: {"gradOutput": {"shape": [dims[0], 2, 2]}},
                                     "inputs": {"gradOutput": {"uniform": [0.5, 1.5]}}},
    # (volumes of 2 x 4 x 4 pooled adaptively to 1 x 2 x 2: one term per element)
    "adaptive_avg_pool3d_backward": {"dims": lambda shape: [shape // 32, 2, 4, 4],
                                     "tensors": lambda dims: {"gradOutput": {"shape": [dims[0], 1, 2, 2]}},
                                     "inputs": {"gradOutput": {"uniform": [0.5, 1.5]}}},
    # (the same windows, each gradient to its window's maximum: one term per element; the 950, whose kernel takes
    # every dtype: A2's and A3's take float32 only)
    "max_pool2d_with_indices_backward": {"dims": lambda shape: [shape // 16, 4, 4],
                                         "attributes": {"kernelSize": [2], "padding": [0]},
                                         "inputs": {"gradOutput": {"uniform": [0.5, 1.5]}}, "product": "950"},
    # (the same on A2, the mask's op: every dtype there)
    "max_pool2d_with_mask_backward": {"dims": lambda shape: [shape // 16, 4, 4],
                                      "attributes": {"kernelSize": [2], "padding": [0]},
                                      "inputs": {"gradOutput": {"uniform": [0.5, 1.5]}}},
    # (volumes of 2 x 4 x 4 pooled by 1 x 2 x 2 windows side by side, each gradient to its window's maximum: a term
    # for a quarter of the elements, as the 2-D op's, where 2 x 2 x 2 windows would leave an eighth, below
    # ORDINARY_SHARE)
    "max_pool3d_with_argmax_backward": {"dims": lambda shape: [shape // 32, 2, 4, 4],
                                        "attributes": {"kernelSize": [1, 2, 2], "stride": [], "padding": [0]},
                                        "inputs": {"gradOutput": {"uniform": [0.5, 1.5]}}},
    # (ops of the 950 alone: OpDef-generated APIs of graph-only ops; L2NormalizeGrad has no bfloat16, op_dtypes)
    "softmax_grad_ext": {"product": "950"},
    "l2_normalize_grad": {"product": "950", "attributes": {"dimOptional": [1]}},
    # (InstanceNormGrad's [rows, 2] is rows samples of 2 channels, one position each: pd_x = -rstd x̂^2 dy gamma, near
    # its terms' scale rstd |a| (2 + x̂^2) where x̂ is large (x 4 to 16 variances' roots from a zero mean); pd_gamma,
    # pd_beta sum rows terms of one sign)
    "instance_norm_grad": {"inputs": {"dy": {"uniform": [0.5, 1.5]}, "x": {"uniform": [2.0, 4.0]},
                                      "variance": {"uniform": [0.25, 0.5]}, "mean": {"constant": 0.0},
                                      "gamma": {"uniform": [0.5, 2.0]}}, "product": "950"},
    # (the 950 alone, MishGrad's OpDef-generated API; t and x where the two terms add: the golden at least half its
    # terms' scale)
    "mish_grad": {"product": "950",
                  "inputs": {"tanhxOptional": {"uniform": [0.25, 0.75]}, "x": {"uniform": [0.25, 1.0]}}},
    # (the 950 alone; runs of the last axis, 8 long: repeats' default, one run length per position, split at random)
    "repeat_interleave_grad": {"product": "950", "dims": lambda shape: [shape // 8, 8]},
}
ROW_LENGTH = 2


def case_shape_attributes(op, shape: int) -> tuple[list[int], dict]:
    """A small case of `op` of about `shape` elements: its shape and attributes (the first oracle set, an
    int list without a default given the trailing axis, and ORDINARY's)."""
    attrs = dict(op.oracle_attributes[0]) if op.attributes else {}
    dims = [shape // ROW_LENGTH, ROW_LENGTH] if not op.family.element_local else [shape]
    if "dims" in ORDINARY.get(op.key, {}):
        dims = ORDINARY[op.key]["dims"](shape)
    for a in op.attributes:
        if a.default is None and a.kind == "int_list" and a.name not in attrs:
            attrs[a.name] = [dims[-1]]
    more = ORDINARY.get(op.key, {}).get("attributes", {})
    attrs.update(more(dims) if callable(more) else more)
    return dims, attrs


def suite_yaml(op, names=BROKEN, shape: int = 128, extra: str = "", dtypes=DTYPES) -> str:
    """Small cases of `op` in each dtype (one per name), the op's own fills, of ordinary magnitude."""
    dims, attrs = case_shape_attributes(op, shape)
    more = (f", attributes: {json.dumps(attrs)}" if attrs else "") + (
        f", inputs: {json.dumps(ORDINARY[op.key]['inputs'])}" if "inputs" in ORDINARY.get(op.key, {}) else "") + (
        f", product: \"{ORDINARY[op.key]['product']}\"" if "product" in ORDINARY.get(op.key, {}) else "") + (
        f", tensors: {json.dumps(ORDINARY[op.key]['tensors'](dims))}" if "tensors" in ORDINARY.get(op.key, {}) else "")
    lines = [f"op: {op.name}", "cases:"]
    for name in names:
        for d in dtypes:
            lines.append(f"  - {{name: {name}-{d}, dtype: {d}, shape: {dims}, seed: 7{more}{extra}}}")
    return "\n".join(lines) + "\n"


def case_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in out.glob("*/case.json"))


def write_broken(case: Path, broken: str) -> None:
    """Every judged output's dump as its golden with every sign flipped, or all zeros."""
    m = M.load(case)
    for out in m.judged:
        g = np.fromfile(out.golden, dtype=out.dtype.np_dtype)
        (-g if broken == "sign" else np.zeros_like(g)).tofile(out.dump)


def inputs_f64(m: M.CaseManifest) -> dict[str, np.ndarray]:
    """The inputs of a contiguous case as float64 (with the op's attributes)."""
    ins = {t.name: np.fromfile(t.file, dtype=t.dtype.np_dtype).astype(np.float64) for t in m.inputs}
    return {**ins, **m.attribute_values}


def _rows_reference(m: M.CaseManifest, out: M.TensorEntry) -> tuple[np.ndarray, np.ndarray]:
    """(term scale, device-edge mask) of a Rows op's output, from the op's reference on every block at once."""
    from aclnn_cli.golden.rows import reference_blocks, widened
    from independent_rows import case_blocks
    blocks = case_blocks(m)
    attrs = m.attribute_values
    with np.errstate(all="ignore"):
        scale = np.asarray(reference_blocks(m.op, blocks, attrs)[out.name].scale).reshape(-1)
        edges = m.op.by_output(m.op.edge({**widened(blocks), **attrs})) if m.op.edge is not None else {}
    where = np.asarray(edges[out.name][0], bool).reshape(-1) if out.name in edges else np.zeros(scale.size, bool)
    geo = geometry(m)
    geo = own_geometry(m, out.name, geo) or geo  # (an output cut from its own shape: GroupNorm's per channel)
    if out.name not in m.op.family.per_row and out.name not in m.op.family.across_rows and not geo.contiguous:
        order = geo.positions(0, geo.a1)  # (block order -> the output's logical order: channels)
        scale, where = scale[np.argsort(order)], where[np.argsort(order)]
    return scale, where


def informative(m: M.CaseManifest, out: M.TensorEntry | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(informative mask, |golden|) of an output (the first by default): finite golden, normal in the judged
    dtype, at least 1/RELIEF_SCALE of its term scale, and not where the device's documented edge result differs."""
    from aclnn_cli.standards.tolerances import RELIEF_SCALE
    out = out or m.output
    g = np.fromfile(out.golden, dtype=out.dtype.np_dtype).astype(np.float64)
    if not m.op.family.element_local:
        scale, where = _rows_reference(m, out)
    else:
        ins = inputs_f64(m)
        scale = m.op.golden_f64(ins).scale
        where = m.op.device_edges(ins)[0]
    floor = tolerance_dtype(m, out)[1]
    with np.errstate(invalid="ignore"):
        mask = np.isfinite(g) & (np.abs(g) >= floor) & (scale <= RELIEF_SCALE * np.abs(g)) & ~np.asarray(where)
    return mask, np.abs(g)


def assert_ordinary(m: M.CaseManifest) -> None:
    """Every judged output meets the definition the ranges are derived for (tolerances.py)."""
    from aclnn_cli.standards.tolerances import ORDINARY_MAGNITUDE, ORDINARY_SHARE
    for out in m.judged:
        mask, mag = informative(m, out)
        assert mask.mean() >= ORDINARY_SHARE, (m.case_id, out.name, mask.mean())
        assert (mag[mask] >= ORDINARY_MAGNITUDE).any(), (m.case_id, out.name)


@dataclass(frozen=True)
class Edge:
    label: str
    values: dict[str, float]


def _extremes(std: Standard, key: str, dtype, p: dict[str, float]) -> tuple[float, float]:
    """A key's smallest and largest accepted values with the other keys as in p (joint bounds included)."""
    lo, hi = std.ranges[key].extremes(dtype)
    for j in std.joints:
        if key in j.keys:
            hi = min(hi, j.top(key, p))
    return lo, hi


def edge_sets(std: Standard, dtype) -> list[Edge]:
    """Each key alone at its min and max; every corner (each key at its min or max, together; with a joint
    bound the keys earlier in order take the room, so all-max is also taken in reverse order); and each joint
    bound exactly met with the others at their max."""
    base = std.defaults(dtype)
    keys = sorted(base)
    sets = []
    for k in keys:
        lo, hi = _extremes(std, k, dtype, base)
        sets += [Edge(f"{k} min", {k: lo}), Edge(f"{k} max", {k: hi})]
    corners = [(f"corner {''.join('+' if side else '-' for side in sides)}", keys, sides)
               for sides in itertools.product((0, 1), repeat=len(keys))]  # every key at one end, together
    for label, order, sides in corners + [("all max, reversed", keys[::-1], (1,) * len(keys))]:
        p = dict(base)
        for k, side in zip(order, sides):
            p[k] = _extremes(std, k, dtype, p)[side]
        sets.append(Edge(label, {k: p[k] for k in keys}))
    for j in std.joints:
        for k in j.keys:
            p = dict(base)
            for other in j.keys:
                if other != k:
                    p[other] = std.ranges[other].extremes(dtype)[1]
            p[k] = j.top(k, p)
            if std.ranges[k].contains(p[k], dtype):
                sets.append(Edge(f"joint {'*'.join(j.keys)} met, {k} last", {x: p[x] for x in j.keys}))
    return sets


def distinct_edges(std: Standard, dtype) -> list[Edge]:
    """edge_sets without its repeats, the first label kept (all max in reverse order where no joint bound makes it
    another corner; allclose's joint bound met with atol last, which is its all-max corner): the same values judge
    the same case alike."""
    first: dict[tuple, Edge] = {}
    for edge in edge_sets(std, dtype):
        first.setdefault(tuple(sorted(edge.values.items())), edge)
    return list(first.values())


def outside_values(std: Standard, dtype) -> list[tuple[str, float, str]]:
    """(key, value, why) just outside each key's range, and just past each joint bound."""
    out = []
    for k, rng in std.ranges.items():
        if k not in std.defaults(dtype):
            continue
        lo, hi = rng.bounds(dtype)
        out.append((k, math.nextafter(lo, -math.inf) if rng.closed_lo else lo, "below"))
        out.append((k, hi if rng.open_hi else math.nextafter(hi, math.inf), "above"))
    base = std.defaults(dtype)
    for j in std.joints:
        for k in j.keys:
            top = j.top(k, base)
            if std.ranges[k].contains(top, dtype):
                out.append((k, math.nextafter(top, math.inf), "joint"))
    return out


def op_dtypes(op) -> tuple[str, ...]:
    """The DTYPES `op` takes on the product its cases here run on (ORDINARY's, else A2)."""
    return tuple(d for d in DTYPES if d in op.products[ORDINARY.get(op.key, {}).get("product", "A2")])


def every_op():
    """The bundled ops (whatever user ops another test file loaded into this process are left out: the set
    must not depend on which files a pytest worker ran first)."""
    from aclnn_cli.ops.registry import BUNDLED
    return [OPS[name] for name in sorted(BUNDLED)]
