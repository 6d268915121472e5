"""Stand-in declarations of the six reduction ops of issue 19, for the importer and case-file tests.

Each has the real API's name, tensor and attribute names, kinds, roles, own dtype lists and optional
tensors (from the headers in ../shared/seeds-reductions), so foreign suites map onto them as onto the
bundled ops. The reference is a placeholder (zeros): these stand-ins carry cases through import, gen,
emulate and verify (kinds, manifests, null tensors), never golden values. An op already registered (the bundled one, once merged) is left as it is.
"""

from __future__ import annotations

import numpy as np

from contextlib import contextmanager
from typing import Iterator

from aclnn_cli.ops import OPS, OpSpec
from aclnn_cli.ops.base import FLOATS, AttrSpec, Contract, Reference, TensorSpec, products
from aclnn_cli.ops.families import Rows, dim_axis, trailing_axes

ALL = products("950", "A3", "A2", "910", "310P", overrides={"910": ("float32", "float16"), "310P": ("float32", "float16")})


def _zeros(driver: str, outputs: tuple[str, ...], across: tuple[str, ...] = ()):
    """A placeholder reference: zeros of each output's block shape (rows (k, R, A0); across-rows (1, R, A0);
    elementwise: the inputs' broadcast). Goldens of zeros: enough to carry cases through gen, emulate, verify."""
    def reference(t):
        if driver:
            x = np.asarray(t[driver], dtype=np.float64)
            shapes = {o: (1,) + x.shape[1:] if o in across else x.shape for o in outputs}
        else:
            b = np.broadcast(*(np.asarray(v) for k, v in t.items() if isinstance(v, np.ndarray))).shape
            shapes = {o: b for o in outputs}
        out = {o: Reference(np.zeros(s), np.zeros(s), np.zeros(s)) for o, s in shapes.items()}
        return out if len(outputs) > 1 else out[outputs[0]]
    return reference


def _target_fill(shapes, attrs) -> dict:
    """Class indices in [0, C - 1], an eighth equal to ignoreIndex."""
    classes = shapes["self"][-1] if shapes["self"] else 1
    return {"randint": [0, max(classes - 1, 0)], "sprinkle": {"value": int(attrs["ignoreIndex"]), "share": 0.125}}


def _nll_shapes(shape, attrs) -> dict:
    batch, classes = tuple(shape[:-1]), tuple(shape[-1:])
    return {"target": batch, "gradOutput": batch if attrs["reduction"] == 0 and len(shape) == 2 else (),
            "weight": classes, "totalWeight": (1,)}


def _ln_shapes(shape, attrs) -> dict:
    n = len(attrs["normalizedShape"])
    stats = tuple(shape[:len(shape) - n]) + (1,) * n
    norm = tuple(shape[len(shape) - n:])
    return {"mean": stats, "rstd": stats, "weightOptional": norm, "biasOptional": norm,
            "gradWeightOut": norm, "gradBiasOut": norm}


def _rms_shapes(shape, attrs) -> dict:
    return {"rstd": tuple(shape[:-1]), "gamma": tuple(shape[-1:]), "dgammaOut": tuple(shape[-1:])}


def _softmax(name: str, key: str) -> OpSpec:
    return OpSpec(
        name=name, key=key, summary="stand-in", formula="stand-in",
        tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}), TensorSpec("output", "input", {"uniform": [0, 1]}),
                 TensorSpec("out", "output", {"constant": 0})),
        attributes=(AttrSpec("dim", "int", default=-1),),
        products=ALL, dims=(0, 8), empty_ok=True, family=Rows(driver="output", axes=dim_axis("output")),
        reference=_zeros("output", ("out",)), contract=Contract(dtypes="same"))


STANDINS = (
    _softmax("aclnnSoftmaxBackward", "softmax_backward"),
    _softmax("aclnnLogSoftmaxBackward", "log_softmax_backward"),
    OpSpec(
        name="aclnnMseLossBackward", key="mse_loss_backward", summary="stand-in", formula="stand-in",
        tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}), TensorSpec("self", "input", {"uniform": [-4, 4]}),
                 TensorSpec("target", "input", {"uniform": [-4, 4]}), TensorSpec("out", "output", {"constant": 0})),
        attributes=(AttrSpec("reduction", "int", default=1),), signature=("gradOutput", "self", "target", "reduction", "out"),
        products=ALL, dims=(0, 8), empty_ok=True, reference=_zeros("", ("out",)),
        contract=Contract(dtypes="promote", broadcast_on=tuple(ALL))),
    OpSpec(
        name="aclnnNLLLossBackward", key="nll_loss_backward", summary="stand-in", formula="stand-in",
        tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}), TensorSpec("self", "input", {"uniform": [-4, 0]}),
                 TensorSpec("target", "input", _target_fill, dtypes=("int64", "int32", "uint8")),
                 TensorSpec("weight", "input", {"uniform": [-2, 2]}), TensorSpec("totalWeight", "input", {"uniform": [1, 100]}),
                 TensorSpec("out", "output", {"constant": 0})),
        attributes=(AttrSpec("reduction", "int", default=1), AttrSpec("ignoreIndex", "int", default=-100)),
        signature=("gradOutput", "self", "target", "weight", "reduction", "ignoreIndex", "totalWeight", "out"),
        products=ALL, dims=(0, 2), empty_ok=True, reference=_zeros("self", ("out",)), contract=Contract(dtypes="same"),
        family=Rows(driver="self", axes=trailing_axes("self", lambda s, a: 1), per_row=("target", "gradOutput"),
                    shapes=_nll_shapes)),
    OpSpec(
        name="aclnnRmsNormGrad", key="rms_norm_grad", summary="stand-in", formula="stand-in",
        tensors=(TensorSpec("dy", "input", {"normal": [0, 1]}), TensorSpec("x", "input", {"normal": [0, 1]}),
                 TensorSpec("rstd", "input", {"uniform": [0.5, 2]}, dtypes=("float32",)),
                 TensorSpec("gamma", "input", {"uniform": [-2, 2]}, dtypes=FLOATS),
                 TensorSpec("dxOut", "output", {"constant": 0}),
                 TensorSpec("dgammaOut", "output", {"constant": 0}, dtypes=("float32",))),
        products=ALL, dims=(1, 8), empty_ok=True, reference=_zeros("x", ("dxOut", "dgammaOut"), ("dgammaOut",)),
        contract=Contract(dtypes="same"),
        family=Rows(driver="x", axes=trailing_axes("x", lambda s, a: len(s["gamma"])), per_row=("rstd",),
                    across_rows=("dgammaOut",), shapes=_rms_shapes)),
    OpSpec(
        name="aclnnLayerNormBackward", key="layer_norm_backward", summary="stand-in", formula="stand-in",
        tensors=(TensorSpec("gradOut", "input", {"normal": [0, 1]}), TensorSpec("input", "input", {"normal": [0, 1]}),
                 TensorSpec("mean", "input", {"uniform": [-0.25, 0.25]}, dtypes=FLOATS),
                 TensorSpec("rstd", "input", {"uniform": [0.5, 2.0]}, dtypes=FLOATS),
                 TensorSpec("weightOptional", "input", {"uniform": [-2, 2]}, optional=True, dtypes=FLOATS),
                 TensorSpec("biasOptional", "input", {"uniform": [-1, 1]}, read_by_kernel=False, optional=True,
                            dtypes=FLOATS),
                 TensorSpec("gradInputOut", "output", {"constant": 0}, optional=True),
                 TensorSpec("gradWeightOut", "output", {"constant": 0}, optional=True, dtypes=FLOATS),
                 TensorSpec("gradBiasOut", "output", {"constant": 0}, optional=True, dtypes=FLOATS)),
        attributes=(AttrSpec("normalizedShape", "int_list"), AttrSpec("outputMask", "bool_list", default=(True, True, True))),
        signature=("gradOut", "input", "normalizedShape", "mean", "rstd", "weightOptional", "biasOptional", "outputMask",
                   "gradInputOut", "gradWeightOut", "gradBiasOut"),
        products=ALL, dims=(1, 8), empty_ok=True, contract=Contract(dtypes="promote"),
        reference=_zeros("input", ("gradInputOut", "gradWeightOut", "gradBiasOut"), ("gradWeightOut", "gradBiasOut")),
        family=Rows(driver="input", axes=trailing_axes("input", lambda s, a: len(a["normalizedShape"])),
                    per_row=("mean", "rstd"), across_rows=("gradWeightOut", "gradBiasOut"), shapes=_ln_shapes)),
)



@contextmanager
def added() -> Iterator[None]:
    """The stand-ins in the registry for this block (those whose name is free), removed after it."""
    mine = [s for s in STANDINS if s.name not in OPS]
    OPS.update({s.name: s for s in mine})
    try:
        yield
    finally:
        for s in mine:
            OPS.pop(s.name, None)

