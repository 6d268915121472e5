// libopapi of the stub: activation backward operators of ops-nn's activation/ folder (EluBackward,
// HardtanhBackward, SoftshrinkBackward, ThresholdBackward, SeluBackward, MishBackward, MishGrad), and LogitGrad
// (loss/logit_grad), elementwise on (dy, x) as they are (MishGrad's optional tanhx through a Job).
#include <cfloat>
#include <cmath>
#include <vector>

#include "aclnnop/aclnn_elu_backward.h"
#include "aclnnop/aclnn_hardtanh_backward.h"
#include "aclnnop/aclnn_logit_grad.h"
#include "aclnnop/aclnn_mish_backward.h"
#include "aclnnop/aclnn_mish_grad.h"
#include "aclnnop/aclnn_selu_backward.h"
#include "aclnnop/aclnn_softshrink_backward.h"
#include "aclnnop/aclnn_threshold_backward.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Attrs;
using stub::Checker;

// ---------------------------------------------------------------- device kernels (float32)

// elu_grad_v2_dag.h (950): negcoef = alpha * scale (float32, in the tiling; a.alpha holds it);
// x <= 0 ? (isResult: (dy * inputScale) * (x + negcoef); else ((dy * inputScale) * negcoef) * exp(x * inputScale))
//        : dy * scale. NaN x: the compare is false, dy * scale.
float EluGrad(float dy, float x, const Attrs& a) {
    float pos = dy * a.scale;
    float neg = a.is_result ? (dy * a.input_scale) * (x + a.alpha)
                            : ((dy * a.input_scale) * a.alpha) * std::exp(x * a.input_scale);
    return x <= 0.0f ? neg : pos;
}

// hardtanh_grad_dag.h (950): (x < max && x > min) || x != x ? dy : 0 (a literal +0), compared in float32.
float HardtanhGrad(float dy, float x, const Attrs& a) { return ((x < a.hi && x > a.lo) || x != x) ? dy : 0.0f; }

// soft_shrink_grad.h (950): |x| > lambda ? dy : 0, then x != x ? dy : that.
float SoftshrinkGrad(float dy, float x, const Attrs& a) { return (std::fabs(x) > a.lambd || x != x) ? dy : 0.0f; }

// |threshold| <= FLT_EPSILON: relu_grad_dag.h, dy * (x <= 0 ? 0 : 1) (IEEE: -0 for dy < 0, NaN for inf dy);
// otherwise threshold_grad_v2_d_dag.h, x <= threshold ? 0 : dy. NaN x gives dy in both.
float ThresholdGrad(float dy, float x, const Attrs& a) {
    if (a.relu) return dy * (x <= 0.0f ? 0.0f : 1.0f);
    return x <= a.lo ? 0.0f : dy;
}

// Integer dtypes. ReluGrad computes in the dtype (int8/uint8 through half: exact), dy * (x <= 0 ? 0 : 1);
// ThresholdGradV2D casts to float32 (int8/uint8 through half, exact; int32 CAST_RINT, exact to 2^24), selects
// x <= threshold ? 0 : dy there, and casts back (the store saturates: float32(2^31 - 1) is 2^31).
int64_t ThresholdGradInt(int64_t dy, int64_t x, const Attrs& a) {
    if (a.relu) return x <= 0 ? 0 : dy;
    return static_cast<float>(x) <= a.lo ? 0 : static_cast<int64_t>(std::nearbyint(static_cast<float>(dy)));
}

// selu_grad.h (950, SeluGradSelectFp32): y <= 0 ? dy * (y + SCALE_ALPHA_PRODUCT_F) : dy * SCALE_F, y the forward's
// output (NaN y: the compare is false, dy * scale).
float SeluGrad(float dy, float y, const Attrs&) {
    const float scale = 1.0507009873554804934193349852946f, negcoef = 1.7580993408473768599402175208123f;
    float pos = dy * scale;
    float neg = dy * (y + negcoef);
    return y <= 0.0f ? neg : pos;
}

const stub::OpDef kElu{"aclnnEluBackward", EluGrad, nullptr};
const stub::OpDef kSelu{"aclnnSeluBackward", SeluGrad, nullptr};

// mish_grad_dag.h (950, MishGradDAG: no tanhx): t = tanh(softplus(x)) by MishCustom's two branches (x < 0:
// m = e^2x + 2e^x, m / (m + 2); else a = 2e^-x + 1, a / (2e^-2x + a)); MishGradCustom: t - ((t*t - 1)*x) / (e^-x + 1);
// times dy. MishGradFullDAG (a given tanhx) runs MishGradCustom on the given t.
float MishTanhSoftplus(float x) {
    if (x < 0.0f) {
        float m = std::exp(x) * 2.0f + std::exp(x * 2.0f);
        return m / (m + 2.0f);
    }
    float a = std::exp(x * -1.0f) * 2.0f + 1.0f;
    return a / (std::exp(x * -2.0f) * 2.0f + a);
}
float MishGradCustom(float x, float t) { return t - ((t * t - 1.0f) * x) / (std::exp(x * -1.0f) + 1.0f); }
float MishGrad(float dy, float x, const Attrs&) { return MishGradCustom(x, MishTanhSoftplus(x)) * dy; }
const stub::OpDef kMish{"aclnnMishBackward", MishGrad, nullptr};
const stub::OpDef kMishGradOp{"aclnnMishGrad", MishGrad, nullptr};

// aclnnMishGrad's computation: grad, x and (if given) tanhx read in the output's shape, widened to float32.
stub::Job MishGradJob(const aclTensor* grad, const aclTensor* x, const aclTensor* tanhx, const aclTensor* out) {
    stub::Job job;
    int ig = job.Add(grad), ix = job.Add(x), it = job.Add(tanhx), iout = job.Add(out, true);
    if (stub::Numel(out->view) == 0) return job;
    aclDataType compute = out->dtype;
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iout);
        std::vector<float> g = stub::ReadFloats(j.T(ig), o.view), xs = stub::ReadFloats(j.T(ix), o.view);
        std::vector<float> ts = it < 0 ? std::vector<float>() : stub::ReadFloats(j.T(it), o.view);
        for (size_t i = 0; i < g.size(); ++i) {
            float t = it < 0 ? MishTanhSoftplus(xs[i]) : ts[i];
            g[i] = MishGradCustom(xs[i], t) * g[i];
        }
        stub::WriteFloats(o, g, compute, negate);
    };
    return job;
}
const stub::OpDef kHardtanh{"aclnnHardtanhBackward", HardtanhGrad, nullptr};
// logit_grad.h (A2, A3, 950), float32: ComputeStepOne q = dy / (x * (x * -1 + 1)); ComputeStepTwo
// x >= lo && x <= hi ? q : outside, with Init's lo = eps, outside 0 (eps >= 0) or lo = 0, outside NaN (else) and
// hi = 1 - lo in float32. NaN x: both compares false, outside.
float LogitGrad(float dy, float x, const Attrs& a) {
    float q = dy / (x * (x * -1.0f + 1.0f));
    return (x >= a.lo && x <= a.hi) ? q : a.outside;
}

const stub::OpDef kSoftshrink{"aclnnSoftshrinkBackward", SoftshrinkGrad, nullptr};
const stub::OpDef kLogitGrad{"aclnnLogitGrad", LogitGrad, nullptr};
const stub::OpDef kThreshold{"aclnnThresholdBackward", ThresholdGrad, nullptr, ThresholdGradInt};

}  // namespace

// ---------------------------------------------------------------- the public API

extern "C" {

// 950, A3, A2 (fp32, fp16, bf16), 910, 310P (fp32, fp16). selfOrResult's dtype = gradOutput's (first), then
// gradOutput's in the list; alpha, scale, inputScale convertible to FLOAT; gradOutput's dtype CanCast to
// gradInput's (the stub stores FLOAT, FLOAT16, BF16, DOUBLE); shapes identical; gradOutput at most 8 dims;
// isResult with alpha < 0 refused. Computed in gradOutput's dtype, then cast to gradInput's.
aclnnStatus aclnnEluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclScalar* alpha,
                                             const aclScalar* scale, const aclScalar* inputScale, bool isResult,
                                             const aclTensor* selfOrResult, aclTensor* gradInput,
                                             uint64_t* workspaceSize, aclOpExecutor** executor) {
    return stub::PhaseOne(kElu, workspaceSize, executor, gradOutput, selfOrResult, gradInput, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"selfOrResult", selfOrResult}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a}));
        if (alpha == nullptr) return c.Null("alpha");
        if (scale == nullptr) return c.Null("scale");
        if (inputScale == nullptr) return c.Null("inputScale");
        RETURN_IF_FAILED(c.NotNull({b, o}));
        RETURN_IF_FAILED(c.SameDtype({a, b}));
        RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16), {a}));
        float al = 0, sc = 0, is = 0;
        RETURN_IF_FAILED(c.ScalarToFloat("alpha", alpha, &al));
        RETURN_IF_FAILED(c.ScalarToFloat("scale", scale, &sc));
        RETURN_IF_FAILED(c.ScalarToFloat("inputScale", inputScale, &is));
        if (!stub::CanCast(gradOutput->dtype, gradInput->dtype) || !stub::In(gradInput->dtype, stub::kOutputTypes)) {
            return c.Invalid("gradOutput dtype " + stub::DTypeName(gradOutput->dtype) + " cannot be cast to gradInput's " +
                             stub::DTypeName(gradInput->dtype));
        }
        RETURN_IF_FAILED(c.SameShape({a, b, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a}));
        if (isResult && al < 0.0f) return c.Invalid("isResult with a negative alpha");
        c.compute = gradOutput->dtype;
        c.attrs.alpha = al * sc;
        c.attrs.scale = sc;
        c.attrs.input_scale = is;
        c.attrs.is_result = isResult;
        return ACLNN_SUCCESS;
    });
}
STUB_PHASE_TWO(aclnnEluBackward, kElu)

// 950, A3, A2 (fp32, fp16, bf16), 910, 310P (fp32, fp16). self, gradOutput, out, min, max null: 161001 (that
// order); gradOutput's, self's, out's dtype in the list, gradOutput's = self's; gradOutput, self at most 8 dims and
// of one shape. The op_api does not tie out's dtype or shape to the inputs' (the kernel's tiling refuses another
// dtype at launch): the stub refuses both here, with 161002.
aclnnStatus aclnnHardtanhBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                  const aclScalar* min, const aclScalar* max, aclTensor* out,
                                                  uint64_t* workspaceSize, aclOpExecutor** executor) {
    return stub::PhaseOne(kHardtanh, workspaceSize, executor, gradOutput, self, out, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, o{"out", out};
        RETURN_IF_FAILED(c.NotNull({b, a, o}));
        if (min == nullptr) return c.Null("min");
        if (max == nullptr) return c.Null("max");
        RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16), {a, b, o}));
        RETURN_IF_FAILED(c.SameDtype({a, b}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b}));
        RETURN_IF_FAILED(c.SameShape({a, b}));
        RETURN_IF_FAILED(c.SameDtype({a, b, o}));  // (the stub's, not the op_api's: see above)
        RETURN_IF_FAILED(c.SameShape({a, b, o}));
        RETURN_IF_FAILED(c.ScalarToFloat("min", min, &c.attrs.lo));
        return c.ScalarToFloat("max", max, &c.attrs.hi);
    });
}
STUB_PHASE_TWO(aclnnHardtanhBackward, kHardtanh)

// 950, A3, A2 (fp32, fp16, bf16), 910, 310P (fp32, fp16). gradOutput, self, lambda, gradInput null: 161001;
// each dtype in the list (not compared: two input dtypes are both cast to FLOAT); gradOutput, self at most 8 dims,
// broadcast, gradInput the broadcast shape; lambda < 0: 161002. gradInput must be the promoted dtype (the stub's:
// the op_api leaves it to ViewCopy). Computed in the promoted dtype.
aclnnStatus aclnnSoftshrinkBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                    const aclScalar* lambda, aclTensor* gradInput,
                                                    uint64_t* workspaceSize, aclOpExecutor** executor) {
    return stub::PhaseOne(kSoftshrink, workspaceSize, executor, gradOutput, self, gradInput, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a, b}));
        if (lambda == nullptr) return c.Null("lambda");
        RETURN_IF_FAILED(c.NotNull({o}));
        RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16), {a, b, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b}));
        RETURN_IF_FAILED(c.Broadcast(a, b, o));
        RETURN_IF_FAILED(c.ScalarToFloat("lambda", lambda, &c.attrs.lambd));
        if (c.attrs.lambd < 0.0f) return c.Invalid("lambda < 0");
        c.compute = stub::Promote(gradOutput->dtype, self->dtype);
        if (gradInput->dtype != c.compute) {
            return c.Invalid("gradInput dtype " + stub::DTypeName(gradInput->dtype) + " is not the promoted " +
                             stub::DTypeName(c.compute));
        }
        return ACLNN_SUCCESS;
    });
}
STUB_PHASE_TWO(aclnnSoftshrinkBackward, kSoftshrink)

// 950, A3, A2 (fp32, fp16, bf16), 910, 310P (fp32, fp16); all five INT32, INT8, UINT8, and the 950 INT64 when
// |threshold| <= FLT_EPSILON (ReluGrad; the op_api reads the threshold first to pick its list). threshold, out,
// gradOutput, self null: 161001; gradOutput's = self's = out's dtype; gradOutput, self at most 8 dims, broadcast, out
// the broadcast shape.
aclnnStatus aclnnThresholdBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                   const aclScalar* threshold, aclTensor* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
    return stub::PhaseOne(kThreshold, workspaceSize, executor, gradOutput, self, out, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, o{"out", out};
        if (threshold == nullptr) return c.Null("threshold");
        RETURN_IF_FAILED(c.NotNull({o, a, b}));
        RETURN_IF_FAILED(c.ScalarToFloat("threshold", threshold, &c.attrs.lo));
        c.attrs.relu = std::fabs(c.attrs.lo - 0.0f) <= FLT_EPSILON;
        stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16);
        if (!ok.empty()) ok.insert(ok.end(), stub::kSmallInts.begin(), stub::kSmallInts.end());
        if (c.product() == "950" && c.attrs.relu) ok.push_back(ACL_INT64);
        RETURN_IF_FAILED(c.DtypesIn(ok, {a, b}));
        RETURN_IF_FAILED(c.SameDtype({b, a, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b}));
        RETURN_IF_FAILED(c.Broadcast(a, b, o));
        return ACLNN_SUCCESS;
    });
}
STUB_PHASE_TWO(aclnnThresholdBackward, kThreshold)

// 950, A3, A2 (fp32, fp16, bf16), 910, 310P (fp32, fp16); the real API also takes INT32 and INT8 (the stub
// refuses them). gradOutput, result, gradInput null: 161001; result's and gradInput's dtype = gradOutput's (first),
// then each in the list; the three shapes identical; no dims check (the op_api reshapes past 8 dims to 1-D).
aclnnStatus aclnnSeluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* result,
                                              aclTensor* gradInput, uint64_t* workspaceSize,
                                              aclOpExecutor** executor) {
    return stub::PhaseOne(kSelu, workspaceSize, executor, gradOutput, result, gradInput, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"result", result}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a, b, o}));
        RETURN_IF_FAILED(c.SameDtype({a, b, o}));
        RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16), {a, b, o}));
        return c.SameShape({a, b, o});
    });
}
STUB_PHASE_TWO(aclnnSeluBackward, kSelu)

// 950, A3, A2 (fp32, fp16, bf16), 910, 310P (fp32, fp16). workspaceSize/executor, then gradOutput, self, gradInput
// null: 161001; each dtype in the list (none compared: the inputs are cast to their promoted type, the result to
// gradInput's); the three at most 8 dims; self and gradOutput broadcast to gradInput's shape.
aclnnStatus aclnnMishBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self, aclTensor* gradInput,
                                              uint64_t* workspaceSize, aclOpExecutor** executor) {
    return stub::PhaseOne(kMish, workspaceSize, executor, gradOutput, self, gradInput, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a, b, o}));
        RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16), {a, b, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b, o}));
        RETURN_IF_FAILED(c.Broadcast(a, b, o));
        c.compute = stub::Promote(gradOutput->dtype, self->dtype);
        return ACLNN_SUCCESS;
    });
}
STUB_PHASE_TWO(aclnnMishBackward, kMish)

// 950 only (fp32, fp16, bf16); no op_api (an aclnn generated from the OpDef, activation/mish_grad/op_host/
// mish_grad_def.cpp): grad, x, xGrad null: 161001 (tanhxOptional may be null: MishGradDAG computes t); each dtype in
// the list and all equal, a given tanhx's too (the OpDef's rows; the tiling's CalcInputDtype, CalcOutputDtype); 0-8
// dims and one shape (the elementwise proto). An empty xGrad: success, nothing computed.
aclnnStatus aclnnMishGradGetWorkspaceSize(const aclTensor* grad, const aclTensor* x, const aclTensor* tanhxOptional,
                                          const aclTensor* xGrad, uint64_t* workspaceSize, aclOpExecutor** executor) {
    auto check = [&](Checker& c) {
        Arg a{"grad", grad}, b{"x", x}, t{"tanhxOptional", tanhxOptional}, o{"xGrad", xGrad};
        RETURN_IF_FAILED(c.NotNull({a, b, o}));
        stub::DTypes ok = stub::ForProduct(c.product(), "950", "", stub::kFp32Fp16);
        if (ok.empty()) return c.Unsupported();
        if (tanhxOptional == nullptr) {
            RETURN_IF_FAILED(c.DtypesIn(ok, {a, b, o}));
            RETURN_IF_FAILED(c.SameDtype({a, b, o}));
            RETURN_IF_FAILED(c.Dims(0, 8, {a, b, o}));
            return c.SameShape({a, b, o});
        }
        RETURN_IF_FAILED(c.DtypesIn(ok, {a, b, t, o}));
        RETURN_IF_FAILED(c.SameDtype({a, b, t, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b, t, o}));
        return c.SameShape({a, b, t, o});
    };
    return stub::PhaseOneJob(kMishGradOp, workspaceSize, executor, check,
                             [&](const Checker&) { return MishGradJob(grad, x, tanhxOptional, xGrad); });
}
STUB_PHASE_TWO(aclnnMishGrad, kMishGradOp)

// A2, A3, 950 (fp32, fp16, bf16); no op_api (an aclnn generated from the OpDef): x, dy, out null: 161001; each dtype
// in the list and all three equal (the OpDef's columns); 0-8 dims and equal shapes (the doc's rules; ops-nn's source
// has no such check). eps narrowed to float (the OpDef's Float attribute), any value.
aclnnStatus aclnnLogitGradGetWorkspaceSize(const aclTensor* x, const aclTensor* dy, double eps, const aclTensor* out,
                                           uint64_t* workspaceSize, aclOpExecutor** executor) {
    return stub::PhaseOne(kLogitGrad, workspaceSize, executor, dy, x, out, [&](Checker& c) {
        Arg a{"x", x}, b{"dy", dy}, o{"out", out};
        RETURN_IF_FAILED(c.NotNull({a, b, o}));
        RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "", stub::kFp32Fp16), {a, b, o}));
        RETURN_IF_FAILED(c.SameDtype({a, b, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b, o}));
        RETURN_IF_FAILED(c.SameShape({a, b, o}));
        float e = static_cast<float>(eps);
        bool above = e >= 0.0f;
        c.attrs.lo = above ? e : 0.0f;
        c.attrs.hi = 1.0f - c.attrs.lo;
        c.attrs.outside = above ? 0.0f : NAN;
        return ACLNN_SUCCESS;
    });
}
STUB_PHASE_TWO(aclnnLogitGrad, kLogitGrad)

}  // extern "C"
