"""Graph (GE) operators and the aclnn API that computes each: TTK kernel mode and msOpST name graph ops.

GRAPH_OPS is the one table the importers look a graph op up in (`find`): the bundled ones below, and those a user
op declares in its OpSpec's `graph_ops` (register adds them, after declcheck has checked them).

A graph op's inputs, outputs and attributes map onto the API's by name: SoftmaxGrad(softmax, grad_softmax,
axes) is aclnnSoftmaxBackward(gradOutput, output, dim); NLLLossGrad's reduction 'sum' is the API's int64 2;
LayerNormGradV3's normalizedShape is gamma's shape. The graph protos are ops-nn's op_graph/*_proto.h.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

Convert = Callable[[Any], Any]  # a graph attribute value -> the API's (ValueError: not expressible)


def one_axis(value: Any) -> int:
    """axes [k] / axis [k] (ListInt) -> dim k: the API reduces over one axis."""
    axes = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(axes) != 1 or not isinstance(axes[0], int) or isinstance(axes[0], bool):
        raise ValueError(f"a reduction over the axes {value!r}: the aclnn API takes one dim")
    return axes[0]


REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def reduction(value: Any) -> int:
    """'none' / 'mean' / 'sum' (the graph's String attribute) -> the API's int64 0 / 1 / 2."""
    key = str(value).strip().lower()
    if key not in REDUCTIONS:
        raise ValueError(f"reduction {value!r} is not none, mean or sum")
    return REDUCTIONS[key]


def integer(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected True or False, got {value!r}")
    return value


def number(value: Any) -> float | int:
    """A Float attribute (epsilon) -> the API's double, as given."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    return value


def ints(value: Any) -> list[int]:
    """A ListInt attribute (L2NormalizeGrad's dim) -> the API's aclIntArray, as given."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError(f"expected a list of integers, got {value!r}")
    return list(value)


def bools(value: Any) -> list[bool]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, bool) for v in value):
        raise ValueError(f"expected a list of True/False, got {value!r}")
    return list(value)


@dataclass(frozen=True)
class GraphOp:
    """A graph operator one aclnn API computes.

    inputs / outputs: the graph's tensor names in order; to_inputs / to_outputs: the API's name of each (empty:
    the API's inputs / outputs in order; a None in to_inputs: a graph input the API does not take, dropped, as
    SwishGrad's y = swish(x), which aclnnSwishBackward computes itself). attrs: graph attribute -> (API attribute, converter); fixed_attrs:
    graph attributes the API fixes to a value (a case giving another is unsupported); ignored: graph
    attributes that do not reach the API, with why; derive: API attributes from the API tensors' shapes; lists:
    graph bool attributes that are entries of an API list attribute, graph name -> (API name, index, length),
    missing entries true (GroupNormGrad's dx_is_require... are outputMask). An `attrs` entry whose API name is
    None is checked by its converter and not passed (data_format: the API has one layout). shaped: API inputs made
    from a graph attribute holding their shape (below)."""

    api: str
    inputs: tuple[str, ...]
    fixed_attrs: tuple[tuple[str, float], ...] = ()
    to_inputs: tuple[str | None, ...] = ()
    outputs: tuple[str, ...] = ()
    to_outputs: tuple[str, ...] = ()
    attrs: Mapping[str, tuple[str, Convert]] = None  # type: ignore[assignment]
    ignored: Mapping[str, str] = None  # type: ignore[assignment]
    derive: Callable[[Mapping[str, tuple[int, ...]]], dict] | None = None
    lists: Mapping[str, tuple[str, int, int]] = None  # type: ignore[assignment]
    # optional graph inputs the API has no argument for, that change the result when given (MishGrad's tanhx, had its
    # graph op gone to aclnnMishBackward, which computes tanh(softplus(x)) itself): graph input -> why a case giving
    # one is unsupported
    absent_only: Mapping[str, str] = None  # type: ignore[assignment]
    # to_inputs that hold where a graph attribute has a value: ((graph attribute, value, to_inputs), ...), the first
    # that matches (an attribute left out does not match). BatchNormGrad's reserve spaces are the saved mean and
    # invstd in training, the running mean and variance in inference.
    when: tuple[tuple[str, object, tuple[str | None, ...]], ...] = ()
    # API inputs the graph op has no tensor for, whose shape a graph ListInt attribute gives and whose values the API
    # never reads: API input -> that attribute (AdaptiveAvgPool2dGrad's orig_input_shape is the shape of
    # aclnnAdaptiveAvgPool2dBackward's self). The importers make the input of that shape in the first graph input's
    # dtype, filled as the op fills it.
    shaped: Mapping[str, str] = None  # type: ignore[assignment]
    # API inputs whose values a graph attribute lists, beside the tensor the graph op has for them (TTK's value-
    # depending inputs: RepeatInterleaveGrad's repeats is a tensor and an attribute of the same values): API input ->
    # that attribute. The importers fill the input with those values, in its own dtype and shape.
    valued: Mapping[str, str] = None  # type: ignore[assignment]
    # the API tensors' shapes from the graph's (an elementwise graph kernel behind a per-channel API, one_sample):
    # {API name: graph-given shape} -> {API name: the shape the API case takes}
    reshape: Callable[[Mapping[str, tuple[int, ...]]], Mapping[str, tuple[int, ...]]] | None = None

    def given_but_absent_only(self, index: int) -> str | None:
        """Why graph input `index`, given, makes the case unsupported (None: it may be given)."""
        return (self.absent_only or {}).get(self.inputs[index]) if index < len(self.inputs) else None

    def api_inputs(self, api_inputs: tuple[str, ...], attrs: Mapping | None = None) -> list[str | None]:
        """The API's name for each graph input, in the graph's order (None: not passed to the API), for a case
        with these graph attributes."""
        for name, value, to_inputs in self.when:
            if name in (attrs or {}) and (attrs or {})[name] == value and type((attrs or {})[name]) is type(value):
                return list(to_inputs)
        return list(self.to_inputs or api_inputs[:len(self.inputs)])

    def api_outputs(self, api_outputs: tuple[str, ...]) -> list[str | None]:
        """The API's name for each graph output (None: an output the API has not, not judged)."""
        return list(self.to_outputs or api_outputs)


def choice(*allowed: str) -> Convert:
    """A String attribute the API takes as a string too (GeluGradV2's approximate), one of `allowed`."""
    def convert(value: Any) -> Any:
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")
        return value
    return convert


def only(expected: str) -> Convert:
    """A String attribute the API has no argument for, accepted only at the value the API assumes."""
    def convert(value: Any) -> Any:
        if str(value) != expected:
            raise ValueError(f"{value!r}: the aclnn API takes {expected} only")
        return value
    return convert


def one_sample(*drivers: str) -> Callable[[Mapping[str, tuple[int, ...]]], dict]:
    """`GraphOp.reshape` of a per-channel API whose graph kernel is elementwise over same-shape tensors (synchronised
    BatchNorm's tails): every graph element is a channel of its own, so the API's (N, C, ...) tensors `drivers` take
    (1, C) and every other (C,), C the graph shape's element count. With one sample and no spatial axes a channel's
    sums are its one value."""
    def shapes(given: Mapping[str, tuple[int, ...]]) -> dict:
        out = {}
        for name, shape in given.items():
            c = 1
            for s in shape:
                c *= s
            out[name] = (1, c) if name in drivers else (c,)
        return out
    return shapes


def _group_sizes(shapes: Mapping[str, tuple[int, ...]]) -> dict:
    """GroupNormGrad has no N, C, HxW: they are x's (N, C, *spatial) shape."""
    x = shapes.get("input")
    if x is None or len(x) < 2:
        return {}
    hxw = 1
    for s in x[2:]:
        hxw *= s
    return {"N": x[0], "C": x[1], "HxW": hxw}


def _norm_shape(shapes: Mapping[str, tuple[int, ...]]) -> dict:
    """LayerNormGradV3 has no normalizedShape: it is gamma's shape (the trailing axes gamma spans)."""
    gamma = shapes.get("weightOptional")
    return {} if gamma is None else {"normalizedShape": list(gamma)}


def _elu_grad_from_output(shapes: Mapping[str, tuple[int, ...]]) -> dict:
    """EluGrad (activation/elu_grad) has no attributes: (activation < 0) ? grads * (activation + 1) : grads, from the
    forward's output, is aclnnEluBackward's isResult form at alpha = scale = inputScale = 1 (x = 0 gives grads in
    both: the API's x <= 0 branch is grads * (0 + 1))."""
    return {"alpha": 1.0, "scale": 1.0, "inputScale": 1.0, "isResult": True}


def _relu_threshold(shapes: Mapping[str, tuple[int, ...]]) -> dict:
    """ReluGrad (activation/relu_grad) has no attributes: dy * (features > 0) is aclnnThresholdBackward at threshold 0,
    which the op_api sends to this very kernel (|threshold| <= FLT_EPSILON)."""
    return {"threshold": 0.0}


GRAPH_OPS = {
    "SiluGrad": GraphOp("aclnnSiluBackward", ("dy", "x")),
    "FastGeluGrad": GraphOp("aclnnFastGeluBackward", ("dy", "x")),
    # GeluGrad's y (the forward's output) is not read by the 950 kernel; aclnnGeluBackward passes gradOutput there
    # (the generated API of MishGrad's OpDef, which takes tanhx: aclnnMishBackward takes none and computes it)
    "MishGrad": GraphOp("aclnnMishGrad", ("grad", "x", "tanhx"), to_inputs=("grad", "x", "tanhxOptional"),
                        outputs=("x_grad",), to_outputs=("xGrad",)),
    "GeluGradV2": GraphOp("aclnnGeluBackwardV2", ("dy", "x"), to_inputs=("gradOutput", "self"), outputs=("z",),
                          to_outputs=("gradInput",), attrs={"approximate": ("approximate", choice("none", "tanh"))}),
    # (SigmoidGrad's complex_conj conjugates a complex y: on the real dtypes the API takes it changes nothing)
    "SigmoidGrad": GraphOp("aclnnSigmoidBackward", ("y", "dy"), to_inputs=("output", "gradOutput"), outputs=("z",),
                           to_outputs=("gradInput",),
                           ignored={"complex_conj": "conjugates a complex y; the real dtypes' result is the same"}),
    "GeluGrad": GraphOp("aclnnGeluBackward", ("dy", "x", "y"), to_inputs=("gradOutput", "self", None),
                        outputs=("z",), to_outputs=("gradInput",)),
    "LogSigmoidGrad": GraphOp("aclnnLogSigmoidBackward", ("grads", "features")),
    "HardSigmoidGrad": GraphOp("aclnnHardsigmoidBackward", ("grads", "input_x"), (("alpha", 1 / 6), ("beta", 0.5))),
    "SwishGrad": GraphOp("aclnnSwishBackward", ("grad", "x", "y"), to_inputs=("gradOutput", "self", None),
                         outputs=("grad_x",), to_outputs=("gradInput",), attrs={"scale": ("betaOptional", number)}),
    "LeakyReluGrad": GraphOp("aclnnLeakyReluBackward", ("gradients", "features"), to_inputs=("gradOutput", "self"),
                             attrs={"negative_slope": ("negativeSlope", number)}),
    "EluGradV2": GraphOp("aclnnEluBackward", ("grads", "activations"), to_inputs=("gradOutput", "selfOrResult"),
                         outputs=("y",), to_outputs=("gradInput",),
                         attrs={"alpha": ("alpha", number), "scale": ("scale", number),
                                "input_scale": ("inputScale", number), "is_result": ("isResult", boolean)}),
    "EluGrad": GraphOp("aclnnEluBackward", ("grads", "activations"), to_inputs=("gradOutput", "selfOrResult"),
                       outputs=("y",), to_outputs=("gradInput",), derive=_elu_grad_from_output),
    "HardtanhGrad": GraphOp("aclnnHardtanhBackward", ("result", "grad"), to_inputs=("self", "gradOutput"),
                            outputs=("y",), to_outputs=("out",),
                            attrs={"min_val": ("min", number), "max_val": ("max", number)}),
    "SoftShrinkGrad": GraphOp("aclnnSoftshrinkBackward", ("input_grad", "input_x"), to_inputs=("gradOutput", "self"),
                              outputs=("output_y",), to_outputs=("gradInput",), attrs={"lambd": ("lambda", number)}),
    "SeluGrad": GraphOp("aclnnSeluBackward", ("gradients", "outputs"), to_inputs=("gradOutput", "result"),
                        outputs=("y",), to_outputs=("gradInput",)),
    "ThresholdGradV2D": GraphOp("aclnnThresholdBackward", ("gradients", "features"), to_inputs=("gradOutput", "self"),
                                outputs=("backprops",), to_outputs=("out",), attrs={"threshold": ("threshold", number)}),
    "ReluGrad": GraphOp("aclnnThresholdBackward", ("gradients", "features"), to_inputs=("gradOutput", "self"),
                        outputs=("backprops",), to_outputs=("out",), derive=_relu_threshold),
    "SoftmaxGrad": GraphOp("aclnnSoftmaxBackward", ("softmax", "grad_softmax"), to_inputs=("output", "gradOutput"),
                           attrs={"axes": ("dim", one_axis), "axis": ("dim", one_axis)}),
    "SoftmaxGradExt": GraphOp("aclnnSoftmaxGradExt", ("grad", "x1", "x2"), outputs=("y",),
                              attrs={"axes": ("axes", integer), "keep_dims": ("keepDims", boolean)}),
    "LogSoftmaxGrad": GraphOp("aclnnLogSoftmaxBackward", ("grad", "x"), to_inputs=("gradOutput", "output"),
                              attrs={"axis": ("dim", one_axis), "axes": ("dim", one_axis)}),
    "MseLossGrad": GraphOp("aclnnMseLossBackward", ("predict", "label", "dout"),
                           to_inputs=("self", "target", "gradOutput"), attrs={"reduction": ("reduction", reduction)}),
    "BinaryCrossEntropyGrad": GraphOp("aclnnBinaryCrossEntropyBackward", ("x", "y", "grad_output", "weight"),
                                      to_inputs=("self", "target", "gradOutput", "weightOptional"), outputs=("output",),
                                      to_outputs=("out",), attrs={"reduction": ("reduction", reduction)}),
    "L1LossGrad": GraphOp("aclnnL1LossBackward", ("grads", "predict", "label"), to_inputs=("gradOutput", "self", "target"),
                          outputs=("y",), to_outputs=("gradInput",), attrs={"reduction": ("reduction", reduction)}),
    "SmoothL1LossGradV2": GraphOp("aclnnSmoothL1LossBackward", ("predict", "label", "dout"),
                                  to_inputs=("self", "target", "gradOut"), outputs=("gradient",),
                                  to_outputs=("gradInput",),
                                  attrs={"sigma": ("beta", number), "reduction": ("reduction", reduction)}),
    "L2NormalizeGrad": GraphOp("aclnnL2NormalizeGrad", ("x", "y", "dy"), outputs=("dx",),
                               attrs={"dim": ("dimOptional", ints), "eps": ("eps", number)}),
    "InstanceNormGrad": GraphOp("aclnnInstanceNormGrad", ("dy", "x", "variance", "mean", "gamma"),
                                outputs=("pd_x", "pd_gamma", "pd_beta")),
    "RmsNormGrad": GraphOp("aclnnRmsNormGrad", ("dy", "x", "rstd", "gamma"), outputs=("dx", "dgamma"),
                           ignored={"epsilon": "the grad takes rstd, already computed with it"}),
    "LayerNormGradV3": GraphOp("aclnnLayerNormBackward", ("dy", "x", "rstd", "mean", "gamma"),
                               to_inputs=("gradOut", "input", "rstd", "mean", "weightOptional"),
                               outputs=("pd_x", "pd_gamma", "pd_beta"),
                               attrs={"output_mask": ("outputMask", bools)}, derive=_norm_shape),
    "BatchNormGradV3": GraphOp("aclnnBatchNormBackward",
                               ("dy", "x", "weight", "running_mean", "running_var", "save_mean", "save_rstd"),
                               to_inputs=("gradOut", "input", "weight", "runningMean", "runningVar", "saveMean",
                                          "saveInvstd"),
                               outputs=("dx", "dweight", "dbias"), to_outputs=("gradInput", "gradWeight", "gradBias"),
                               attrs={"is_training": ("training", boolean), "epsilon": ("eps", number)}),
    # (reserve_space_3 is "not used and not involved in calculations"; reserve_space_4 and 5 are outputs the API
    # has not; output_mask is "valid only in inference mode": the API computes what it switches on in both)
    "BatchNormGrad": GraphOp("aclnnBatchNormBackward",
                             ("y_backprop", "x", "scale", "reserve_space_1", "reserve_space_2", "reserve_space_3"),
                             to_inputs=("gradOut", "input", "weight", "saveMean", "saveInvstd", None),
                             when=(("is_training", False,
                                    ("gradOut", "input", "weight", "runningMean", "runningVar", None)),),
                             outputs=("x_backprop", "scale_backprop", "offset_backprop", "reserve_space_4",
                                      "reserve_space_5"),
                             to_outputs=("gradInput", "gradWeight", "gradBias", None, None),
                             attrs={"is_training": ("training", boolean), "epsilon": ("eps", number),
                                    "output_mask": ("outputMask", bools),
                                    "data_format": (None, choice("NCHW", "NHWC", "NCDHW", "NDHWC"))}),
    # (the tails of synchronised BatchNorm's backward: elementwise kernels over same-shape tensors, every element one
    # channel of the API with one sample; the reduce's sums are then gradOut itself and fl(gradOut * input))
    "SyncBatchNormBackwardReduce": GraphOp("aclnnBatchNormReduceBackward",
                                           ("sum_dy", "sum_dy_dx_pad", "mean", "invert_std"),
                                           to_inputs=("gradOut", "input", "mean", "invstd"),
                                           outputs=("sum_dy_xmu", "y"), to_outputs=("sumDyXmu", "gradWeight"),
                                           reshape=one_sample("gradOut", "input")),
    # (the elemt kernel's mean_dy and mean_dy_xmu are the API's sums with a count of 1: counter's default, [1] of 1)
    "SyncBatchNormBackwardElemt": GraphOp("aclnnBatchNormElemtBackward",
                                          ("grad_output", "save_input", "mean", "invstd", "weight", "mean_dy",
                                           "mean_dy_xmu"),
                                          to_inputs=("gradOut", "input", "mean", "invstd", "weight", "sumDy",
                                                     "sumDyXmu"),
                                          outputs=("grad_input",), to_outputs=("gradInput",),
                                          reshape=one_sample("gradOut", "input", "gradInput")),
    "EmbeddingDenseGrad": GraphOp("aclnnEmbeddingDenseBackward", ("grad", "indices"), outputs=("y",),
                                  to_outputs=("out",),
                                  attrs={"num_weights": ("numWeights", integer), "padding_idx": ("paddingIdx", integer),
                                         "scale_grad_by_freq": ("scaleGradByFreq", boolean)}),
    # (index/repeat_interleave_grad/op_graph: TTK lists the repeats tensor's values as the attribute 'repeats' too)
    "RepeatInterleaveGrad": GraphOp("aclnnRepeatInterleaveGrad", ("y_grad", "repeats"), to_inputs=("yGrad", "repeats"),
                                    outputs=("x_grad",), to_outputs=("out",), attrs={"axis": ("axis", integer)},
                                    valued={"repeats": "repeats"}),
    "GroupNormGrad": GraphOp("aclnnGroupNormBackward", ("dy", "mean", "rstd", "x", "gamma"),
                             to_inputs=("gradOut", "mean", "rstd", "input", "gamma"), outputs=("dx", "dgamma", "dbeta"),
                             to_outputs=("gradInput", "gradGammaOut", "gradBetaOut"),
                             attrs={"num_groups": ("group", integer), "data_format": (None, only("NCHW"))},
                             lists={"dx_is_require": ("outputMask", 0, 3), "dgamma_is_require": ("outputMask", 1, 3),
                                    "dbeta_is_require": ("outputMask", 2, 3)}, derive=_group_sizes),
    "SwiGluGrad": GraphOp("aclnnSwiGluGrad", ("y_grad", "x"), to_inputs=("yGrad", "x"), outputs=("x_grad",),
                          to_outputs=("out",), attrs={"dim": ("dim", integer)}),
    "GeGluGradV2": GraphOp("aclnnGeGluV3Backward", ("dy", "x", "gelu"), to_inputs=("gradOutput", "self", "gelu"),
                           outputs=("dx",), to_outputs=("gradInput",),
                           attrs={"dim": ("dim", integer), "approximate": ("approximate", integer),
                                  "activate_left": ("activateLeft", boolean)}),
    # (pooling/adaptive_avg_pool{2,3}d_grad/op_graph: the 2-D op has x's shape as an attribute, not a tensor; the
    # TTK files' dynamic_shape is TTK's own compile setting)
    "AdaptiveAvgPool2dGrad": GraphOp("aclnnAdaptiveAvgPool2dBackward", ("input_grad",), to_inputs=("gradOutput",),
                                     outputs=("output_grad",), to_outputs=("out",), shaped={"self": "orig_input_shape"},
                                     ignored={"dynamic_shape": "TTK's dynamic-shape compile setting"}),
    "AdaptiveAvgPool3dGrad": GraphOp("aclnnAdaptiveAvgPool3dBackward", ("y_grad", "x"), to_inputs=("gradOutput", "self"),
                                     outputs=("x_grad",), to_outputs=("out",),
                                     attrs={"data_format": (None, only("NCDHW"))},
                                     ignored={"dynamic_shape": "TTK's dynamic-shape compile setting"}),
    "NLLLossGrad": GraphOp("aclnnNLLLossBackward", ("x", "y_grad", "target", "weight", "total_weight"),
                           to_inputs=("self", "gradOutput", "target", "weight", "totalWeight"),
                           attrs={"reduction": ("reduction", reduction), "ignore_index": ("ignoreIndex", integer)}),
}

BUNDLED_GRAPH_OPS = frozenset(GRAPH_OPS)


def fold(name: Any) -> str:
    """The spelling a graph op is looked up by: SiluGrad, silu_grad and SILUGRAD are one op."""
    return str(name).replace("_", "").lower()


_KEYS = {fold(k): k for k in GRAPH_OPS}


def find(name: Any) -> GraphOp | None:
    """A registered graph op by CamelCase or snake_case name, or None (ops.find_graph_op also loads the user ops)."""
    key = _KEYS.get(fold(name))
    return GRAPH_OPS[key] if key else None


def holder(name: str) -> str | None:
    """The registered graph op a new name would collide with (same folded spelling), or None."""
    return _KEYS.get(fold(name))


def add(name: str, graph: GraphOp) -> None:
    """Register a user op's graph op (declcheck refused a name already taken)."""
    GRAPH_OPS[name] = graph
    _KEYS[fold(name)] = name
