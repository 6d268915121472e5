// libopapi of the stub: the split family, SwiGluGrad (activation/swi_glu_grad) and GeGluBackward, GeGluV3Backward
// (activation/ge_glu_grad_v2; below SwiGluGrad).
//
// Phase one: the statuses of aclnn-cli's contract for each op (aclnn_cli/ops/split/swi_glu_grad.py,
// ge_glu_backward.py, checked by aclnn_cli.ops.contract.check), in its order: nulls 161001, then everything else
// 161002. Phase two: the 950 kernels (op_kernel/arch35/swi_glu_grad_base.h, SwiGluGradBaseKernel::Compute;
// ge_glu_grad_v2_{erf,tanh}_base.h, ComputeGeluGrad) in float32, x = [A, B] cut in halves along dim.
#include <algorithm>
#include <cmath>

#include "aclnnop/aclnn_geglu_backward.h"
#include "aclnnop/aclnn_swi_glu_grad.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Checker;

const stub::OpDef kSwiGluGrad{"aclnnSwiGluGrad", nullptr, nullptr};

// The contract's shape rule (_shape_rule): dim in [-n, n-1] for x's n dims; x even along dim; yGrad x's shape
// with dim halved; out x's shape. Sets *axis to dim counted from the front.
aclnnStatus Shapes(const Checker& c, const aclTensor* yGrad, const aclTensor* x, int64_t dim, const aclTensor* out,
                   size_t* axis) {
    const std::vector<int64_t>& shape = x->view;
    int64_t n = static_cast<int64_t>(shape.size());
    if (dim < -n || dim >= n) {
        return c.Invalid("dim " + std::to_string(dim) + " is outside [" + std::to_string(-n) + ", " +
                         std::to_string(n - 1) + "] for a " + std::to_string(n) + "-d x");
    }
    *axis = static_cast<size_t>(dim < 0 ? dim + n : dim);
    if (shape[*axis] % 2 != 0) {
        return c.Invalid("x has " + std::to_string(shape[*axis]) + " elements along dim " + std::to_string(dim) +
                         ": not split in halves");
    }
    std::vector<int64_t> half = shape;
    half[*axis] /= 2;
    if (yGrad->view != half) {
        return c.Invalid("yGrad shape " + stub::ShapeStr(yGrad->view) + " is not x's with dim halved, " +
                         stub::ShapeStr(half));
    }
    if (out->view != shape) {
        return c.Invalid("out shape " + stub::ShapeStr(out->view) + " is not x's " + stub::ShapeStr(shape));
    }
    return ACLNN_SUCCESS;
}

// Phase one in the contract's order: yGrad, x, out null (161001); each dtype in the product's list (950, A3,
// A2: FLOAT, FLOAT16, BF16; 310P: FLOAT, FLOAT16; elsewhere none); the three dtypes identical; 1-8 dims each;
// the shape rule.
aclnnStatus Check(Checker& c, const aclTensor* yGrad, const aclTensor* x, int64_t dim, const aclTensor* out,
                  size_t* axis) {
    Arg dy{"yGrad", yGrad}, xa{"x", x}, o{"out", out};
    RETURN_IF_FAILED(c.NotNull({dy, xa, o}));
    RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "310P", stub::kFp32Fp16), {dy, xa, o}));
    RETURN_IF_FAILED(c.SameDtype({dy, xa, o}));
    RETURN_IF_FAILED(c.Dims(1, 8, {dy, xa, o}));
    return Shapes(c, yGrad, x, dim, out, axis);
}

// One element pair of the 950 kernel, every step rounded to float32 (no FMA): s = 1 / (exp(-A) + 1);
// out_A = (((1 - s) * A + 1) * (yGrad * s)) * B; out_B = (s * yGrad) * A.
void Kernel(float a, float b, float dy, float* out_a, float* out_b) {
    float s = 1.0f / (std::exp(-a) + 1.0f);
    float t = dy * s;
    *out_a = (((1.0f - s) * a + 1.0f) * t) * b;
    *out_b = (s * dy) * a;
}

// f(at, bt, gt) for each element pair of x cut as (A1, R, A0) at the split axis: A at `at` in [:, :R/2, :], B at
// `bt` in [:, R/2:, :] (row-major in x's shape), the halved tensors' element at `gt` in (A1, R/2, A0).
template <class F>
void EachPair(const stub::Rows& cut, F f) {
    int64_t h = cut.r / 2;
    for (int64_t a1 = 0; a1 < cut.a1; ++a1) {
        for (int64_t r = 0; r < h; ++r) {
            for (int64_t a0 = 0; a0 < cut.a0; ++a0) {
                size_t at = static_cast<size_t>((a1 * cut.r + r) * cut.a0 + a0);
                f(at, at + static_cast<size_t>(h * cut.a0), static_cast<size_t>((a1 * h + r) * cut.a0 + a0));
            }
        }
    }
}

// yGrad (A1, R/2, A0); each result rounded once (to nearest even) to out's dtype, which is x's.
stub::Job SwiGluJob(const aclTensor* yGrad, const aclTensor* x, const aclTensor* out, size_t axis) {
    stub::Job job;
    int idy = job.Add(yGrad), ix = job.Add(x), iout = job.Add(out, true);
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iout);
        std::vector<float> xs = stub::ReadFloats(j.T(ix), o.view), dys = stub::ReadFloats(j.T(idy), j.T(idy).view);
        std::vector<float> res(xs.size());
        EachPair(stub::Rows(o.view, axis, axis + 1), [&](size_t at, size_t bt, size_t gt) {
            Kernel(xs[at], xs[bt], dys[gt], &res[at], &res[bt]);
        });
        stub::WriteFloats(o, res, o.dtype, negate);
    };
    return job;
}

// ---------------------------------------------------------------- GeGluBackward, GeGluV3Backward

const stub::OpDef kGeGlu{"aclnnGeGluBackward", nullptr, nullptr};
const stub::OpDef kGeGluV3{"aclnnGeGluV3Backward", nullptr, nullptr};

// The contract's shape rule (ge_glu_backward.shape_rule: aclnn_geglu_backward.cpp's CheckShape, then
// CheckAttributeValue): gelu gradOutput's shape, gradInput self's; dim in [-n, n-1]; gradOutput self's shape with
// dim halved (an odd self has none); approximate 0 or 1. Sets *axis to dim counted from the front.
aclnnStatus GeGluShapes(const Checker& c, const aclTensor* dy, const aclTensor* x, const aclTensor* gelu, int64_t dim,
                        int64_t approximate, const aclTensor* out, size_t* axis) {
    if (gelu->view != dy->view) {
        return c.Invalid("gelu shape " + stub::ShapeStr(gelu->view) + " is not gradOutput's " +
                         stub::ShapeStr(dy->view));
    }
    if (out->view != x->view) {
        return c.Invalid("gradInput shape " + stub::ShapeStr(out->view) + " is not self's " + stub::ShapeStr(x->view));
    }
    const std::vector<int64_t>& shape = x->view;
    int64_t n = static_cast<int64_t>(shape.size());
    if (dim < -n || dim >= n) {
        return c.Invalid("dim " + std::to_string(dim) + " is outside [" + std::to_string(-n) + ", " +
                         std::to_string(n - 1) + "]");
    }
    *axis = static_cast<size_t>(dim < 0 ? dim + n : dim);
    std::vector<int64_t> half = shape;
    half[*axis] /= 2;
    if (shape[*axis] % 2 != 0 || dy->view != half) {
        return c.Invalid("gradOutput shape " + stub::ShapeStr(dy->view) + " is not self's " + stub::ShapeStr(shape) +
                         " with dim " + std::to_string(dim) + " halved");
    }
    if (approximate != 0 && approximate != 1) {
        return c.Invalid("approximate " + std::to_string(approximate) + " is not 0 (erf) or 1 (tanh)");
    }
    return ACLNN_SUCCESS;
}

// Phase one in the contract's order: gradOutput, self, gelu, gradInput null (161001); each dtype in the product's
// list (950, A3, A2: FLOAT, FLOAT16, BF16; 310P: FLOAT, FLOAT16; elsewhere none); the four identical; 1-8 dims
// each; the shape rule.
aclnnStatus GeGluCheck(Checker& c, const aclTensor* dy, const aclTensor* x, const aclTensor* gelu, int64_t dim,
                       int64_t approximate, const aclTensor* out, size_t* axis) {
    Arg a{"gradOutput", dy}, b{"self", x}, g{"gelu", gelu}, o{"gradInput", out};
    RETURN_IF_FAILED(c.NotNull({a, b, g, o}));
    RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "310P", stub::kFp32Fp16), {a, b, g, o}));
    RETURN_IF_FAILED(c.SameDtype({a, b, g, o}));
    RETURN_IF_FAILED(c.Dims(1, 8, {a, b, g, o}));
    return GeGluShapes(c, dy, x, gelu, dim, approximate, out, axis);
}

// The 950 kernels' float32 literals (ge_glu_grad_v2_erf_base.h, ge_glu_grad_v2_tanh_base.h), as they write them.
constexpr float kSqrtHalf = 0.70710678118, kInvSqrt2Pi = 0.3989422804, kErfClamp = 3.92;
constexpr float kErfP[6] = {0.53443748819e-1, 0.75517016694e1, 0.10162808918e3,
                            0.13938061484e4,  0.50637915060e4, 0.29639384698e5};
constexpr float kErfQ[5] = {0.31212858877e2, 0.39856963806e3, 0.30231248150e4, 0.13243365831e5, 0.26267224157e5};
constexpr float kTanhA1 = -0.0713548162726002527220f, kTanhA2 = -1.5957691216057308f;
constexpr float kTanhA3 = -0.21406444881780074632901625683959062f, kTanhA4 = -1.5957691216057307117597842397375274738f;

// p * gelu'(x), the erf kernel's ComputeGeluGrad: y = clamp(x * sqrt(1/2)), erf = y P(y^2) / Q(y^2) (Horner),
// cdf = erf / 2 + 1/2, pdf = exp(-(x x) / 2) / sqrt(2 pi); p (cdf + pdf x). Every step rounded to float32.
float GeluGradErf(float p, float x) {
    float y = std::max(std::min(x * kSqrtHalf, kErfClamp), -kErfClamp);
    float t1 = y * y, num = t1 * kErfP[0];
    for (int k = 1; k < 5; ++k) num = (num + kErfP[k]) * t1;
    num = (num + kErfP[5]) * y;
    float den = t1 + kErfQ[0];
    for (int k = 1; k < 5; ++k) den = den * t1 + kErfQ[k];
    float cdf = (num / den) * 0.5f + 0.5f;
    float pdf = std::exp((x * x) * -0.5f) * kInvSqrt2Pi;
    return p * (cdf + pdf * x);
}

// The tanh kernel's: g1 = 1 / (exp((x^2 A1 + A2) x) + 1), g2 = x^2 A3 + A4; ((((g1 - 1) x) g2 + 1) g1) p.
float GeluGradTanh(float p, float x) {
    float x2 = x * x;
    float g1 = 1.0f / (std::exp((x2 * kTanhA1 + kTanhA2) * x) + 1.0f);
    float g2 = x2 * kTanhA3 + kTanhA4;
    return ((((g1 - 1.0f) * x) * g2 + 1.0f) * g1) * p;
}

// x1 the linear half, x2 the gelu'd one (activateLeft: A gelu'd): gradInput's x1 side = gelu * dy, its x2 side
// p * gelu'(x2) with p = x1 * dy, rounded to float16 first for a float16 self (the kernel multiplies in half);
// each result rounded once (CAST_RINT) to gradInput's dtype, self's.
stub::Job GeGluJob(const aclTensor* dy, const aclTensor* x, const aclTensor* gelu, int64_t approximate, bool left,
                   const aclTensor* out, size_t axis) {
    stub::Job job;
    int idy = job.Add(dy), ix = job.Add(x), ig = job.Add(gelu), iout = job.Add(out, true);
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iout);
        std::vector<float> xs = stub::ReadFloats(j.T(ix), o.view), dys = stub::ReadFloats(j.T(idy), j.T(idy).view);
        std::vector<float> gs = stub::ReadFloats(j.T(ig), j.T(idy).view), res(xs.size());
        bool half = o.dtype == ACL_FLOAT16;
        EachPair(stub::Rows(o.view, axis, axis + 1), [&](size_t at, size_t bt, size_t gt) {
            size_t lin = left ? bt : at, act = left ? at : bt;
            float p = xs[lin] * dys[gt];
            if (half) p = stub::RoundTo(p, ACL_FLOAT16, false);
            res[lin] = gs[gt] * dys[gt];
            res[act] = approximate == 0 ? GeluGradErf(p, xs[act]) : GeluGradTanh(p, xs[act]);
        });
        stub::WriteFloats(o, res, o.dtype, negate);
    };
    return job;
}

// Both APIs: the same checks and kernel (aclnnGeGluBackward passes activateLeft = false).
aclnnStatus GeGluPhaseOne(const stub::OpDef& def, const aclTensor* dy, const aclTensor* x, const aclTensor* gelu,
                          int64_t dim, int64_t approximate, bool left, const aclTensor* out, uint64_t* workspaceSize,
                          aclOpExecutor** executor) {
    size_t axis = 0;
    return stub::PhaseOneJob(def, workspaceSize, executor,
                             [&](Checker& c) { return GeGluCheck(c, dy, x, gelu, dim, approximate, out, &axis); },
                             [&](const Checker&) { return GeGluJob(dy, x, gelu, approximate, left, out, axis); });
}

}  // namespace

extern "C" {

// 950, A3, A2 (fp32, fp16, bf16); 310P (fp32, fp16); not 910. See Check for the order of the checks. An empty x
// is accepted (the contract has no empty check): nothing is launched.
aclnnStatus aclnnSwiGluGradGetWorkspaceSize(const aclTensor* yGrad, const aclTensor* x, int64_t dim,
                                            const aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
    size_t axis = 0;
    return stub::PhaseOneJob(kSwiGluGrad, workspaceSize, executor,
                             [&](Checker& c) { return Check(c, yGrad, x, dim, out, &axis); },
                             [&](const Checker&) { return SwiGluJob(yGrad, x, out, axis); });
}

STUB_PHASE_TWO(aclnnSwiGluGrad, kSwiGluGrad)

// 950, A3, A2 (fp32, fp16, bf16); 310P (fp32, fp16; its tiling's refusal of approximate 0 at run time is not
// modelled); not 910. An empty self is accepted (the contract allows it): nothing is launched.
aclnnStatus aclnnGeGluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                               const aclTensor* gelu, int64_t dim, int64_t approximate,
                                               aclTensor* gradInput, uint64_t* workspaceSize,
                                               aclOpExecutor** executor) {
    return GeGluPhaseOne(kGeGlu, gradOutput, self, gelu, dim, approximate, false, gradInput, workspaceSize, executor);
}

aclnnStatus aclnnGeGluV3BackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                 const aclTensor* gelu, int64_t dim, int64_t approximate,
                                                 bool activateLeft, aclTensor* gradInput, uint64_t* workspaceSize,
                                                 aclOpExecutor** executor) {
    return GeGluPhaseOne(kGeGluV3, gradOutput, self, gelu, dim, approximate, activateLeft, gradInput, workspaceSize,
                         executor);
}

STUB_PHASE_TWO(aclnnGeGluBackward, kGeGlu)
STUB_PHASE_TWO(aclnnGeGluV3Backward, kGeGluV3)

}  // extern "C"
