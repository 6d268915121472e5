"""The six reduction/norm/loss ops of issue 19, BatchNormBackward (channels), SwiGluGrad, GeGluBackward and
GeGluV3Backward (split) and GroupNormBackward (groups), as the harness sees them: the registered declaration when
it exists, else a stand-in holding only what the harness reads (name,
header, the API's arguments in order and their kinds). The stand-ins are written from the public prototypes (ops-nn
headers, RmsNormGrad's and SwiGluGrad's docs), independently of the declarations, so a test comparing either with
the headers checks something.
"""

from __future__ import annotations

from aclnn_cli.ops import OPS
from aclnn_cli.ops.base import AttrSpec, OpSpec, TensorSpec


def _unused(_):
    raise AssertionError("a stand-in declaration has no math: it only feeds the harness")


def _standin(name: str, key: str, header: str, inputs: tuple[str, ...], outputs: tuple[str, ...],
             attributes: tuple[AttrSpec, ...], signature: tuple[str, ...], optional: tuple[str, ...] = ()) -> OpSpec:
    tensors = tuple(TensorSpec(n, "input", {"constant": 0}, optional=n in optional) for n in inputs) + tuple(
        TensorSpec(n, "output", {"constant": 0}, optional=n in optional) for n in outputs)
    return OpSpec(name=name, key=key, summary="stand-in", formula="stand-in", tensors=tensors,
                  products={"A2": ("float32",)}, dims=(0, 8), empty_ok=True, reference=_unused, header=header,
                  attributes=attributes, signature=signature)


STANDINS = {op.name: op for op in (
    _standin("aclnnSoftmaxBackward", "softmax_backward", "aclnnop/aclnn_softmax_backward.h",
             ("gradOutput", "output"), ("out",), (AttrSpec("dim", "int", default=-1),),
             ("gradOutput", "output", "dim", "out")),
    _standin("aclnnLogSoftmaxBackward", "log_softmax_backward", "aclnnop/aclnn_logsoftmax_backward.h",
             ("gradOutput", "output"), ("out",), (AttrSpec("dim", "int", default=-1),),
             ("gradOutput", "output", "dim", "out")),
    _standin("aclnnMseLossBackward", "mse_loss_backward", "aclnnop/aclnn_mse_loss_backward.h",
             ("gradOutput", "self", "target"), ("out",), (AttrSpec("reduction", "int", default=1),),
             ("gradOutput", "self", "target", "reduction", "out")),
    _standin("aclnnNLLLossBackward", "nll_loss_backward", "aclnnop/aclnn_nll_loss_backward.h",
             ("gradOutput", "self", "target", "weight", "totalWeight"), ("out",),
             (AttrSpec("reduction", "int", default=1), AttrSpec("ignoreIndex", "int", default=-100)),
             ("gradOutput", "self", "target", "weight", "reduction", "ignoreIndex", "totalWeight", "out")),
    _standin("aclnnRmsNormGrad", "rms_norm_grad", "aclnnop/aclnn_rms_norm_grad.h",
             ("dy", "x", "rstd", "gamma"), ("dxOut", "dgammaOut"), (), ()),
    _standin("aclnnLayerNormBackward", "layer_norm_backward", "aclnnop/aclnn_layer_norm_backward.h",
             ("gradOut", "input", "mean", "rstd", "weightOptional", "biasOptional"),
             ("gradInputOut", "gradWeightOut", "gradBiasOut"),
             (AttrSpec("normalizedShape", "int_list"), AttrSpec("outputMask", "bool_list", default=[True] * 3)),
             ("gradOut", "input", "normalizedShape", "mean", "rstd", "weightOptional", "biasOptional", "outputMask",
              "gradInputOut", "gradWeightOut", "gradBiasOut"),
             optional=("weightOptional", "biasOptional", "gradInputOut", "gradWeightOut", "gradBiasOut")),
    _standin("aclnnBatchNormBackward", "batch_norm_backward", "aclnnop/aclnn_batch_norm_backward.h",
             ("gradOut", "input", "weight", "runningMean", "runningVar", "saveMean", "saveInvstd"),
             ("gradInput", "gradWeight", "gradBias"),
             (AttrSpec("training", "bool", default=True), AttrSpec("eps", "double", default=1e-5),
              AttrSpec("outputMask", "bool_list", default=[True] * 3)),
             ("gradOut", "input", "weight", "runningMean", "runningVar", "saveMean", "saveInvstd", "training", "eps",
              "outputMask", "gradInput", "gradWeight", "gradBias"),
             optional=("weight", "runningMean", "runningVar", "saveMean", "saveInvstd", "gradInput", "gradWeight",
                       "gradBias")),
    _standin("aclnnSwiGluGrad", "swi_glu_grad", "aclnnop/aclnn_swi_glu_grad.h", ("yGrad", "x"), ("out",),
             (AttrSpec("dim", "int", default=-1),), ("yGrad", "x", "dim", "out")),
    _standin("aclnnGroupNormBackward", "group_norm_backward", "aclnnop/aclnn_group_norm_backward.h",
             ("gradOut", "input", "mean", "rstd", "gamma"), ("gradInput", "gradGammaOut", "gradBetaOut"),
             (AttrSpec("N", "int"), AttrSpec("C", "int"), AttrSpec("HxW", "int"), AttrSpec("group", "int"),
              AttrSpec("outputMask", "bool_list", default=[True] * 3)),
             ("gradOut", "input", "mean", "rstd", "gamma", "N", "C", "HxW", "group", "outputMask", "gradInput",
              "gradGammaOut", "gradBetaOut"),
             optional=("gamma", "gradInput", "gradGammaOut", "gradBetaOut")),
    _standin("aclnnGeGluBackward", "ge_glu_backward", "aclnnop/aclnn_geglu_backward.h", ("gradOutput", "self", "gelu"),
             ("gradInput",), (AttrSpec("dim", "int", default=-1), AttrSpec("approximate", "int", default=1)),
             ("gradOutput", "self", "gelu", "dim", "approximate", "gradInput")),
    _standin("aclnnGeGluV3Backward", "ge_glu_v3_backward", "aclnnop/aclnn_geglu_backward.h",
             ("gradOutput", "self", "gelu"), ("gradInput",),
             (AttrSpec("dim", "int", default=-1), AttrSpec("approximate", "int", default=1),
              AttrSpec("activateLeft", "bool", default=False)),
             ("gradOutput", "self", "gelu", "dim", "approximate", "activateLeft", "gradInput")),
)}


def reduction_ops() -> list[OpSpec]:
    """The eleven ops, the registered declaration where there is one (so tests check the real declarations)."""
    return [OPS.get(name, standin) for name, standin in sorted(STANDINS.items())]


# Where each op's public header is in hicann/ops-nn (RmsNormGrad's and SwiGluGrad's are generated from their OpDef
# at build time: their prototypes are in their docs, DOCS).
PUBLIC_HEADERS = {
    "aclnnSoftmaxBackward": "activation/softmax_grad/op_api/aclnn_softmax_backward.h",
    "aclnnLogSoftmaxBackward": "activation/log_softmax_grad/op_api/aclnn_logsoftmax_backward.h",
    "aclnnMseLossBackward": "loss/mse_loss_grad_v2/op_host/op_api/aclnn_mse_loss_backward.h",
    "aclnnNLLLossBackward": "loss/nll_loss_grad/op_api/aclnn_nll_loss_backward.h",
    "aclnnLayerNormBackward": "norm/layer_norm_grad_v3/op_host/op_api/aclnn_layer_norm_backward.h",
    "aclnnBatchNormBackward": "norm/batch_norm_grad_v3/op_host/op_api/aclnn_batch_norm_backward.h",
    "aclnnGroupNormBackward": "norm/group_norm_grad/op_host/op_api/aclnn_group_norm_backward.h",
    "aclnnGeGluBackward": "activation/ge_glu_grad_v2/op_host/op_api/aclnn_geglu_backward.h",
    "aclnnGeGluV3Backward": "activation/ge_glu_grad_v2/op_host/op_api/aclnn_geglu_backward.h",
}
DOCS = {"aclnnRmsNormGrad": "norm/rms_norm_grad/docs/aclnnRmsNormGrad.md",
        "aclnnSwiGluGrad": "activation/swi_glu_grad/docs/aclnnSwiGluGrad.md"}
