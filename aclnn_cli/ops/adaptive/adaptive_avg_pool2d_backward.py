"""aclnnAdaptiveAvgPool2dBackward: the gradient of 2-D adaptive average pooling.

    out[n, c, h, w] = sum over the windows (oh, ow) covering (h, w) of gradOutput[n, c, oh, ow] / (kH(oh) kW(ow)),
    window oh covering rows [floor(oh H / Ho), ceil((oh + 1) H / Ho)), ow columns likewise (ops/adaptive/pooling.py)

hicann/ops-nn pooling/adaptive_avg_pool2d_grad/docs/aclnnAdaptiveAvgPool2dBackward.md: gradOutput, self, out float32,
float16, bfloat16 (950, A3, A2; no bfloat16 on 910 and 310P), ND, NCHW or NCL, 3-4 dims. op_api/
aclnn_adaptive_avg_pool2d_backward.cpp CheckParams: nulls (gradOutput, self, out) 161001; then 161002 for gradOutput's
dims not self's, out's dims not 3 or 4 or not self's, out's or gradOutput's leading (N, C) axes not self's, a dtype
outside the list (bfloat16 only on SoCs in [ASCEND910B, ASCEND910E]), gradOutput's dtype not self's, formats that
differ. out's dtype and spatial sizes are not checked there (the result is ViewCopied into it): the cases keep out
self's shape and dtype (the family refuses another shape). An empty self or gradOutput returns at once, computing
nothing (the family refuses an empty gradOutput beside a non-empty self: out would keep what it held).

gradOutput of 1 x 1 planes: a Fill of fl_T(1.0 / (H W)) in self's dtype and a Mul (every product; the global path of
ops/adaptive/pooling.py). Else on the 950 (IsRegbase) the AdaptiveAvgPool2dGrad kernel (op_kernel/arch35), whose tiling
(op_host/arch35) takes the first capable of: the big kernel (priority 10: kH kW >= 256 and kW > 256 / bytes / 2,
kH = ceil(H / Ho)), the NCHW small kernel (20: `_small_capable`), the SIMT kernels (50: `_simt`). Each forms its terms
and adds them as `_path` says (ops/adaptive/pooling.py's table); the output is cast once (CAST_RINT). A3 and A2 run
AdaptiveAvgPool3dGrad on a unit depth (fl(g fl(1 / K)), atomic adds), 910 and 310P two batch matmuls with the
assist matrices: not emulated (their float32 terms are inside the allowance's four roundings; the 16-bit matmul
path is not). The golden is the exact sum rounded once.
"""

from __future__ import annotations

from ..base import Contract, OpSpec, TensorSpec, products
from ..families import Adaptive
from ..registry import register
from . import pooling as A

GRAD, SELF, OUT = "gradOutput", "self", "out"
FAMILY = Adaptive(driver=SELF, grad=GRAD, precision=A.PRECISION)
TERM_ROUNDINGS = 4  # the small kernel's fl(1 / kH), fl(1 / kW), their product, the product by g
# The 950's platform as the tiling's UT gives it (tests/ut/op_host/arch35: UB_SIZE 196608; a 256-byte vector
# register, 32-byte UB blocks); the tiling reserves 2048 + 2048 bytes of UB.
UB, VREG, BLOCK, RESERVED = 196608, 256, 32, 4096


def _ceil(a: int, b: int) -> int:
    return -(-a // max(b, 1))


def _align(a: int, b: int) -> int:
    return _ceil(a, b) * b


def _small_capable(gh: int, gw: int, xh: int, xw: int, nc: int, nbytes: int) -> bool:
    """AdaptiveAvgPool2dGradTilingSmallKernel::IsCapable (gradInput: gradOutput (gh, gw); gradOutput: self (xh, xw))."""
    if (gh > xh and gw <= xw and gw <= 4 and (gh >= xh * 4 or xh <= 64)) or \
            (xh > gh and xw <= gw and xw <= 4 and (xh >= gh * 4 or gh <= 64)):
        return False  # (preferSimtInputAsGradY, preferSimtOutputAsGradY)
    kernel = _ceil(xh, gh) * _ceil(xw, gw)
    if kernel >= 256 or nc < 128 or gh * gw < 16 or gw < (8 if nbytes == 4 else 16):
        return False
    both_up = xh > gh and xw > gw and nc <= 700 and xh * xw >= gh * gw * 3
    h_up_w_down = xh > gh and xw < gw and xh >= gh * 4 and gw >= xw * 3
    h_down_w_up = xh < gh and xw > gw and gh >= xh * 3 and xw * 2 >= gw * 3
    if kernel <= 7 and 128 <= nc <= 4096 and xh != gh and xw != gw and (both_up or h_up_w_down or h_down_w_up):
        return False  # (preferSimtUnfriendlyResize)
    col = BLOCK // nbytes  # DoBufferCalculate at highAxisInner 256 / bytes, one output row and column
    high = VREG // nbytes
    in_elems = high * (_ceil(gh, xh) + 1) * _align(_ceil(gw, xw) + 1, col)
    out_elems = _align(col, 16) * high
    total = 2 * (_align(in_elems * nbytes, BLOCK) + _align(max(in_elems, out_elems) * 4, BLOCK)
                 + _align(out_elems * 4, BLOCK))
    return total <= UB - RESERVED


def _simt(xh: int, xw: int, gh: int, gw: int) -> tuple[str, str]:
    """AdaptiveAvgPool2dGradSimt::Process's choice (inH, inW: self's; outH, outW: gradOutput's): (form, order)."""
    if xh == 1:
        return "w_div_h", "columns"  # (HInOne: every window one row)
    if gh > xh and gw <= xw and ((gw in (2, 4) and xw >= 32) or (gw == 3 and xw >= 24)):
        return "h_recip_w", "rows"  # (SmallOutWSegFast)
    if gh > xh and gw == 2 and 2 <= xw <= 16:
        return "h_recip_w", "column-sums"  # (SmallOutWRow; HExpandW2SmallFast where gh >= 1024 xh, in groups of 4)
    if gh > xh and gw <= xw:
        return "w_div_h", "columns"  # (HExpandExactOutWSmallFast at xh 2, gh 24; OutWSmall)
    return "h_div_w", "rows"  # (HReduceWExpandFast where gw >= 4 xw; AdaptiveAvgPool2dGradNchw)


def path(xh: int, xw: int, gh: int, gw: int, nc: int, p: int) -> tuple[str, str]:
    """The 950's kernel for self planes (xh, xw), gradOutput planes (gh, gw), N C planes, p significand bits:
    (term form, order)."""
    nbytes = 4 if p == 24 else 2
    kh, kw = _ceil(xh, gh), _ceil(xw, gw)
    if kh * kw >= 256 and kw > VREG // nbytes // 2:
        return "div", "rows"  # (the big kernel: Div by the window's size, the windows in order)
    if _small_capable(gh, gw, xh, xw, nc, nbytes):
        return "recip2", "rows"
    return _simt(xh, xw, gh, gw)


def _kernel(t):
    """The op_api's global path, or the 950's kernel the tiling picks (`path`)."""
    ah, aw = A.pool.windows(FAMILY, t)
    form, order = path(ah.n, aw.n, ah.out, aw.out, int(t.get(A.PLANES, 1)), A.bits(t))
    return A.compute(FAMILY, t, form, order)


def _ieee(t):
    return A.compute(FAMILY, t, "div", dtype=A.np.float64)


@A.legitimate
def _small_kernel(t):
    """Legitimate: every term fl(g fl(fl(1 / kH) fl(1 / kW))) (the small kernel's four roundings)."""
    return A.compute(FAMILY, t, "recip2", global_ok=False)


@A.legitimate
def _column_sums(t):
    """Legitimate: each window column summed over its rows first, then the columns (SmallOutWRow)."""
    return A.compute(FAMILY, t, "h_recip_w", order="column-sums", global_ok=False)


VARIANTS = {**A.variants("adaptive2d", FAMILY, "h_div_w"), "adaptive2d-small-kernel": _small_kernel,
            "adaptive2d-column-sums": _column_sums}


def _shape_rule(descs, attrs) -> str | None:
    """CheckInputDims and CheckInputOutputShape: gradOutput's dims self's; out 3-d or 4-d, self's dims; the leading
    axes (all but H and W) of out and gradOutput self's."""
    g, s, o = (tuple(descs[n].shape) for n in (GRAD, SELF, OUT))
    if len(g) != len(s):
        return f"gradOutput {list(g)} and self {list(s)} must have as many dims"
    if len(o) != len(s):
        return f"out {list(o)} and self {list(s)} must have as many dims"
    if o[:-2] != s[:-2] or g[:-2] != s[:-2]:
        return f"the N, C axes of out {list(o[:-2])} and gradOutput {list(g[:-2])} must be self's {list(s[:-2])}"
    return None


SPEC = register(OpSpec(
    name="aclnnAdaptiveAvgPool2dBackward",
    key="adaptive_avg_pool2d_backward",
    header="aclnnop/aclnn_adaptive_avg_pool2d_backward.h",
    summary="Gradient of 2-D adaptive average pooling: each input position sums the gradients of the adaptive windows "
            "covering it, each divided by its window's size.",
    formula="out[n, c, h, w] = sum over windows (oh, ow) covering (h, w) of gradOutput[n, c, oh, ow] / (kH(oh) kW(ow)); "
            "window oh covers [floor(oh H / Ho), ceil((oh + 1) H / Ho))",
    tensors=(
        TensorSpec(GRAD, "input", {"normal": [0, 1]}, formats={3: "NCL", 4: "NCHW"}),
        TensorSpec(SELF, "input", {"normal": [0, 1]}, read_by_kernel=False, formats={3: "NCL", 4: "NCHW"}),
        TensorSpec(OUT, "output", {"constant": 0}, formats={3: "NCL", 4: "NCHW"}),
    ),
    products=products("950", "A3", "A2", "910", "310P",
                      overrides={"910": ("float32", "float16"), "310P": ("float32", "float16")}),
    dims=(3, 4),
    empty_ok=True,
    family=FAMILY,
    case_values=A.planes(FAMILY),
    **A.functions(FAMILY, TERM_ROUNDINGS, OUT),  # (reference, exact, exact_at, edge)
    kernel=_kernel,
    ieee=_ieee,
    variants=VARIANTS,
    aliases={"Input": SELF},
    contract=Contract(dtypes="same", out_checked=False, shape_rule=_shape_rule),
    special_values="The doc defines none; IEEE: an inf or NaN in gradOutput reaches every position its windows cover "
                   "(inf - inf in one sum gives NaN).",
))
