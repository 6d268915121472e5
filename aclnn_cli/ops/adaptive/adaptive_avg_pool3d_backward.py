"""aclnnAdaptiveAvgPool3dBackward: the gradient of 3-D adaptive average pooling.

    out[n, c, d, h, w] = sum over the windows (od, oh, ow) covering (d, h, w) of gradOutput[n, c, od, oh, ow] / K,
    K = kD(od) kH(oh) kW(ow), window od covering [floor(od D / Do), ceil((od + 1) D / Do)), and so on (pooling.py)

hicann/ops-nn pooling/adaptive_avg_pool3d_grad/docs/aclnnAdaptiveAvgPool3dBackward.md: gradOutput, self, out float32,
float16, bfloat16, NCDHW or ND, 4-5 dims (CDHW, NCDHW). op_api/aclnn_adaptive_avg_pool3d_backward.cpp CheckParams:
nulls (gradOutput, self, out) 161001; then 161002 (CheckInputOutDims) for self not 4-d or 5-d, gradOutput or out of
other dims, a dim of self not > 0 or not out's (from dim 1 on the 950: N may be 0 there, as the doc says), gradOutput's
leading axes not self's, a spatial size of gradOutput not > 0; (CheckDtypeValid) a dtype outside the list (on 950, A3,
A2: FLOAT, FLOAT16, BF16, and DOUBLE for a 1 x 1 x 1 gradOutput, which no case here is generated in) or the three not
one dtype; formats that differ. 910 takes 1 x 1 x 1 gradOutputs only, 310P has no binary of the kernel: neither is
declared. An empty self (N = 0) computes nothing.

A 1 x 1 x 1 gradOutput: a Fill of fl_T(1.0 / (D H W)) in self's dtype and a Mul (every product; pooling.py's global
path). Else on the 950 (IsRegbase) AdaptiveAvgPool3dGrad on the tensors as they are (op_kernel/arch35): the tiling
takes the big kernel (kD kH kW >= 256 and kW > 256 / bytes / 2, k = ceil(self / gradOutput) per axis; an NCDHW
input only) or the NCDHW small kernel (`_small_capable`), else the SIMT kernel (AdaptiveAvgPool3dGradNcdhw). The SIMT
and big kernels add fl(g / fl(K)), the small kernel fl(g fl(1 / K)) (16-bit inputs widened to float32 first), each
position's windows od outer, ow inner, in float32; one cast to the dtype (CAST_RINT). A3 and A2 transpose DHW to the
front and run the older AdaptiveAvgPool3dGrad (fl(g fl(1 / K)), atomic adds in any order): within the allowance's two
roundings per term, not emulated. The golden is the exact sum rounded once.
"""

from __future__ import annotations

import numpy as np

from ..base import Contract, OpSpec, TensorSpec, products
from ..families import Adaptive
from ..registry import register
from . import pooling as A
from ..window import pool

GRAD, SELF, OUT = "gradOutput", "self", "out"
FAMILY = Adaptive(driver=SELF, grad=GRAD, spatial=3, precision=A.PRECISION)
TERM_ROUNDINGS = 2  # the small kernel's fl(1 / K) and its product by g
UB, VREG, BLOCK, RESERVED = 196608, 256, 32, 4096  # (the 950 as the 2-D op's tiling UT gives it)
RANK = "rank"  # a case value: self's dims (the big and small kernels take NCDHW, a 5-d tensor, only)


def _case_values(shapes) -> dict:
    drv = tuple(shapes.get(SELF) or ())
    return {**pool.depths(FAMILY)(shapes), **A.planes(FAMILY)(shapes), RANK: len(drv)}


def _ceil(a: int, b: int) -> int:
    return -(-a // max(b, 1))


def _small_capable(g, x, nc: int, nbytes: int) -> bool:
    """AdaptiveAvgPool3dGradTilingSmallKernel::IsCapable (gradInput: gradOutput's (D, H, W) g; gradOutput: self's x)."""
    kernel = int(np.prod([_ceil(xi, gi) for xi, gi in zip(x, g)]))
    if kernel >= 256 or nc < 128 or int(np.prod(g)) < 16 or g[2] < (8 if nbytes == 4 else 16):
        return False
    col, high = BLOCK // nbytes, VREG // nbytes  # DoBufferCalculate at one output row and column
    w_in = _ceil(_ceil(g[2], x[2]) + 1, col) * col
    in_bytes = high * (_ceil(g[0], x[0]) + 1) * (_ceil(g[1], x[1]) + 1) * w_in * nbytes
    out_bytes = _ceil(col, 16) * 16 * high * nbytes
    que = [-(-b // BLOCK) * BLOCK for b in (in_bytes, max(in_bytes, out_bytes), out_bytes)]
    scratch = 0 if nbytes == 4 else (que[1] // nbytes + que[2] // nbytes) * 4
    return 2 * sum(que) + scratch <= UB - RESERVED


def path(x, g, nc: int, p: int, rank: int) -> str:
    """The 950's term form for self volumes x, gradOutput volumes g (D, H, W each), N C volumes, p significand bits,
    self's rank: "recip" on the small kernel, else "div"."""
    nbytes = 4 if p == 24 else 2
    k = [_ceil(xi, gi) for xi, gi in zip(x, g)]
    if rank != 5 or (int(np.prod(k)) >= 256 and k[2] > VREG // nbytes // 2):
        return "div"  # (the SIMT kernel; the big kernel)
    return "recip" if _small_capable(g, x, nc, nbytes) else "div"


def _kernel(t):
    """The op_api's global path, or the 950's kernel the tiling picks (`path`), the windows od outer, ow inner."""
    axes = pool.windows(FAMILY, t)
    form = path([a.n for a in axes], [a.out for a in axes], int(t.get(A.PLANES, 1)), A.bits(t), int(t.get(RANK, 5)))
    return A.compute(FAMILY, t, form)


def _ieee(t):
    return A.compute(FAMILY, t, "div", dtype=np.float64)


@A.legitimate
def _reciprocal(t):
    """Legitimate: every term fl(g fl(1 / K)) (the small kernel's, and A2's and A3's)."""
    return A.compute(FAMILY, t, "recip", global_ok=False)


@A.defect
def _depth_divisor_dropped(t):
    """Defect: each window divided by kH kW only (a 2-D kernel's divisor: the depth's size left out)."""
    axes = pool.windows(FAMILY, t)
    g = A.grad(FAMILY, t, axes, A.F32)
    with np.errstate(all="ignore"):
        x = g / pool.divisors(axes[1:], False, 0)[None, None].astype(A.F32)
    return A.sums(x, axes).reshape(np.shape(t[SELF]))


VARIANTS = {**A.variants("adaptive3d", FAMILY, "div"), "adaptive3d-reciprocal": _reciprocal,
            "adaptive3d-depth-divisor-dropped": _depth_divisor_dropped}


def _shape_rule(descs, attrs) -> str | None:
    """CheckInputOutDims: self 4-d or 5-d, gradOutput and out as many dims; out self's shape; gradOutput's leading
    axes self's and its D, H, W each > 0; self's axes > 0 but N (the 950's rule)."""
    g, s, o = (tuple(descs[n].shape) for n in (GRAD, SELF, OUT))
    if len(g) != len(s) or len(o) != len(s):
        return f"gradOutput {list(g)}, self {list(s)} and out {list(o)} must have as many dims"
    if min(s[1:], default=1) <= 0:
        return f"self {list(s)}: every axis but N must be > 0"
    if o != s:
        return f"out's shape {list(o)} is not self's {list(s)}"
    if g[:-3] != s[:-3]:
        return f"gradOutput's leading axes {list(g[:-3])} are not self's {list(s[:-3])}"
    if min(g[-3:]) <= 0:
        return f"gradOutput {list(g)}: its D, H and W must be > 0"
    return None


SPEC = register(OpSpec(
    name="aclnnAdaptiveAvgPool3dBackward",
    key="adaptive_avg_pool3d_backward",
    header="aclnnop/aclnn_adaptive_avg_pool3d_backward.h",
    summary="Gradient of 3-D adaptive average pooling: each input position sums the gradients of the adaptive windows "
            "covering it, each divided by its window's size.",
    formula="out[n, c, d, h, w] = sum over windows (od, oh, ow) covering (d, h, w) of gradOutput[n, c, od, oh, ow] / "
            "(kD kH kW); window od covers [floor(od D / Do), ceil((od + 1) D / Do))",
    tensors=(
        TensorSpec(GRAD, "input", {"normal": [0, 1]}, formats={5: "NCDHW"}),
        TensorSpec(SELF, "input", {"normal": [0, 1]}, read_by_kernel=False, formats={5: "NCDHW"}),
        TensorSpec(OUT, "output", {"constant": 0}, formats={5: "NCDHW"}),
    ),
    products=products("950", "A3", "A2"),
    dims=(4, 5),
    empty_ok=True,
    family=FAMILY,
    case_values=_case_values,
    **A.functions(FAMILY, TERM_ROUNDINGS, OUT),  # (reference, exact, exact_at, edge)
    kernel=_kernel,
    ieee=_ieee,
    variants=VARIANTS,
    aliases={"Input": SELF},
    contract=Contract(dtypes="same", shape_rule=_shape_rule),
    special_values="The doc defines none; IEEE: an inf or NaN in gradOutput reaches every position its windows cover "
                   "(inf - inf in one sum gives NaN).",
))
