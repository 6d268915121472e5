// libopapi of the stub: MseLossBackward (loss/mse_loss_grad_v2 op_api, 950 kernel loss/mse_loss_grad),
// L1LossBackward (loss/l1_loss_grad), SoftMarginLossBackward (loss/soft_margin_loss_grad) and
// BinaryCrossEntropyBackward (loss/binary_cross_entropy_grad); SmoothL1Loss and BinaryCrossEntropyWithLogits are in
// ops_loss_more.cpp, NLLLoss and NLLLoss2d in ops_nll.cpp.
//
// Phase one: the op_api checks in their order; phase two: the 950 kernels in float32, the result rounded
// to self's dtype, then cast to out's (l0op::Cast).
#include <cmath>

#include "aclnnop/aclnn_binary_cross_entropy_backward.h"
#include "aclnnop/aclnn_l1_loss_backward.h"
#include "aclnnop/aclnn_mse_loss_backward.h"
#include "aclnnop/aclnn_soft_margin_loss_backward.h"
#include "elements.h"
#include "loss_checks.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Checker;

const stub::OpDef kMse{"aclnnMseLossBackward", nullptr, nullptr};
const stub::OpDef kL1{"aclnnL1LossBackward", nullptr, nullptr};
const stub::OpDef kSoftMargin{"aclnnSoftMarginLossBackward", nullptr, nullptr};
const stub::OpDef kBce{"aclnnBinaryCrossEntropyBackward", nullptr, nullptr};

using loss::kMean;
using loss::kNone;
using loss::kSum;
using loss::BroadcastShape;
using loss::CheckReduction;

// mse_loss_grad_dag.h: d = x - y; t = d*cof; out = t*dy, cof = fl32(2.0/N) (mean, N = numel(self), via double)
// or 2; all three broadcast to out.
stub::Job MseJob(const aclTensor* dy, const aclTensor* x, const aclTensor* y, const aclTensor* out, int64_t reduction) {
    stub::Job job;
    int idy = job.Add(dy), ix = job.Add(x), iy = job.Add(y), iout = job.Add(out, true);
    if (stub::Numel(x->view) == 0 || stub::Numel(dy->view) == 0 || stub::Numel(y->view) == 0) return job;
    float cof = reduction == kMean ? static_cast<float>(2.0 / static_cast<double>(stub::Numel(x->view))) : 2.0f;
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iout);
        std::vector<float> g = stub::ReadFloats(j.T(idy), o.view), xs = stub::ReadFloats(j.T(ix), o.view),
                           ys = stub::ReadFloats(j.T(iy), o.view);
        for (size_t i = 0; i < g.size(); ++i) {
            float d = xs[i] - ys[i];
            float t = d * cof;
            g[i] = t * g[i];
        }
        stub::WriteFloats(o, g, j.T(ix).dtype, negate);
    };
    return job;
}

// l1_loss_grad_dag.h: sign = x < y ? -1 : (x > y ? 1 : 0) (two compares: NaN and x == y give 0), out = sign * (dy*cof);
// cof = 1.0f / d0 / d1 / ... in float (the tiling's loop over target's shape, broadcast to out's: 0-d is [1]) for
// mean, else 1. Computed in the promoted dtype, then cast to out's.
stub::Job L1Job(const aclTensor* dy, const aclTensor* x, const aclTensor* y, const aclTensor* out, int64_t reduction,
                aclDataType compute) {
    stub::Job job;
    int idy = job.Add(dy), ix = job.Add(x), iy = job.Add(y), iout = job.Add(out, true);
    if (stub::Numel(x->view) == 0 || stub::Numel(dy->view) == 0 || stub::Numel(y->view) == 0) return job;
    float cof = 1.0f;
    if (reduction == kMean) {
        for (int64_t d : out->view) cof = cof / static_cast<float>(d);
    }
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iout);
        std::vector<float> g = stub::ReadFloats(j.T(idy), o.view), xs = stub::ReadFloats(j.T(ix), o.view),
                           ys = stub::ReadFloats(j.T(iy), o.view);
        for (size_t i = 0; i < g.size(); ++i) {
            float sign = xs[i] < ys[i] ? -1.0f : (xs[i] > ys[i] ? 1.0f : 0.0f);
            g[i] = sign * (g[i] * cof);
        }
        stub::WriteFloats(o, g, compute, negate);
    };
    return job;
}

// soft_margin_loss_grad.h (arch35 Compute), float32: e = exp(-(x*y)); q = (-y*e)/(e + 1); out = q*(dy*cof), cof =
// 1.0f/(float)numel(out) for mean, else 1 (the literal form: exp overflow gives inf/inf = NaN). In the promoted dtype.
stub::Job SoftMarginJob(const aclTensor* dy, const aclTensor* x, const aclTensor* y, const aclTensor* out,
                        int64_t reduction, aclDataType compute) {
    stub::Job job;
    int idy = job.Add(dy), ix = job.Add(x), iy = job.Add(y), iout = job.Add(out, true);
    if (stub::Numel(x->view) == 0 || stub::Numel(out->view) == 0) return job;
    float cof = reduction == kMean ? 1.0f / static_cast<float>(stub::Numel(out->view)) : 1.0f;
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iout);
        std::vector<float> g = stub::ReadFloats(j.T(idy), o.view), xs = stub::ReadFloats(j.T(ix), o.view),
                           ys = stub::ReadFloats(j.T(iy), o.view);
        for (size_t i = 0; i < g.size(); ++i) {
            float xy = xs[i] * ys[i];
            float e = std::exp(-xy);
            float q = (-ys[i] * e) / (e + 1.0f);
            g[i] = q * (g[i] * cof);
        }
        stub::WriteFloats(o, g, compute, negate);
    };
    return job;
}

// binary_cross_entropy_grad_dag.h, float32: r = (dy*(x - y)) / max((1 - x)*x, 1e-12f); then *w (a weight given), then
// *cof (mean: 1.0f/(float)numel(out)). In the promoted dtype.
stub::Job BceJob(const aclTensor* dy, const aclTensor* x, const aclTensor* y, const aclTensor* w, const aclTensor* out,
                 int64_t reduction, aclDataType compute) {
    stub::Job job;
    int idy = job.Add(dy), ix = job.Add(x), iy = job.Add(y), iw = job.Add(w), iout = job.Add(out, true);
    if (stub::Numel(x->view) == 0) return job;
    float cof = 1.0f / static_cast<float>(stub::Numel(out->view));
    const float eps = 1e-12f;
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iout);
        std::vector<float> g = stub::ReadFloats(j.T(idy), o.view), xs = stub::ReadFloats(j.T(ix), o.view),
                           ys = stub::ReadFloats(j.T(iy), o.view);
        std::vector<float> ws = iw < 0 ? std::vector<float>() : stub::ReadFloats(j.T(iw), o.view);
        for (size_t i = 0; i < g.size(); ++i) {
            float d = xs[i] - ys[i];
            float p = (1.0f - xs[i]) * xs[i];
            float m = p > eps ? p : eps;  // Maxs(p, eps); a NaN p (NaN x) gives NaN through d anyway
            float r = (g[i] * d) / m;
            if (iw >= 0) r = r * ws[i];
            if (reduction == kMean) r = r * cof;
            g[i] = r;
        }
        stub::WriteFloats(o, g, compute, negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950, A3, A2 (fp32, fp16, bf16); 310P (fp32, fp16); not 910 (the doc's list). Order: nulls; gradOutput and
// target = self's dtype; self, out in the list; reduction in [0, 2]; dims <= 8; broadcast, out = the broadcast
// shape. An empty self, gradOutput or target: success, nothing computed.
aclnnStatus aclnnMseLossBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                 const aclTensor* target, int64_t reduction, aclTensor* out,
                                                 uint64_t* workspaceSize, aclOpExecutor** executor) {
    auto check = [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, s{"self", self}, t{"target", target}, o{"out", out};
        RETURN_IF_FAILED(c.NotNull({a, s, t, o}));
        stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "310P", stub::kFp32Fp16);
        if (ok.empty()) return c.Unsupported();
        RETURN_IF_FAILED(c.SameDtype({s, a}));
        RETURN_IF_FAILED(c.SameDtype({s, t}));
        RETURN_IF_FAILED(c.DtypesIn(ok, {s, o}));
        RETURN_IF_FAILED(CheckReduction(c, reduction));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, s, t}));
        std::vector<int64_t> first, shape;
        if (!BroadcastShape(gradOutput->view, self->view, &first) || !BroadcastShape(target->view, first, &shape)) {
            return c.Invalid("gradOutput " + stub::ShapeStr(gradOutput->view) + ", self " + stub::ShapeStr(self->view) +
                             " and target " + stub::ShapeStr(target->view) + " do not broadcast");
        }
        if (out->view != shape) {
            return c.Invalid("out " + stub::ShapeStr(out->view) + " is not the broadcast shape " + stub::ShapeStr(shape));
        }
        return ACLNN_SUCCESS;
    };
    return stub::PhaseOneJob(kMse, workspaceSize, executor, check,
                             [&](const Checker&) { return MseJob(gradOutput, self, target, out, reduction); });
}
STUB_PHASE_TWO(aclnnMseLossBackward, kMse)

// 950, A3, A2 (fp32, fp16, bf16); 910, 310P (fp32, fp16). Order: nulls; reduction in [0, 2]; the three inputs
// promote, the promoted type castable to gradInput's and in the product's list; dims <= 8 (gradInput too); the
// three broadcast, gradInput = the broadcast shape. An empty self, gradOutput or target: success, nothing computed.
aclnnStatus aclnnL1LossBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                const aclTensor* target, int64_t reduction, aclTensor* gradInput,
                                                uint64_t* workspaceSize, aclOpExecutor** executor) {
    aclDataType compute = ACL_DT_UNDEFINED;
    auto check = [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, s{"self", self}, t{"target", target}, o{"gradInput", gradInput};
        RETURN_IF_FAILED(c.NotNull({a, s, t, o}));
        stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16);
        if (ok.empty()) return c.Unsupported();
        RETURN_IF_FAILED(CheckReduction(c, reduction));
        compute = stub::Promote(stub::Promote(gradOutput->dtype, self->dtype), target->dtype);
        if (compute == ACL_DT_UNDEFINED) return c.Invalid("gradOutput, self and target do not promote");
        if (!stub::CanCast(compute, gradInput->dtype) || !stub::In(gradInput->dtype, stub::kOutputTypes)) {
            return c.Invalid("promoted dtype " + stub::DTypeName(compute) + " cannot be cast to gradInput's " +
                             stub::DTypeName(gradInput->dtype));
        }
        if (!stub::In(compute, ok)) return c.Invalid("promoted dtype " + stub::DTypeName(compute) + " is not supported");
        RETURN_IF_FAILED(c.Dims(0, 8, {s, t, a, o}));
        std::vector<int64_t> first, shape;
        if (!BroadcastShape(self->view, gradOutput->view, &first) || !BroadcastShape(target->view, first, &shape)) {
            return c.Invalid("gradOutput " + stub::ShapeStr(gradOutput->view) + ", self " + stub::ShapeStr(self->view) +
                             " and target " + stub::ShapeStr(target->view) + " do not broadcast");
        }
        if (gradInput->view != shape) {
            return c.Invalid("gradInput " + stub::ShapeStr(gradInput->view) + " is not the broadcast shape " +
                             stub::ShapeStr(shape));
        }
        return ACLNN_SUCCESS;
    };
    return stub::PhaseOneJob(kL1, workspaceSize, executor, check, [&](const Checker&) {
        return L1Job(gradOutput, self, target, gradInput, reduction, compute);
    });
}
STUB_PHASE_TWO(aclnnL1LossBackward, kL1)

// 950, A3, A2 (fp32, fp16, bf16); 910 (fp32, fp16); not 310P (the doc). Order: nulls; each of gradOutput, self,
// target, out in the list; dims <= 8 (inputs); the three broadcast, out = the broadcast shape. No reduction check
// (the op_api indexes REDUCTION_STR with it, undefined outside 0-2: the stub, as aclnn-cli, takes any value but 1
// as no division). An empty self: success, nothing computed.
aclnnStatus aclnnSoftMarginLossBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                        const aclTensor* target, int64_t reduction, aclTensor* out,
                                                        uint64_t* workspaceSize, aclOpExecutor** executor) {
    aclDataType compute = ACL_DT_UNDEFINED;
    auto check = [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, s{"self", self}, t{"target", target}, o{"out", out};
        RETURN_IF_FAILED(c.NotNull({a, s, t, o}));
        stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "910", stub::kFp32Fp16);
        if (ok.empty()) return c.Unsupported();
        RETURN_IF_FAILED(c.DtypesIn(ok, {a, s, t, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, s, t}));
        std::vector<int64_t> first, shape;
        if (!BroadcastShape(gradOutput->view, self->view, &first) || !BroadcastShape(target->view, first, &shape)) {
            return c.Invalid("gradOutput " + stub::ShapeStr(gradOutput->view) + ", self " + stub::ShapeStr(self->view) +
                             " and target " + stub::ShapeStr(target->view) + " do not broadcast");
        }
        if (out->view != shape) {
            return c.Invalid("out " + stub::ShapeStr(out->view) + " is not the broadcast shape " + stub::ShapeStr(shape));
        }
        compute = stub::Promote(stub::Promote(gradOutput->dtype, self->dtype), target->dtype);
        return ACLNN_SUCCESS;
    };
    return stub::PhaseOneJob(kSoftMargin, workspaceSize, executor, check, [&](const Checker&) {
        return SoftMarginJob(gradOutput, self, target, out, reduction, compute);
    });
}
STUB_PHASE_TWO(aclnnSoftMarginLossBackward, kSoftMargin)

// 950, A3, A2 (fp32, fp16, bf16); 910, 310P (fp32, fp16). Order: nulls (weightOptional may be null); out's dims <= 8
// (the op_api's template tests out only); each of self, gradOutput, target, out and a given weight in the list;
// unless self is empty: out = self's shape, target, weight and gradOutput broadcast to self's shape; reduction in
// [0, 2]; the promoted dtype castable to out's. An empty self: success, nothing computed.
aclnnStatus aclnnBinaryCrossEntropyBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                            const aclTensor* target, const aclTensor* weightOptional,
                                                            int64_t reduction, aclTensor* out, uint64_t* workspaceSize,
                                                            aclOpExecutor** executor) {
    aclDataType compute = ACL_DT_UNDEFINED;
    auto check = [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, s{"self", self}, t{"target", target}, o{"out", out};
        RETURN_IF_FAILED(c.NotNull({a, s, t, o}));
        stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16);
        if (ok.empty()) return c.Unsupported();
        RETURN_IF_FAILED(c.Dims(0, 8, {o}));
        RETURN_IF_FAILED(c.DtypesIn(ok, {s, a, t, o}));
        if (weightOptional != nullptr) RETURN_IF_FAILED(c.DtypesIn(ok, {Arg{"weightOptional", weightOptional}}));
        if (stub::Numel(self->view) != 0) {
            if (out->view != self->view) {
                return c.Invalid("out " + stub::ShapeStr(out->view) + " is not self's shape " + stub::ShapeStr(self->view));
            }
            for (const aclTensor* other : {target, weightOptional, gradOutput}) {
                std::vector<int64_t> shape;
                if (other != nullptr && (!BroadcastShape(self->view, other->view, &shape) || shape != self->view)) {
                    return c.Invalid(stub::ShapeStr(other->view) + " does not broadcast to self's shape " +
                                     stub::ShapeStr(self->view));
                }
            }
        }
        RETURN_IF_FAILED(CheckReduction(c, reduction));
        compute = stub::Promote(stub::Promote(self->dtype, target->dtype), gradOutput->dtype);
        if (weightOptional != nullptr) compute = stub::Promote(compute, weightOptional->dtype);
        if (compute == ACL_DT_UNDEFINED || !stub::CanCast(compute, out->dtype)) {
            return c.Invalid("promoted dtype " + stub::DTypeName(compute) + " cannot be cast to out's " +
                             stub::DTypeName(out->dtype));
        }
        return ACLNN_SUCCESS;
    };
    return stub::PhaseOneJob(kBce, workspaceSize, executor, check, [&](const Checker&) {
        return BceJob(gradOutput, self, target, weightOptional, out, reduction, compute);
    });
}
STUB_PHASE_TWO(aclnnBinaryCrossEntropyBackward, kBce)

}  // extern "C"
