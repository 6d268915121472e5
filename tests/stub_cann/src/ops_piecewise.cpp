// libopapi of the stub: the piecewise backward operators (HardsigmoidBackward,
// HardswishBackward, LeakyReluBackward).
#include <cmath>

#include "aclnnop/aclnn_hardsigmoid_backward.h"
#include "aclnnop/aclnn_hardswish_backward.h"
#include "aclnnop/aclnn_leaky_relu_backward.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Attrs;
using stub::Checker;

// ---------------------------------------------------------------- device kernels (float32)

float HardsigmoidGrad(float dy, float x, const Attrs&) {
    const float alpha = 1.0f / 6.0f, beta = 0.5f;
    float t = x * alpha + beta;  // NaN x: both comparisons false, 0
    float r = dy * alpha;
    return (t > 0.0f && t < 1.0f) ? r : 0.0f;
}

// hard_swish_grad.h: g = x*fp32(1/3) + 0.5 (two roundings: g = +0 at x = -1.5); 0 unless x >= -3;
// 1 unless x <= 3 (NaN x: 1, so dy); dy*g.
float HardswishGrad(float dy, float x, const Attrs&) {
    float g = x * 0.33333334f + 0.5f;
    g = x >= -3.0f ? g : 0.0f;
    g = x <= 3.0f ? g : 1.0f;
    return dy * g;
}

// leaky_relu_grad_dag.h: x > 0 (strict; in the input dtype, which float32 represents exactly)
// ? dy : dy*slope (slope as float32). DOUBLE goes to an AI CPU kernel (not in ops-nn): the same
// select in double, with the float32 slope.
float LeakyReluGrad(float dy, float x, const Attrs& a) {
    float m = dy * a.slope;
    return x > 0.0f ? dy : m;
}
double LeakyReluGrad64(double dy, double x, const Attrs& a) { return x > 0.0 ? dy : dy * static_cast<double>(a.slope); }

const stub::OpDef kHardsigmoid{"aclnnHardsigmoidBackward", HardsigmoidGrad, nullptr};
const stub::OpDef kHardswish{"aclnnHardswishBackward", HardswishGrad, nullptr};
const stub::OpDef kLeakyRelu{"aclnnLeakyReluBackward", LeakyReluGrad, LeakyReluGrad64};

}  // namespace

// ---------------------------------------------------------------- the public API

extern "C" {

// A3, A2 (fp32, fp16, bf16) for all three: gradOutput and self are promoted, every float is
// castable to every float `out`; 0-8 dims; shapes identical. The kernel runs in the promoted
// type (equal dtypes stay, any mix is FLOAT) and rounds bf16 half away from zero (CAST_ROUND);
// the result is cast to `out` to nearest even if that differs.
aclnnStatus aclnnHardsigmoidBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                     aclTensor* out, uint64_t* workspaceSize,
                                                     aclOpExecutor** executor) {
    return stub::PhaseOne(kHardsigmoid, workspaceSize, executor, gradOutput, self, out, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, o{"out", out};
        RETURN_IF_FAILED(c.NotNull({a, b, o}));
        RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "A3 A2", "", stub::kFp32Fp16), {a, b, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b, o}));
        RETURN_IF_FAILED(c.SameShape({a, b, o}));
        c.compute = gradOutput->dtype == self->dtype ? self->dtype : ACL_FLOAT;
        c.ties_away = c.compute == ACL_BF16;
        return ACLNN_SUCCESS;
    });
}
STUB_PHASE_TWO(aclnnHardsigmoidBackward, kHardsigmoid)

// 950, A3, A2 (fp32, fp16, bf16), 910 (fp32, fp16): gradOutput and out dtype = self's;
// gradOutput, self at most 8 dims; gradOutput and out shape = self's.
aclnnStatus aclnnHardswishBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self, aclTensor* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
    return stub::PhaseOne(kHardswish, workspaceSize, executor, gradOutput, self, out, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, o{"out", out};
        RETURN_IF_FAILED(c.NotNull({a, b, o}));
        RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "910", stub::kFp32Fp16), {b, a}));
        RETURN_IF_FAILED(c.SameDtype({b, a, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b}));
        return c.SameShape({b, a, o});
    });
}
STUB_PHASE_TWO(aclnnHardswishBackward, kHardswish)

// 950, A3, A2 (bf16 too), 910, 310P: gradOutput, self FLOAT, FLOAT16, DOUBLE (BF16); the slope
// FLOAT, FLOAT16, DOUBLE, INT8-64, UINT8, BOOL (BF16); at most 8 dims; broadcast to out;
// selfIsResult with slope < 0 refused; promote(gradOutput, self) castable to out (the stub stores
// FLOAT, FLOAT16, BF16, DOUBLE: it refuses the complex `out` the real API casts to).
// Computed in the promoted type (DOUBLE: AI CPU), then cast to out's dtype.
aclnnStatus aclnnLeakyReluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                   const aclScalar* negativeSlope, bool selfIsResult, aclTensor* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
    return stub::PhaseOne(kLeakyRelu, workspaceSize, executor, gradOutput, self, out, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, o{"out", out};
        RETURN_IF_FAILED(c.NotNull({a, b}));
        if (negativeSlope == nullptr) return c.Null("negativeSlope");
        RETURN_IF_FAILED(c.NotNull({o}));
        const char* bf16 = "950 A3 A2";
        const char* plain = "910 310P";
        RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), bf16, plain, {ACL_FLOAT, ACL_FLOAT16, ACL_DOUBLE}), {a, b}));
        stub::DTypes scalars = stub::ForProduct(c.product(), bf16, plain, {ACL_FLOAT, ACL_FLOAT16, ACL_DOUBLE, ACL_INT32,
                                                                           ACL_INT64, ACL_INT8, ACL_UINT8, ACL_BOOL, ACL_INT16});
        if (!stub::In(negativeSlope->dtype, scalars)) {
            return c.Invalid("negativeSlope dtype " + stub::DTypeName(negativeSlope->dtype) + " is not supported");
        }
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b}));
        RETURN_IF_FAILED(c.Broadcast(a, b, o));
        double slope = 0;
        stub::ScalarAs(*negativeSlope, &slope);  // ToDouble
        if (selfIsResult && slope < 0.0) return c.Invalid("selfIsResult with a negative negativeSlope");
        c.compute = stub::Promote(gradOutput->dtype, self->dtype);
        if (!stub::CanCast(c.compute, out->dtype) || !stub::In(out->dtype, stub::kOutputTypes)) {
            return c.Invalid("promoted dtype " + stub::DTypeName(c.compute) + " cannot be cast to out's " +
                             stub::DTypeName(out->dtype));
        }
        return c.ScalarToFloat("negativeSlope", negativeSlope, &c.attrs.slope);
    });
}
STUB_PHASE_TWO(aclnnLeakyReluBackward, kLeakyRelu)

}  // extern "C"
