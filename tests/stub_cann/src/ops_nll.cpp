// libopapi of the stub: NLLLossBackward and NLLLoss2dBackward (loss/nll_loss_grad: op_api/aclnn_nll_loss_backward.cpp,
// op_api/aclnn_nll_loss2d_backward.cpp; one kernel, op_kernel/arch35/nll_loss_grad.h, for both).
//
// Phase one: each op_api's checks in their order; phase two: the 950 kernel in float32, the result rounded to
// self's dtype (then cast to out's, the 1-D API's l0op::Cast).
#include "aclnnop/aclnn_nll_loss2d_backward.h"
#include "aclnnop/aclnn_nll_loss_backward.h"
#include "elements.h"
#include "loss_checks.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Checker;

const stub::OpDef kNll{"aclnnNLLLossBackward", nullptr, nullptr};
const stub::OpDef kNll2d{"aclnnNLLLoss2dBackward", nullptr, nullptr};

using loss::kMean;
using loss::kNone;
using loss::CheckReduction;

// nll_loss_grad.h (SIMT): zero-fill; each position i (a row of (N, C); of (N, C, H, W) an (n, hw), the 4-D paths)
// whose target t != ignoreIndex (int64 compare) gets, at class t, none -(g_i*w_t), sum -(g_0*w_t), mean q = g_0/tw
// once, then -(q*w_t): out[n C HW + t HW + hw] (HW = 1 for the 1-D API). A target outside [0, C) that is not
// ignoreIndex meets only an ASSERT on the device (release behaviour unverified): the stub leaves that position 0.
stub::Job NllJob(const aclTensor* dy, const aclTensor* self, const aclTensor* target, const aclTensor* weight,
                 const aclTensor* tw, const aclTensor* out, int64_t reduction, int64_t ignore) {
    stub::Job job;
    int idy = job.Add(dy), it = job.Add(target), iw = job.Add(weight), itw = job.Add(tw), iout = job.Add(out, true);
    if (stub::Numel(self->view) == 0) return job;
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iout);
        bool four = o.view.size() == 4;
        int64_t classes = four ? o.view[1] : o.view.back(), hw = four ? o.view[2] * o.view[3] : 1;
        int64_t positions = stub::Numel(o.view) / classes;
        std::vector<float> g = stub::ReadFloats(j.T(idy), j.T(idy).view), w = stub::ReadFloats(j.T(iw), j.T(iw).view);
        std::vector<int64_t> t = stub::ReadInts(j.T(it));
        float q = g[0];
        if (reduction == kMean) q = g[0] / stub::ReadFloats(j.T(itw), j.T(itw).view)[0];
        std::vector<float> res(static_cast<size_t>(positions * classes), 0.0f);
        for (int64_t i = 0; i < positions; ++i) {
            int64_t c = t[static_cast<size_t>(i)];
            if (c == ignore || c < 0 || c >= classes) continue;
            float gi = reduction == kNone && g.size() == static_cast<size_t>(positions) ? g[static_cast<size_t>(i)] : q;
            res[static_cast<size_t>((i / hw) * classes * hw + c * hw + i % hw)] = -(gi * w[static_cast<size_t>(c)]);
        }
        stub::WriteFloats(o, res, j.T(iw).dtype, negate);  // weight's dtype is self's
    };
    return job;
}

// Both APIs' tensors as the checks name them.
struct NllArgs {
    Arg g, s, t, w, tw, o;
};

NllArgs Args(const aclTensor* dy, const aclTensor* self, const aclTensor* target, const aclTensor* weight,
             const aclTensor* tw, const aclTensor* out) {
    return {{"gradOutput", dy}, {"self", self}, {"target", target}, {"weight", weight}, {"totalWeight", tw}, {"out", out}};
}

// self's dtypes on the checker's product (both op_apis: FLOAT, FLOAT16, BF16 on 950, A3, A2; FLOAT, FLOAT16 on 910),
// none elsewhere.
stub::DTypes SelfDtypes(const Checker& c) { return stub::ForProduct(c.product(), "950 A3 A2", "910", stub::kFp32Fp16); }

}  // namespace

extern "C" {

// 950, A3, A2 (fp32, fp16, bf16); 910 (fp32, fp16); not 310P (the doc's list). Order: nulls (gradOutput,
// self, target, weight, totalWeight, out); weight, gradOutput, totalWeight = self's dtype; self castable to
// out; self in the list; target INT64, UINT8 or INT32; reduction; shapes (CheckShape); an empty self: success.
aclnnStatus aclnnNLLLossBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                 const aclTensor* target, const aclTensor* weight, int64_t reduction,
                                                 int64_t ignoreIndex, const aclTensor* totalWeight, aclTensor* out,
                                                 uint64_t* workspaceSize, aclOpExecutor** executor) {
    auto check = [&](Checker& c) {
        const NllArgs a = Args(gradOutput, self, target, weight, totalWeight, out);
        const Arg &g = a.g, &s = a.s, &t = a.t, &w = a.w, &tw = a.tw, &o = a.o;
        RETURN_IF_FAILED(c.NotNull({g, s, t, w, tw, o}));
        stub::DTypes ok = SelfDtypes(c);
        if (ok.empty()) return c.Unsupported();
        RETURN_IF_FAILED(c.SameDtype({s, w}));
        RETURN_IF_FAILED(c.SameDtype({s, g}));
        RETURN_IF_FAILED(c.SameDtype({s, tw}));
        if (!stub::CanCast(self->dtype, out->dtype) || !stub::In(out->dtype, stub::kOutputTypes)) {
            return c.Invalid("self " + stub::DTypeName(self->dtype) + " cannot cast to out " + stub::DTypeName(out->dtype));
        }
        RETURN_IF_FAILED(c.DtypesIn(ok, {s}));
        RETURN_IF_FAILED(c.DtypesIn({ACL_INT64, ACL_UINT8, ACL_INT32}, {t}));
        RETURN_IF_FAILED(CheckReduction(c, reduction));
        const auto &xs = self->view, &ts = target->view, &gs = gradOutput->view;
        if (xs.empty() || xs.size() > 2) return c.Invalid("self must be 1-D or 2-D, not " + stub::ShapeStr(xs));
        if (ts.size() > 1) return c.Invalid("target must be 0-D or 1-D, not " + stub::ShapeStr(ts));
        if (!(xs.size() == 1 && ts.empty()) && (ts.empty() || ts[0] != xs[0])) {
            return c.Invalid("target " + stub::ShapeStr(ts) + " does not match self " + stub::ShapeStr(xs));
        }
        if (weight->view != std::vector<int64_t>{xs.back()}) {
            return c.Invalid("weight " + stub::ShapeStr(weight->view) + " is not one weight per class");
        }
        if (stub::Numel(totalWeight->view) != 1) return c.Invalid("totalWeight is not a single element");
        if (reduction == kNone && xs.size() == 2) {
            if (gs != std::vector<int64_t>{xs[0]}) return c.Invalid("gradOutput " + stub::ShapeStr(gs) + " is not [N]");
        } else if (gs.size() > 1 || stub::Numel(gs) != 1) {
            return c.Invalid("gradOutput " + stub::ShapeStr(gs) + " is not a single element");
        }
        return c.SameShape({s, o});
    };
    return stub::PhaseOneJob(kNll, workspaceSize, executor, check, [&](const Checker&) {
        return NllJob(gradOutput, self, target, weight, totalWeight, out, reduction, ignoreIndex);
    });
}
STUB_PHASE_TWO(aclnnNLLLossBackward, kNll)

// 950, A3, A2 (fp32, fp16, bf16); 910 (fp32, fp16); not 310P (the doc's list). Order: nulls (gradOutput, self,
// target, weight, out, totalWeight); self in the list; gradOutput, weight, out, totalWeight = self's dtype; target
// INT64, UINT8 or INT32; shapes (CheckShape: gradOutput first, weight by its element count); reduction; an empty
// self: success.
aclnnStatus aclnnNLLLoss2dBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                   const aclTensor* target, const aclTensor* weight, int64_t reduction,
                                                   int64_t ignoreIndex, aclTensor* totalWeight, aclTensor* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
    auto check = [&](Checker& c) {
        const NllArgs a = Args(gradOutput, self, target, weight, totalWeight, out);
        RETURN_IF_FAILED(c.NotNull({a.g, a.s, a.t, a.w, a.o, a.tw}));  // (out before totalWeight here)
        stub::DTypes ok = SelfDtypes(c);
        if (ok.empty()) return c.Unsupported();
        RETURN_IF_FAILED(c.DtypesIn(ok, {a.s}));
        RETURN_IF_FAILED(c.SameDtype({a.s, a.g, a.w, a.o, a.tw}));
        RETURN_IF_FAILED(c.DtypesIn({ACL_INT64, ACL_UINT8, ACL_INT32}, {a.t}));
        const auto &xs = self->view, &ts = target->view, &gs = gradOutput->view;
        if (reduction == kNone) {
            if (gs != ts) return c.Invalid("gradOutput " + stub::ShapeStr(gs) + " is not target's " + stub::ShapeStr(ts));
        } else if (gs.size() > 1 || stub::Numel(gs) != 1) {
            return c.Invalid("gradOutput " + stub::ShapeStr(gs) + " is not a single element");
        }
        if (xs.size() != 4) return c.Invalid("self must be 4-D, not " + stub::ShapeStr(xs));
        if (ts.size() != 3) return c.Invalid("target must be 3-D, not " + stub::ShapeStr(ts));
        if (xs[0] != ts[0] || xs[2] != ts[1] || xs[3] != ts[2]) {
            return c.Invalid("target " + stub::ShapeStr(ts) + " does not match self " + stub::ShapeStr(xs));
        }
        if (stub::Numel(weight->view) != xs[1]) return c.Invalid("weight does not hold one weight per class");
        RETURN_IF_FAILED(c.SameShape({a.s, a.o}));
        if (stub::Numel(totalWeight->view) != 1) return c.Invalid("totalWeight is not a single element");
        return CheckReduction(c, reduction);
    };
    return stub::PhaseOneJob(kNll2d, workspaceSize, executor, check, [&](const Checker&) {
        return NllJob(gradOutput, self, target, weight, totalWeight, out, reduction, ignoreIndex);
    });
}
STUB_PHASE_TWO(aclnnNLLLoss2dBackward, kNll2d)

}  // extern "C"
