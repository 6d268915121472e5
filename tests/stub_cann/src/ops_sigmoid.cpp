// libopapi of the stub: the sigmoid family's backward operators (SiluBackward, SwishBackward,
// LogSigmoidBackward, SigmoidBackward, SoftplusBackward).
//
// Phase one: the checks of each op's doc and op_api source (README.md, docs/kernels.md);
// phase two: the device kernel's float32 formula, as written in the (950) kernel source.
#include <cmath>

#include "aclnnop/aclnn_logsigmoid_backward.h"
#include "aclnnop/aclnn_sigmoid_backward.h"
#include "aclnnop/aclnn_silu_backward.h"
#include "aclnnop/aclnn_softplus_backward.h"
#include "aclnnop/aclnn_swish_backward.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Attrs;
using stub::Checker;

// ---------------------------------------------------------------- device kernels (float32)

float SiluGrad(float dy, float x, const Attrs&) {
    float s = 1.0f / (1.0f + std::exp(-x));
    return dy * s * (1.0f + x * (1.0f - s));
}

// swish_grad_dag.h: v = x*beta; s = 1/(exp(-v)+1); t = (1-s)*v; t = t*s + s (MulDstAdd; whether
// it fuses is not documented: two roundings here); t*dy.
float SwishGrad(float dy, float x, const Attrs& a) {
    float v = x * a.beta;
    float s = 1.0f / (std::exp(-v) + 1.0f);
    float t = (1.0f - s) * v;
    t = t * s + s;
    return t * dy;
}

float LogSigmoidGrad(float dy, float x, const Attrs&) {
    float e = std::exp(-std::fabs(x));
    float q = (x < 0.0f ? 1.0f : e) / (1.0f + e);
    return q * dy;
}

// sigmoid_grad_f32.h (and the AI CPU kernel, in double): (dy*(1-y))*y, y the forward output.
float SigmoidGrad(float dy, float y, const Attrs&) { return (dy * (1.0f - y)) * y; }
double SigmoidGrad64(double dy, double y, const Attrs&) { return (dy * (1.0 - y)) * y; }

// softplus_v2_grad_kernel.h: T1 = x*beta; dy/(exp(-T1)+1), or dy where T1 > (T1-T1)+threshold
// (strict, in float32: T1 = +inf gives a NaN threshold, so the division: dy).
float SoftplusGrad(float dy, float x, const Attrs& a) {
    float t1 = x * a.beta;
    float t5 = dy / (std::exp(-t1) + 1.0f);
    float thr = (t1 - t1) + a.threshold;
    return t1 > thr ? dy : t5;
}

const stub::OpDef kSilu{"aclnnSiluBackward", SiluGrad, nullptr};
const stub::OpDef kSwish{"aclnnSwishBackward", SwishGrad, nullptr};
const stub::OpDef kLogSigmoid{"aclnnLogSigmoidBackward", LogSigmoidGrad, nullptr};
const stub::OpDef kSigmoid{"aclnnSigmoidBackward", SigmoidGrad, SigmoidGrad64};
const stub::OpDef kSoftplus{"aclnnSoftplusBackward", SoftplusGrad, nullptr};

}  // namespace

// ---------------------------------------------------------------- the public API

extern "C" {

// 950, A3, A2 (fp32, fp16, bf16); 910 (fp32, fp16); 1-8 dims; dtypes identical, except on 950:
// gradOutput != self iff gradInput is FLOAT; shapes identical, on 950 broadcast.
aclnnStatus aclnnSiluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self, aclTensor* gradInput,
                                              uint64_t* workspaceSize, aclOpExecutor** executor) {
    return stub::PhaseOne(kSilu, workspaceSize, executor, gradOutput, self, gradInput, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a, b, o}));
        RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "910", stub::kFp32Fp16), {a, b, o}));
        bool regbase = c.product() == "950";  // broadcast and mixed precision exist on 950 only
        if (regbase && gradOutput->dtype != self->dtype) {
            if (gradInput->dtype != ACL_FLOAT) {
                return c.Invalid("gradOutput " + stub::DTypeName(gradOutput->dtype) + " and self " +
                                 stub::DTypeName(self->dtype) + " differ: gradInput must be FLOAT, not " +
                                 stub::DTypeName(gradInput->dtype));
            }
        } else {
            RETURN_IF_FAILED(c.SameDtype({a, b, o}));
        }
        RETURN_IF_FAILED(c.Dims(1, 8, {a, b, o}));
        return regbase ? c.Broadcast(a, b, o) : c.SameShape({a, b, o});
    });
}
STUB_PHASE_TWO(aclnnSiluBackward, kSilu)

// 950, A3, A2 (fp32, fp16, bf16); 910, 310P (fp32, fp16); the three dtypes and shapes equal;
// betaOptional (nullptr: 1.0) must cast to FLOAT; 0-8 dims.
aclnnStatus aclnnSwishBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                               const aclScalar* betaOptional, aclTensor* gradInput,
                                               uint64_t* workspaceSize, aclOpExecutor** executor) {
    return stub::PhaseOne(kSwish, workspaceSize, executor, gradOutput, self, gradInput, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a, b, o}));
        RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16), {a, b}));
        if (betaOptional != nullptr && !stub::CanCast(betaOptional->dtype, ACL_FLOAT)) {
            return c.Invalid("betaOptional dtype " + stub::DTypeName(betaOptional->dtype) + " cannot cast to FLOAT");
        }
        RETURN_IF_FAILED(c.SameDtype({o, a, b}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b, o}));
        RETURN_IF_FAILED(c.SameShape({o, a, b}));
        return betaOptional == nullptr ? ACLNN_SUCCESS : c.ScalarToFloat("betaOptional", betaOptional, &c.attrs.beta);
    });
}
STUB_PHASE_TWO(aclnnSwishBackward, kSwish)

// A3, A2 (fp32, fp16, bf16); 1-8 dims; the four dtypes and shapes identical. The buffer is
// checked, never read: the executor keeps only gradOutput, self and gradInput.
aclnnStatus aclnnLogSigmoidBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                    const aclTensor* buffer, aclTensor* gradInput,
                                                    uint64_t* workspaceSize, aclOpExecutor** executor) {
    return stub::PhaseOne(kLogSigmoid, workspaceSize, executor, gradOutput, self, gradInput, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, f{"buffer", buffer}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a, b, f, o}));
        RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "A3 A2", "", stub::kFp32Fp16), {a, b, f, o}));
        RETURN_IF_FAILED(c.SameDtype({a, b, f, o}));
        RETURN_IF_FAILED(c.Dims(1, 8, {a, b, f, o}));
        return c.SameShape({a, b, f, o});
    });
}
STUB_PHASE_TWO(aclnnLogSigmoidBackward, kLogSigmoid)

// 950, A3, A2, 910, 310P: FLOAT, FLOAT16, DOUBLE, BF16 each (bf16 gradOutput not on 910/310P;
// the real API also takes COMPLEX64/128, the stub refuses them); promote(gradOutput, output) in
// that list and castable to gradInput; gradOutput/output at most 8 dims, broadcast to gradInput.
// Computed in the promoted type (DOUBLE: the AI CPU kernel), then cast to gradInput's dtype.
aclnnStatus aclnnSigmoidBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* output,
                                                 aclTensor* gradInput, uint64_t* workspaceSize,
                                                 aclOpExecutor** executor) {
    return stub::PhaseOne(kSigmoid, workspaceSize, executor, gradOutput, output, gradInput, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"output", output}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a, b, o}));
        stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2 910 310P", "", {ACL_FLOAT, ACL_FLOAT16, ACL_DOUBLE});
        RETURN_IF_FAILED(c.DtypesIn(ok, {a, b, o}));
        if (gradOutput->dtype == ACL_BF16 && !stub::OneOf(c.product(), "950 A3 A2")) {
            return c.Invalid("gradOutput BFLOAT16 is not supported on " + c.product());
        }
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b}));
        c.compute = stub::Promote(gradOutput->dtype, output->dtype);
        if (!stub::In(c.compute, ok) || !stub::CanCast(c.compute, gradInput->dtype)) {
            return c.Invalid("promoted dtype " + stub::DTypeName(c.compute) + " is not supported or not castable to " +
                             stub::DTypeName(gradInput->dtype));
        }
        return c.Broadcast(a, b, o);
    });
}
STUB_PHASE_TWO(aclnnSigmoidBackward, kSigmoid)

// 950, A3, A2 (bf16 too), 910: gradOutput, gradInput FLOAT, FLOAT16, DOUBLE (BF16); self those or
// INT8, INT16, INT32, INT64, UINT8, BOOL; no equality of dtypes; shapes equal; at most 8 dims.
// beta and threshold: null -> 161001 in the stub (the source has no check and dereferences them).
// Inputs not both the same of FLOAT/FLOAT16/BF16 are cast to FLOAT (DOUBLE too: computed in
// float32); the result is cast to gradInput's dtype.
aclnnStatus aclnnSoftplusBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                  const aclScalar* beta, const aclScalar* threshold,
                                                  aclTensor* gradInput, uint64_t* workspaceSize,
                                                  aclOpExecutor** executor) {
    return stub::PhaseOne(kSoftplus, workspaceSize, executor, gradOutput, self, gradInput, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a, b, o}));
        if (beta == nullptr) return c.Null("beta");
        if (threshold == nullptr) return c.Null("threshold");
        stub::DTypes grads = stub::ForProduct(c.product(), "950 A3 A2", "910", {ACL_FLOAT, ACL_FLOAT16, ACL_DOUBLE});
        stub::DTypes selfs = grads;
        if (!grads.empty()) selfs.insert(selfs.end(), {ACL_INT8, ACL_INT16, ACL_INT32, ACL_INT64, ACL_UINT8, ACL_BOOL});
        RETURN_IF_FAILED(c.DtypesIn(grads, {a}));
        RETURN_IF_FAILED(c.DtypesIn(selfs, {b}));
        RETURN_IF_FAILED(c.DtypesIn(grads, {o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b, o}));
        RETURN_IF_FAILED(c.SameShape({b, a, o}));
        RETURN_IF_FAILED(c.ScalarToFloat("beta", beta, &c.attrs.beta));
        RETURN_IF_FAILED(c.ScalarToFloat("threshold", threshold, &c.attrs.threshold));
        bool same16or32 = stub::In(gradOutput->dtype, stub::kFloats) && gradOutput->dtype == self->dtype;
        c.compute = same16or32 ? self->dtype : ACL_FLOAT;
        return ACLNN_SUCCESS;
    });
}
STUB_PHASE_TWO(aclnnSoftplusBackward, kSoftplus)

}  // extern "C"
