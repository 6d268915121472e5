// libopapi of the stub: the GELU family's backward operators (FastGeluBackward, GeluBackwardV2, GeluBackward).
#include <cmath>
#include <cstring>

#include "aclnnop/aclnn_fast_gelu_backward.h"
#include "aclnnop/aclnn_gelu_backward.h"
#include "aclnnop/aclnn_gelu_backward_v2.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Attrs;
using stub::Checker;

// ---------------------------------------------------------------- device kernels (float32)

float FastGeluGrad(float dy, float x, const Attrs&) {
    float m = -1.702f * x;
    float d = 1.0f / (std::exp(m) + 1.0f);
    return ((d - 1.0f) * m + 1.0f) * d * dy;
}

// gelu_grad_v2_dag.h, float32 constants as the kernel writes them.
// "none": cdf = Erf(x/sqrt2)*0.5 + 0.5; pdf = exp(x*x*-0.5)/sqrt(2 pi); (cdf + pdf*x)*dy. The
// device's Erf accuracy is not published: std::erf (float) stands in for it.
// "tanh": p = exp((x*x*AN + BETAN)*x) (= e^-2u; the Axpy as two roundings), r = (x*x*A3 + BETA)*x,
// q = 1/(p+1); w = ((p*q)*r)*q, NaN -> 0; dy*(w + q).
float GeluV2Grad(float dy, float x, const Attrs& a) {
    if (a.tanh) {
        const float beta = 1.5957692f, beta_n = -1.5957692f, an = -0.071354814f, a3 = 0.21406445f;
        float x2 = x * x;
        float p = std::exp((x2 * an + beta_n) * x);
        float r = (x2 * a3 + beta) * x;
        float q = 1.0f / (p + 1.0f);
        float w = ((p * q) * r) * q;
        if (std::isnan(w)) w = 0.0f;
        return dy * (w + q);
    }
    float e = std::erf(x * 0.70710677f);
    float cdf = e * 0.5f + 0.5f;
    float pdf = std::exp((x * x) * -0.5f) * 0.3989423f;
    return (cdf + pdf * x) * dy;
}

const stub::OpDef kFastGelu{"aclnnFastGeluBackward", FastGeluGrad, nullptr};
const stub::OpDef kGeluV2{"aclnnGeluBackwardV2", GeluV2Grad, nullptr};
// gelu_grad_dag.h is gelu_grad_v2_dag.h's tanh kernel, operation for operation: GeluV2Grad with tanh set.
const stub::OpDef kGelu{"aclnnGeluBackward", GeluV2Grad, nullptr};

}  // namespace

// ---------------------------------------------------------------- the public API

extern "C" {

// 950, A3, A2 (fp32, fp16, bf16); 0-8 dims; dtypes, shapes and formats identical.
aclnnStatus aclnnFastGeluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                  aclTensor* gradInput, uint64_t* workspaceSize,
                                                  aclOpExecutor** executor) {
    return stub::PhaseOne(kFastGelu, workspaceSize, executor, gradOutput, self, gradInput, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a, b, o}));
        RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "", stub::kFp32Fp16), {a, b, o}));
        RETURN_IF_FAILED(c.SameDtype({a, b, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b, o}));
        RETURN_IF_FAILED(c.SameShape({a, b, o}));
        return c.SameFormat({a, b, o});
    });
}
STUB_PHASE_TWO(aclnnFastGeluBackward, kFastGelu)

// 950, A3, A2 (bf16 too), 910, 310P: promote(gradOutput, self) must exist, be FLOAT, FLOAT16 or
// (not on 910/310P) BF16, and equal gradInput's dtype (no per-input list: an integer input
// promoted with a float one is accepted and cast); gradOutput/self broadcast to gradInput; no
// dims limit; approximate "none" or "tanh" (nullptr: 161001, checked with the tensors).
aclnnStatus aclnnGeluBackwardV2GetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self, char* approximate,
                                                aclTensor* gradInput, uint64_t* workspaceSize,
                                                aclOpExecutor** executor) {
    return stub::PhaseOne(kGeluV2, workspaceSize, executor, gradOutput, self, gradInput, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a, b, o}));
        if (approximate == nullptr) return c.Null("approximate");
        if (!stub::OneOf(c.product(), "950 A3 A2 910 310P")) return c.Unsupported();
        aclDataType promoted = stub::Promote(gradOutput->dtype, self->dtype);
        if (promoted == ACL_BF16 && !stub::OneOf(c.product(), "950 A3 A2")) {
            return c.Invalid("BFLOAT16 is not supported on " + c.product());
        }
        if (!stub::In(promoted, stub::kFloats) || promoted != gradInput->dtype) {
            return c.Invalid("gradOutput " + stub::DTypeName(gradOutput->dtype) + " and self " +
                             stub::DTypeName(self->dtype) + " promote to " + stub::DTypeName(promoted) +
                             ": not a supported dtype, or not gradInput's " + stub::DTypeName(gradInput->dtype));
        }
        RETURN_IF_FAILED(c.Broadcast(a, b, o));
        if (std::strcmp(approximate, "none") != 0 && std::strcmp(approximate, "tanh") != 0) {
            return c.Invalid(std::string("approximate must be \"none\" or \"tanh\", not \"") + approximate + "\"");
        }
        c.attrs.tanh = std::strcmp(approximate, "tanh") == 0;
        return ACLNN_SUCCESS;
    });
}
STUB_PHASE_TWO(aclnnGeluBackwardV2, kGeluV2)

// GeluBackwardV2's rules without approximate (always the tanh form), and gradOutput and self 0-8 dims
// (OP_CHECK_MAX_DIM, checked with the shapes, after the dtypes; gradInput must be the broadcast shape).
aclnnStatus aclnnGeluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                              const aclTensor* gradInput, uint64_t* workspaceSize,
                                              aclOpExecutor** executor) {
    return stub::PhaseOne(kGelu, workspaceSize, executor, gradOutput, self, gradInput, [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"self", self}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a, b, o}));
        if (!stub::OneOf(c.product(), "950 A3 A2 910 310P")) return c.Unsupported();
        aclDataType promoted = stub::Promote(gradOutput->dtype, self->dtype);
        if (promoted == ACL_BF16 && !stub::OneOf(c.product(), "950 A3 A2")) {
            return c.Invalid("BFLOAT16 is not supported on " + c.product());
        }
        if (!stub::In(promoted, stub::kFloats) || promoted != gradInput->dtype) {
            return c.Invalid("gradOutput " + stub::DTypeName(gradOutput->dtype) + " and self " +
                             stub::DTypeName(self->dtype) + " promote to " + stub::DTypeName(promoted) +
                             ": not a supported dtype, or not gradInput's " + stub::DTypeName(gradInput->dtype));
        }
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b}));
        RETURN_IF_FAILED(c.Broadcast(a, b, o));
        c.attrs.tanh = true;
        return ACLNN_SUCCESS;
    });
}
STUB_PHASE_TWO(aclnnGeluBackward, kGelu)

}  // extern "C"
