// libopapi of the stub: SmoothL1LossBackward (loss/smooth_l1_loss_grad_v2), BinaryCrossEntropyWithLogitsBackward
// (loss/sigmoid_cross_entropy_with_logits_grad_v2) and KlDivBackward (loss/kl_div_loss_grad), beside ops_loss.cpp's
// loss gradients.
//
// Phase one: the op_api checks in their order; phase two: the 950 kernels in float32, the result rounded
// to the promoted dtype, then cast to out's (l0op::Cast).
#include <algorithm>
#include <cmath>

#include "aclnnop/aclnn_binary_cross_entropy_with_logits_backward.h"
#include "aclnnop/aclnn_kl_div_backward.h"
#include "aclnnop/aclnn_smooth_l1_loss_backward.h"
#include "elements.h"
#include "loss_checks.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Checker;

const stub::OpDef kSmoothL1{"aclnnSmoothL1LossBackward", nullptr, nullptr};
const stub::OpDef kBceLogits{"aclnnBinaryCrossEntropyWithLogitsBackward", nullptr, nullptr};
const stub::OpDef kKlDiv{"aclnnKlDivBackward", nullptr, nullptr};

using loss::kMean;
using loss::kNone;
using loss::kSum;
constexpr int64_t kBatchMean = 3;
using loss::BroadcastShape;
using loss::CheckReduction;

// smooth_l1_loss_grad_v2_dag.h, float32: d = x - y; pos = d > sigma ? 1 : 0; neg = d < -sigma ? -1 : 0;
// in = |d| > sigma ? 0 : d*inv; r = (pos + neg) + in; out = (r*dy)*cof. A one-element gradOut takes the Scalar DAG:
// >=, <= and |d| >= sigma. The tiling: inv = |sigma| < 1e-6f ? NaN : 1/sigma; cof = (float)(1.0/(double)numel(self))
// for mean (self as the op_api passes it, unbroadcast; 0-d is [1]), else 1. In the promoted dtype.
stub::Job SmoothL1Job(const aclTensor* dy, const aclTensor* x, const aclTensor* y, const aclTensor* out,
                      int64_t reduction, float beta, aclDataType compute) {
    stub::Job job;
    int idy = job.Add(dy), ix = job.Add(x), iy = job.Add(y), iout = job.Add(out, true);
    if (stub::Numel(x->view) == 0 || stub::Numel(dy->view) == 0 || stub::Numel(y->view) == 0) return job;
    float cof = reduction == kMean ? static_cast<float>(1.0 / static_cast<double>(stub::Numel(x->view))) : 1.0f;
    float sigma = beta, neg_sigma = -1.0f * beta;
    float inv = std::fabs(sigma) < 1e-6f ? NAN : 1 / sigma;
    bool closed = stub::Numel(dy->view) == 1;
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iout);
        std::vector<float> g = stub::ReadFloats(j.T(idy), o.view), xs = stub::ReadFloats(j.T(ix), o.view),
                           ys = stub::ReadFloats(j.T(iy), o.view);
        for (size_t i = 0; i < g.size(); ++i) {
            float d = xs[i] - ys[i];
            float ad = std::fabs(d);
            bool pos = closed ? d >= sigma : d > sigma, neg = closed ? d <= neg_sigma : d < neg_sigma;
            bool outside = closed ? ad >= sigma : ad > sigma;
            float r = ((pos ? 1.0f : 0.0f) + (neg ? -1.0f : 0.0f)) + (outside ? 0.0f : d * inv);
            g[i] = (r * g[i]) * cof;
        }
        stub::WriteFloats(o, g, compute, negate);
    };
    return job;
}

// sigmoid_cross_entropy_with_logits_grad_v2_dag.h, float32 (the op_api passes OnesLike for a null weight or posWeight,
// so the DAG with both runs): s = 1/(expf(x*-1) + 1); t = pw*y; g = ((t + 1) - y)*s - t; g = g*dy; g = g*w; mean:
// g = g*scale, scale = 1.0f/max(1.0f, (float)numel(self)). In the promoted dtype.
stub::Job BceLogitsJob(const aclTensor* dy, const aclTensor* x, const aclTensor* y, const aclTensor* w,
                       const aclTensor* pw, const aclTensor* out, int64_t reduction, aclDataType compute) {
    stub::Job job;
    int idy = job.Add(dy), ix = job.Add(x), iy = job.Add(y), iw = job.Add(w), ipw = job.Add(pw),
        iout = job.Add(out, true);
    if (stub::Numel(x->view) == 0) return job;
    float scale = 1.0f / std::max(1.0f, static_cast<float>(stub::Numel(x->view)));
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iout);
        std::vector<float> g = stub::ReadFloats(j.T(idy), o.view), xs = stub::ReadFloats(j.T(ix), o.view),
                           ys = stub::ReadFloats(j.T(iy), o.view);
        std::vector<float> ws = iw < 0 ? std::vector<float>(g.size(), 1.0f) : stub::ReadFloats(j.T(iw), o.view);
        std::vector<float> ps = ipw < 0 ? std::vector<float>(g.size(), 1.0f) : stub::ReadFloats(j.T(ipw), o.view);
        for (size_t i = 0; i < g.size(); ++i) {
            float s = 1.0f / (std::exp(xs[i] * -1.0f) + 1.0f);
            float t = ps[i] * ys[i];
            float r = ((t + 1.0f) - ys[i]) * s - t;
            r = r * g[i];
            r = r * ws[i];
            if (reduction == kMean) r = r * scale;
            g[i] = r;
        }
        stub::WriteFloats(o, g, compute, negate);
    };
    return job;
}

// kl_div_loss_grad_dag.h, float32: e = logTarget ? expf(target) : target; ((e*grad)*-1)*cof; self only copied through.
// The tiling: cof = (float)(1.0/(double)N), N from input's storage shape (self, already the broadcast shape; 0-d is
// [1]): numel for mean, the first dim for batchmean, 1 for none and sum (the op_api maps any other value to none).
// float16 where the three inputs are float16, else float32.
stub::Job KlDivJob(const aclTensor* dy, const aclTensor* x, const aclTensor* y, const aclTensor* out, int64_t reduction,
                   bool logTarget, aclDataType compute) {
    stub::Job job;
    int idy = job.Add(dy), iy = job.Add(y), iout = job.Add(out, true);
    if (stub::Numel(x->view) == 0) return job;
    int64_t n = 1;
    if (reduction == kMean) n = stub::Numel(x->view);
    if (reduction == kBatchMean) n = x->view.empty() ? 1 : x->view[0];
    float cof = static_cast<float>(1.0 / static_cast<double>(n));
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iout);
        std::vector<float> g = stub::ReadFloats(j.T(idy), o.view), ys = stub::ReadFloats(j.T(iy), o.view);
        for (size_t i = 0; i < g.size(); ++i) {
            float e = logTarget ? std::exp(ys[i]) : ys[i];
            g[i] = ((e * g[i]) * -1.0f) * cof;
        }
        stub::WriteFloats(o, g, compute, negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950, A3, A2 (fp32, fp16, bf16); 910, 310P (fp32, fp16). Order: nulls; each of gradOut, self, target, gradInput in
// the list; dims <= 8 (the inputs); reduction in [0, 2]; beta >= 0 (NaN fails); the promoted dtype in the list and
// castable to gradInput's; the three broadcast, gradInput = the broadcast shape. An empty gradOut, self or target:
// success, nothing computed.
aclnnStatus aclnnSmoothL1LossBackwardGetWorkspaceSize(const aclTensor* gradOut, const aclTensor* self,
                                                      const aclTensor* target, int64_t reduction, float beta,
                                                      aclTensor* gradInput, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor) {
    aclDataType compute = ACL_DT_UNDEFINED;
    auto check = [&](Checker& c) {
        Arg a{"gradOut", gradOut}, s{"self", self}, t{"target", target}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a, s, t, o}));
        stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16);
        if (ok.empty()) return c.Unsupported();
        RETURN_IF_FAILED(c.DtypesIn(ok, {a, s, t, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, s, t}));
        RETURN_IF_FAILED(CheckReduction(c, reduction));
        if (!(beta >= 0)) return c.Invalid("beta " + std::to_string(beta) + " is not >= 0");
        compute = stub::Promote(stub::Promote(gradOut->dtype, self->dtype), target->dtype);
        if (compute == ACL_DT_UNDEFINED || !stub::In(compute, ok) || !stub::CanCast(compute, gradInput->dtype)) {
            return c.Invalid("promoted dtype " + stub::DTypeName(compute) + " is not supported or cannot be cast to "
                             "gradInput's " + stub::DTypeName(gradInput->dtype));
        }
        std::vector<int64_t> first, shape;
        if (!BroadcastShape(gradOut->view, self->view, &first) || !BroadcastShape(first, target->view, &shape)) {
            return c.Invalid("gradOut " + stub::ShapeStr(gradOut->view) + ", self " + stub::ShapeStr(self->view) +
                             " and target " + stub::ShapeStr(target->view) + " do not broadcast");
        }
        if (gradInput->view != shape) {
            return c.Invalid("gradInput " + stub::ShapeStr(gradInput->view) + " is not the broadcast shape " +
                             stub::ShapeStr(shape));
        }
        return ACLNN_SUCCESS;
    };
    return stub::PhaseOneJob(kSmoothL1, workspaceSize, executor, check, [&](const Checker&) {
        return SmoothL1Job(gradOut, self, target, gradInput, reduction, beta, compute);
    });
}
STUB_PHASE_TWO(aclnnSmoothL1LossBackward, kSmoothL1)

// 950, A3, A2 (fp32, fp16, bf16); 910, 310P (fp32, fp16). Order: nulls (the two weights may be null); out's dims
// <= 8 (the op_api's template tests out only); each of gradOutput, self, target, a given weight or posWeight, out in
// the list; out's dtype target's; unless self is empty: target and out of self's shape, gradOutput and the weights
// broadcast to it; reduction in [0, 2]. An empty self: success, nothing computed; then the promoted dtype castable
// to out's.
aclnnStatus aclnnBinaryCrossEntropyWithLogitsBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                                      const aclTensor* target,
                                                                      const aclTensor* weightOptional,
                                                                      const aclTensor* posWeightOptional,
                                                                      int64_t reduction, aclTensor* out,
                                                                      uint64_t* workspaceSize, aclOpExecutor** executor) {
    aclDataType compute = ACL_DT_UNDEFINED;
    auto check = [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, s{"self", self}, t{"target", target}, o{"out", out};
        RETURN_IF_FAILED(c.NotNull({a, s, t, o}));
        stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16);
        if (ok.empty()) return c.Unsupported();
        RETURN_IF_FAILED(c.Dims(0, 8, {o}));
        RETURN_IF_FAILED(c.DtypesIn(ok, {a, s, t}));
        if (weightOptional != nullptr) RETURN_IF_FAILED(c.DtypesIn(ok, {Arg{"weightOptional", weightOptional}}));
        if (posWeightOptional != nullptr) {
            RETURN_IF_FAILED(c.DtypesIn(ok, {Arg{"posWeightOptional", posWeightOptional}}));
        }
        RETURN_IF_FAILED(c.DtypesIn(ok, {o}));
        if (out->dtype != target->dtype) {
            return c.Invalid("out dtype " + stub::DTypeName(out->dtype) + " is not target's " +
                             stub::DTypeName(target->dtype));
        }
        if (stub::Numel(self->view) != 0) {
            if (target->view != self->view || out->view != self->view) {
                return c.Invalid("target " + stub::ShapeStr(target->view) + " or out " + stub::ShapeStr(out->view) +
                                 " is not self's shape " + stub::ShapeStr(self->view));
            }
            for (const aclTensor* other : {gradOutput, weightOptional, posWeightOptional}) {
                std::vector<int64_t> shape;
                if (other != nullptr && (!BroadcastShape(other->view, self->view, &shape) || shape != self->view)) {
                    return c.Invalid(stub::ShapeStr(other->view) + " does not broadcast to self's shape " +
                                     stub::ShapeStr(self->view));
                }
            }
        }
        RETURN_IF_FAILED(CheckReduction(c, reduction));
        compute = stub::Promote(stub::Promote(self->dtype, target->dtype), gradOutput->dtype);
        if (weightOptional != nullptr) compute = stub::Promote(compute, weightOptional->dtype);
        if (posWeightOptional != nullptr) compute = stub::Promote(compute, posWeightOptional->dtype);
        if (stub::Numel(self->view) != 0 && (compute == ACL_DT_UNDEFINED || !stub::CanCast(compute, out->dtype))) {
            return c.Invalid("promoted dtype " + stub::DTypeName(compute) + " cannot be cast to out's " +
                             stub::DTypeName(out->dtype));
        }
        return ACLNN_SUCCESS;
    };
    return stub::PhaseOneJob(kBceLogits, workspaceSize, executor, check, [&](const Checker&) {
        return BceLogitsJob(gradOutput, self, target, weightOptional, posWeightOptional, out, reduction, compute);
    });
}
STUB_PHASE_TWO(aclnnBinaryCrossEntropyWithLogitsBackward, kBceLogits)

}  // extern "C"

extern "C" {

// 950, A3, A2 (fp32, fp16, bf16). Order: nulls; self's dtype castable to out's; each of gradOutput, self, target, out
// in the list; dims <= 8; self and target broadcast to B, gradOutput to B without widening it, out of self's shape.
// No check of reduction. An empty self: success, nothing computed. (A target widening self, which the op_api sums
// back with a ReduceSum, is refused: aclnn-cli does not model it.)
aclnnStatus aclnnKlDivBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                               const aclTensor* target, int64_t reduction, bool logTarget,
                                               aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
    aclDataType compute = ACL_FLOAT;
    auto check = [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, s{"self", self}, t{"target", target}, o{"out", out};
        RETURN_IF_FAILED(c.NotNull({a, s, t, o}));
        stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "", stub::kFp32Fp16);
        if (ok.empty()) return c.Unsupported();
        if (!stub::CanCast(self->dtype, out->dtype)) return c.Invalid("self's dtype cannot be cast to out's");
        RETURN_IF_FAILED(c.DtypesIn(ok, {a, s, t, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, s, t, o}));
        std::vector<int64_t> wide, grad;
        if (!BroadcastShape(self->view, target->view, &wide)) {
            return c.Invalid("self " + stub::ShapeStr(self->view) + " and target " + stub::ShapeStr(target->view) +
                             " do not broadcast");
        }
        if (!BroadcastShape(gradOutput->view, wide, &grad) || grad != wide) {
            return c.Invalid("gradOutput " + stub::ShapeStr(gradOutput->view) + " does not broadcast to " +
                             stub::ShapeStr(wide));
        }
        if (out->view != self->view) {
            return c.Invalid("out " + stub::ShapeStr(out->view) + " is not self's shape " + stub::ShapeStr(self->view));
        }
        if (wide != self->view) return c.Invalid("target widens self: a ReduceSum the stub does not model");
        bool half = gradOutput->dtype == ACL_FLOAT16 && self->dtype == ACL_FLOAT16 && target->dtype == ACL_FLOAT16;
        compute = half ? ACL_FLOAT16 : ACL_FLOAT;
        return ACLNN_SUCCESS;
    };
    return stub::PhaseOneJob(kKlDiv, workspaceSize, executor, check, [&](const Checker&) {
        return KlDivJob(gradOutput, self, target, out, reduction, logTarget, compute);
    });
}
STUB_PHASE_TWO(aclnnKlDivBackward, kKlDiv)

}  // extern "C"
