"""aclnnConvolutionBackward's argument names and the op_api's checks of them (op_api/convolution_backward_checker.cpp,
hicann/ops-nn e5c3fa93): what the contract refuses, with the status and the reason (convolution_backward.py declares
the op; aclnnConvolutionTbcBackward's module reads the same names).
"""

from __future__ import annotations

from ..families.convolution import conv_output_sizes, padding_sides, transposed_output_sizes

GRAD, X, W, GI, GW, GB = "gradOutput", "input", "weight", "gradInput", "gradWeight", "gradBias"
BIAS_SIZES, STRIDE, PADDING, DILATION, TRANSPOSED, OUT_PAD, GROUPS, MASK, MATH = (
    "biasSizes", "stride", "padding", "dilation", "transposed", "outputPadding", "groups", "outputMask", "cubeMathType")
OUTPUTS = (GI, GW, GB)


def attribute_rule(attrs) -> str | None:
    """CheckNotNull's outputMask length, CheckConvParams' values (stride, dilation > 0, padding >= 0, outputPadding
    0 unless transposed, groups in [1, 65535]) and the cubeMathType range. cubeMathType 2 (USE_FP16) with bfloat16
    operands is accepted on the 950, A3 and A2 (matmul/common/op_host/op_api/cube_util.cpp CheckSocSupportDtype
    refuses it only where the cube has no float32, as ops-nn's own ATK suite for the op asks it); the op_api then
    casts every operand to float16 (`_fp16`)."""
    mask = tuple(attrs[MASK])
    if len(mask) != 3:
        return f"outputMask has {len(mask)} values; it takes 3 (gradInput, gradWeight, gradBias)"
    for name, low in ((STRIDE, 1), (DILATION, 1), (PADDING, 0)):
        if any(int(v) < low for v in attrs[name]):
            return f"{name} {list(attrs[name])}: each value must be >= {low}"
    if not attrs[TRANSPOSED] and any(int(v) != 0 for v in attrs[OUT_PAD]):
        return f"outputPadding {list(attrs[OUT_PAD])}: every value must be 0 when transposed is false"
    if attrs[TRANSPOSED] and any(not 0 <= int(v) < int(s) for v, s in zip(attrs[OUT_PAD], attrs[STRIDE])):
        return f"outputPadding {list(attrs[OUT_PAD])}: each value in [0, stride) (stride {list(attrs[STRIDE])})"
    if not 1 <= int(attrs[GROUPS]) <= 65535:
        return f"groups {attrs[GROUPS]}: must be in [1, 65535]"
    if not 0 <= int(attrs[MATH]) <= 3:
        return f"cubeMathType {attrs[MATH]}: must be 0 (KEEP_DTYPE), 1, 2 or 3"
    return None


def shape_rule(d, attrs) -> str | None:
    """CheckParams in its order after the dtype lists, each 161002 (a true outputMask entry beside a null output is
    161001 in the source: reported here as 161002, as LayerNormBackward does; no bundled case relies on it)."""
    mask = tuple(attrs[MASK])
    for k, name in enumerate(OUTPUTS):
        if mask[k] and d[name].null:
            return f"{name} is a null pointer while outputMask[{k}] is true"
    for name, of in ((GI, X), (GW, W), (GB, GRAD)):
        if not d[name].null and d[name].dtype != d[of].dtype:
            return f"{name} dtype {d[name].dtype.name} is not {of}'s {d[of].dtype.name}"
    x, w, g = (tuple(d[n].shape) for n in (X, W, GRAD))
    if not 3 <= len(x) <= 5:
        return f"input has {len(x)} dims; it takes 3 (NCL), 4 (NCHW) or 5 (NCDHW)"
    sp = len(x) - 2
    for name in (STRIDE, DILATION):
        if len(attrs[name]) != sp:
            return f"{name} has {len(attrs[name])} values; a {len(x)}-d input takes {sp}"
    if len(attrs[PADDING]) != sp and not (sp == 2 and len(attrs[PADDING]) == 4):
        return f"padding has {len(attrs[PADDING])} values; a {len(x)}-d input takes {sp}" + (" or 4" if sp == 2 else "")
    if len(attrs[OUT_PAD]) != sp and not (sp == 2 and len(attrs[OUT_PAD]) == 4):
        return f"outputPadding has {len(attrs[OUT_PAD])} values; a {len(x)}-d input takes {sp}"
    if len(g) != len(x) or len(w) != len(x):
        return f"gradOutput {list(g)}, input {list(x)} and weight {list(w)} must have the same number of dims"
    if 0 in g or 0 in w:
        return f"gradOutput {list(g)} or weight {list(w)} is empty"
    for name, want in ((GI, x), (GW, w)):
        if not d[name].null and tuple(d[name].shape) != want:
            return f"{name} shape {list(d[name].shape)} is not {list(want)}"
    if not d[GB].null and tuple(d[GB].shape) != (g[1],):
        return f"gradBias shape {list(d[GB].shape)} is not [{g[1]}] (gradOutput's channels)"
    inner, outer = (g, x) if attrs[TRANSPOSED] else (x, g)  # (CheckConvChannelAndGroup exchanges them)
    if outer[1] != w[0]:
        return f"{'input' if attrs[TRANSPOSED] else 'gradOutput'}'s channels {outer[1]} are not weight's first dim {w[0]}"
    if w[1] == 0 or inner[1] % w[1] or inner[1] // w[1] != int(attrs[GROUPS]):
        return (f"{'gradOutput' if attrs[TRANSPOSED] else 'input'}'s channels {inner[1]} are not groups "
                f"{attrs[GROUPS]} x weight's second dim {w[1]}")
    pad = padding_sides(attrs[PADDING], sp)
    if len(attrs[OUT_PAD]) == sp and not (attrs[TRANSPOSED] and len(attrs[PADDING]) != sp):
        if attrs[TRANSPOSED]:
            want = transposed_output_sizes(x[2:], w[2:], attrs[STRIDE], pad, attrs[DILATION], attrs[OUT_PAD])
        else:
            want = conv_output_sizes(x[2:], w[2:], attrs[STRIDE], pad, attrs[DILATION])
        if min(want) < 1:
            return (f"weight {list(w)} with dilation {list(attrs[DILATION])} spans more than input {list(x)} padded by "
                    f"{list(attrs[PADDING])}: the forward's output would be {list(want)} (the doc's 公式一)")
        if tuple(g[2:]) != want or g[0] != x[0]:
            return f"gradOutput shape {list(g)} is not the forward's [{x[0]}, {g[1]}, {', '.join(map(str, want))}]"
    return None
