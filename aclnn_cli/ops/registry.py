"""The operator registry: every module in aclnn_cli.ops that calls `register` is an operator.

Modules are imported when first needed (a command starts without importing every op's numerics):
`find_op` imports the one module an op name maps to (BUNDLED); reading the registry whole (iterating
OPS, its size, a name it lacks) imports every bundled module and the configured user ops first.
tests/test_registry_lazy.py checks BUNDLED against the op files.
"""

from __future__ import annotations

import importlib
import sys

from . import graphops
from .base import FIND, OpSpec
from .declcheck import check, is_bundled
from .guard import guarded

# API name -> its declaration module in aclnn_cli.ops, in its family's folder (the module's name is the op's key)
BUNDLED: dict[str, str] = {
    "aclnnAdaptiveAvgPool2dBackward": "adaptive.adaptive_avg_pool2d_backward",
    "aclnnAdaptiveAvgPool3dBackward": "adaptive.adaptive_avg_pool3d_backward",
    "aclnnAvgPool2dBackward": "window.avg_pool2d_backward",
    "aclnnAvgPool3dBackward": "window.avg_pool3d_backward",
    "aclnnMaxPool2dWithIndicesBackward": "window.max_pool2d_with_indices_backward",
    "aclnnMaxPool2dWithMaskBackward": "window.max_pool2d_with_mask_backward",
    "aclnnMaxPool3dWithArgmaxBackward": "window.max_pool3d_with_argmax_backward",
    "aclnnBatchMatMul": "contraction.batch_mat_mul",
    "aclnnMatmul": "contraction.matmul",
    "aclnnConvolutionBackward": "convolution.convolution_backward",
    "aclnnConvTbcBackward": "tbc.conv_tbc_backward",
    "aclnnBatchNormBackward": "channels.batch_norm_backward",
    "aclnnBatchNormElemtBackward": "channels.batch_norm_elemt_backward",
    "aclnnBatchNormReduceBackward": "channels.batch_norm_reduce_backward",
    "aclnnEluBackward": "elementwise.elu_backward",
    "aclnnBinaryCrossEntropyBackward": "elementwise.binary_cross_entropy_backward",
    "aclnnBinaryCrossEntropyWithLogitsBackward": "elementwise.binary_cross_entropy_with_logits_backward",
    "aclnnEmbeddingDenseBackward": "scatter.embedding_dense_backward",
    "aclnnFastGeluBackward": "elementwise.fast_gelu_backward",
    "aclnnGeGluBackward": "split.ge_glu_backward",
    "aclnnGeGluV3Backward": "split.ge_glu_v3_backward",
    "aclnnGeluBackward": "elementwise.gelu_backward",
    "aclnnGeluBackwardV2": "elementwise.gelu_backward_v2",
    "aclnnGroupNormBackward": "groups.group_norm_backward",
    "aclnnHardsigmoidBackward": "elementwise.hardsigmoid_backward",
    "aclnnHardtanhBackward": "elementwise.hardtanh_backward",
    "aclnnHardswishBackward": "elementwise.hardswish_backward",
    "aclnnInstanceNormGrad": "groups.instance_norm_grad",
    "aclnnLayerNormBackward": "rows.layer_norm_backward",
    "aclnnLayerNormGrad": "rows.layer_norm_grad",
    "aclnnKlDivBackward": "elementwise.kl_div_backward",
    "aclnnL1LossBackward": "elementwise.l1_loss_backward",
    "aclnnL2NormalizeGrad": "rows.l2_normalize_grad",
    "aclnnLeakyReluBackward": "elementwise.leaky_relu_backward",
    "aclnnLogitGrad": "elementwise.logit_grad",
    "aclnnLogSigmoidBackward": "elementwise.log_sigmoid_backward",
    "aclnnLogSoftmaxBackward": "rows.log_softmax_backward",
    "aclnnMishBackward": "elementwise.mish_backward",
    "aclnnMishGrad": "elementwise.mish_grad",
    "aclnnMseLossBackward": "elementwise.mse_loss_backward",
    "aclnnNLLLossBackward": "rows.nll_loss_backward",
    "aclnnNLLLoss2dBackward": "classes.nll_loss2d_backward",
    "aclnnPreluBackward": "channels.prelu_backward",
    "aclnnRepeatInterleaveGrad": "segments.repeat_interleave_grad",
    "aclnnRmsNormGrad": "rows.rms_norm_grad",
    "aclnnSeluBackward": "elementwise.selu_backward",
    "aclnnSigmoidBackward": "elementwise.sigmoid_backward",
    "aclnnSiluBackward": "elementwise.silu_backward",
    "aclnnSoftshrinkBackward": "elementwise.softshrink_backward",
    "aclnnSoftMarginLossBackward": "elementwise.soft_margin_loss_backward",
    "aclnnSmoothL1LossBackward": "elementwise.smooth_l1_loss_backward",
    "aclnnSoftmaxBackward": "rows.softmax_backward",
    "aclnnSoftmaxGradExt": "rows.softmax_grad_ext",
    "aclnnSoftplusBackward": "elementwise.softplus_backward",
    "aclnnSwiGluGrad": "split.swi_glu_grad",
    "aclnnSwishBackward": "elementwise.swish_backward",
    "aclnnThresholdBackward": "elementwise.threshold_backward",
}


AFTER_BUNDLED: list = []  # what else a whole read loads, after the bundled ops (ops/user.py adds its loader)


class Registry(dict):
    """name -> OpSpec, completed on first whole read (iteration, len, `in`, values, a missing name)."""

    complete = False

    def load_all(self) -> None:
        """Import every bundled op module, then the configured user ops (once per process)."""
        if self.complete:
            return
        self.complete = True  # (first: the modules' own register calls read the registry)
        for module in BUNDLED.values():
            importlib.import_module(f"aclnn_cli.ops.{module}")
        for load in AFTER_BUNDLED:  # (user.py's loader of the configured user ops: it imports this module)
            load()

    def __iter__(self):
        self.load_all()
        return super().__iter__()

    def __len__(self) -> int:
        self.load_all()
        return super().__len__()

    def __contains__(self, name) -> bool:
        if super().__contains__(name):
            return True
        self.load_all()
        return super().__contains__(name)

    def __getitem__(self, name) -> OpSpec:
        if not super().__contains__(name):
            self.load_all()
        return super().__getitem__(name)

    def get(self, name, default=None):
        return self[name] if name in self else default

    def keys(self):
        self.load_all()
        return super().keys()

    def values(self):
        self.load_all()
        return super().values()

    def items(self):
        self.load_all()
        return super().items()

    def copy(self) -> dict:
        self.load_all()
        return dict(super().items())

    def __repr__(self) -> str:
        self.load_all()
        return super().__repr__()


OPS: Registry = Registry()
DECLARED_IN: dict[str, str] = {}  # op name -> the file that called register (its fingerprint covers it)


def _spellings() -> dict[str, str]:
    """Every accepted spelling of a bundled op -> its module (built once)."""
    if not _SPELLINGS:
        for name, module in BUNDLED.items():
            for spelling in (name, name.removeprefix("aclnn"), module.rsplit(".", 1)[-1]):
                _SPELLINGS[spelling] = module
            _SPELLINGS[name.lower()] = module
    return _SPELLINGS


_SPELLINGS: dict[str, str] = {}


def bundled_module(wanted: str) -> str | None:
    """The bundled module of an API name ('aclnnSiluBackward', in any case), bare name ('SiluBackward') or
    key ('silu_backward'); None if no bundled op is called that."""
    table = _spellings()
    return table.get(wanted) or table.get(wanted.lower()) if wanted.lower().startswith("aclnn") else table.get(wanted)


def register(spec: OpSpec) -> OpSpec:
    """Add an op, checked whole first (declcheck: one line naming the file and the field, a UserError).
    Its variants join the defect catalogue (device/defects.catalogue checks them). An op declared outside
    aclnn_cli is registered with its functions guarded (guard.py): use the returned spec."""
    file = sys._getframe(1).f_globals.get("__file__") or ""
    bundled = is_bundled(str(file))
    # a user op is checked against every op (a bundled name above all); a bundled one against those loaded
    # (BUNDLED's names and keys are unique: tests/test_registry_lazy.py)
    check(spec, OPS if not bundled else dict(dict.items(OPS)), DECLARED_IN, str(file))
    if not bundled:
        spec = guarded(spec, str(file))
    OPS[spec.name] = spec
    DECLARED_IN[spec.name] = file
    for name, graph in spec.graph_ops.items():  # (the importers' one table: TTK's op_name finds them as bundled ones)
        graphops.add(name, graph)
    return spec


def is_ours(op: OpSpec) -> bool:
    """One of aclnn-cli's own ops, not a user's: its cases may run in the command's own process. A user op's
    run in workers wherever there are workers, so that what its code does to a process (os._exit, a signal)
    costs only its cases, named."""
    return op.name in BUNDLED  # (no user op takes a bundled op's name: declcheck refuses it)


def lookup(name: str) -> OpSpec:
    """An op by API name, importing its module first (used to unpickle OpSpec in workers)."""
    module = BUNDLED.get(name)
    if module is not None:
        importlib.import_module(f"aclnn_cli.ops.{module}")
    return OPS[name]  # (a user op: reading a missing name loads ACLNN_CLI_OPS, set by --ops for workers too)


FIND.append(lookup)  # (OpSpec pickles by name; unpickling asks this)
