"""One foreign case in our YAML's terms: its tensors (TensorIn) and the case entry built from them.

For an elementwise op the case-level shape is the output's (else the inputs' broadcast); for a rows op it is
the driver's, and a tensor whose shape is not the one the family gives it from the driver's gets an override.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Sequence

from ...ops import OpSpec
from ...ops.contract import broadcast_shape
from ..spec import DEFAULT_PRODUCT
from .common import OUTPUT_DTYPES
from .ranges import spread


@dataclass
class TensorIn:
    """One tensor of a foreign case, in our terms (dtype name, shape, generator, layout, null)."""

    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    fill: dict | None = None
    layout: dict | None = None
    null: bool = False
    exact: bool = False  # fill holds the literal data (never spread)


def case_entry(op: OpSpec, name: str, seed: int, tensors: dict[str, TensorIn], products: Sequence[str] = (),
               attributes: dict | None = None) -> dict:
    """One case of our YAML: case-level dtype and shape are the output's (a rows op: the driver's; else the
    first input's dtype and the inputs' broadcast shape); a tensor differing from them gets a `tensors:`
    override. attributes: the API's values by name (lists as lists)."""
    tensors = _typed_outputs(op, tensors)
    for n in op.derived:  # (a suite's shape and values for an input the op derives are stand-ins its executor
        if n in tensors and not tensors[n].null:  # replaces by the forward's, as ops-nn's MaxPool ATK executor does:
            tensors[n] = TensorIn(tensors[n].dtype)  # the dtype kept, the rest derived)
    ins = [t.name for t in op.inputs]
    out_name = op.family.case_tensor(op)
    out = tensors.get(out_name, TensorIn())
    first = next((tensors[n] for n in ins if n in tensors and tensors[n].dtype and not _own(op, n)), TensorIn())
    in_shapes = [tensors[n].shape for n in ins if n in tensors and tensors[n].shape is not None]
    bshape = broadcast_shape(*in_shapes) if in_shapes and op.family.inputs_broadcast else None
    dtype = out.dtype or first.dtype
    shape = out.shape if out.shape is not None else (bshape if bshape is not None else first.shape)
    entry: dict[str, Any] = {"name": name}
    if dtype:
        entry["dtype"] = dtype
    if shape is not None:
        entry["shape"] = list(shape)
    if not products and DEFAULT_PRODUCT not in op.products:  # (a suite naming no SoC, of an op off A2: LayerNormGrad's
        products = tuple(op.products)[:1]                     # OpDef configures the 950 only)
    if products:
        entry["product"] = list(products) if len(products) > 1 else products[0]
    entry["seed"] = seed
    fills = spread({n: t.fill for n, t in tensors.items() if t.fill is not None and not t.exact},
                   [n for n in ins if n in tensors])
    inputs = {}
    for spec in op.inputs:
        t = tensors.get(spec.name)
        if t is not None and t.null:
            continue  # (a null tensor holds nothing: the op's default fill stands)
        if t is None or t.fill is None:  # not in the foreign case (LogSigmoid's buffer): the op's default
            if not callable(spec.default_fill):  # (a callable one is the op's per case: left out)
                inputs[spec.name] = copy.deepcopy(dict(spec.default_fill))  # (own lists: no YAML anchors)
        else:
            inputs[spec.name] = t.fill if t.exact else fills[spec.name]
    entry["inputs"] = inputs
    if attributes:
        entry["attributes"] = dict(attributes)
    shaped = not op.family.inputs_broadcast  # (the family shapes every tensor from the case tensor's shape)
    expected = _family_shapes(op, shape, attributes or {}) if shaped and shape is not None else {}
    overrides: dict[str, dict] = {}
    for n, t in tensors.items():
        o: dict[str, Any] = {}
        if shaped:
            expected_shape = expected.get(n, shape)
        else:
            expected_shape = (bshape if bshape is not None else shape) if n == op.output.name else shape
        if t.shape is not None and tuple(t.shape) != tuple(expected_shape or ()):
            o["shape"] = list(t.shape)
        if t.dtype and t.dtype != dtype:
            o["dtype"] = t.dtype
        if t.layout:
            o["layout"] = t.layout
        if t.null:
            o["nullptr"] = True
        if o:
            overrides[n] = o
    if overrides:
        entry["tensors"] = overrides
    return entry


def _typed_outputs(op: OpSpec, tensors: dict[str, TensorIn]) -> dict[str, TensorIn]:
    """An output the case does not type takes its source tensor's dtype where common.OUTPUT_DTYPES says so
    (BatchNormBackward's gradWeight and gradBias: weight's), when that tensor is given with a dtype."""
    out = dict(tensors)
    for name, source in OUTPUT_DTYPES.get(op.name, {}).items():
        src, t = tensors.get(source), tensors.get(name, TensorIn())
        if src is not None and src.dtype and not src.null and t.dtype is None and not t.null:
            out[name] = TensorIn(src.dtype, t.shape, t.fill, t.layout, t.null, t.exact)
    return out


def _own(op: OpSpec, name: str) -> bool:
    """A tensor with its own dtype list (NLL's target, fp32 statistics): it does not set the case's dtype."""
    return next(t for t in op.tensors if t.name == name).dtypes is not None


def _family_shapes(op: OpSpec, shape: Sequence[int], attributes: dict) -> dict:
    """The shapes the op's family gives every tensor from the case tensor's ({} where it cannot: then every
    tensor whose shape differs from it gets an override, which says the same)."""
    values = {a.name: a.default for a in op.attributes}
    values.update({k: tuple(v) if isinstance(v, list) else v for k, v in attributes.items()})
    try:
        return dict(op.family.case_shapes(op, tuple(shape), values, {}))
    except Exception:  # (the op's own functions, on a foreign case validation will judge)
        return {}
