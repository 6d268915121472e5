// libopapi of the stub: PreluBackward (activation/p_relu_grad_update with p_relu_grad_reduce).
//
// Phase one: the statuses of aclnn-cli's contract for the op (aclnn_cli/ops/channels/prelu_backward.py, whose
// CONTRACT_NOTES follow the op_api source): nulls 161001, everything else 161002. Phase two: the 950 kernels
// (prelu_backward_kernel.py): products in the inputs' dtype T, gradWeight's terms summed in float32 per channel.
#include "aclnnop/aclnn_prelu_backward.h"
#include "elements.h"
#include "opapi.h"

namespace {
namespace prelu {  // (the ops build as one translation unit: names of its own)

using stub::Arg;
using stub::Checker;

const stub::OpDef kDef{"aclnnPreluBackward", nullptr, nullptr};

struct Call {
    const aclTensor *dy, *x, *w, *gi, *gw;
    Arg Dy() const { return {"gradOutput", dy}; }
    Arg X() const { return {"self", x}; }
    Arg W() const { return {"weight", w}; }
    Arg Gi() const { return {"gradInput", gi}; }
    Arg Gw() const { return {"gradWeight", gw}; }
};

// Self's channel count: axis 1, 1 for a 0-d or 1-d self (CheckShape's C).
int64_t ChannelCount(const aclTensor* x) { return x->view.size() > 1 ? x->view[1] : 1; }

// CheckShape in the contract's _shape_rule order: gradInput self's shape; weight of 1 or C elements (a 0-d self
// takes one); gradWeight [C] for C weights, weight's shape for one; gradOutput broadcasting to self's shape.
aclnnStatus Shapes(const Checker& c, const Call& a) {
    RETURN_IF_FAILED(c.SameShape({a.X(), a.Gi()}));
    int64_t count = stub::Numel(a.w->view), channels = ChannelCount(a.x);
    if (count != 1) {
        if (a.x->view.empty()) {
            return c.Invalid("weight has " + std::to_string(count) + " elements; a 0-d self takes one");
        }
        if (count != channels) {
            return c.Invalid("weight has " + std::to_string(count) + " elements; it takes 1 or self's channel count " +
                             std::to_string(channels));
        }
        if (a.gw->view != std::vector<int64_t>{channels}) {
            return c.Invalid("gradWeight shape " + stub::ShapeStr(a.gw->view) + " is not [" +
                             std::to_string(channels) + "] (self's channels)");
        }
    } else {
        RETURN_IF_FAILED(c.SameShape({a.W(), a.Gw()}));
    }
    // gradOutput broadcasts to self: each of its trailing dims 1 or self's, no more dims than self.
    const std::vector<int64_t>&x = a.x->view, &dy = a.dy->view;
    bool fits = dy.size() <= x.size();
    for (size_t i = 0; fits && i < dy.size(); ++i) {
        int64_t d = dy[dy.size() - 1 - i];
        fits = d == 1 || d == x[x.size() - 1 - i];
    }
    if (!fits) {
        return c.Invalid("gradOutput shape " + stub::ShapeStr(dy) + " does not broadcast to self's " +
                         stub::ShapeStr(x));
    }
    return ACLNN_SUCCESS;
}

// Phase one in the contract's order (aclnn_cli.ops.contract.check): the five tensors null (161001, in the API's
// order); each dtype in the product's list (bf16 on 950, A3, A2; fp32, fp16 on the 910; none elsewhere); all of
// self's dtype; each 0-8 dims; the shapes.
aclnnStatus Check(const Checker& c, const Call& a) {
    RETURN_IF_FAILED(c.NotNull({a.Dy(), a.X(), a.W(), a.Gi(), a.Gw()}));
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "910", stub::kFp32Fp16);
    RETURN_IF_FAILED(c.DtypesIn(ok, {a.Dy(), a.X(), a.W(), a.Gi(), a.Gw()}));
    RETURN_IF_FAILED(c.SameDtype({a.X(), a.Dy(), a.W(), a.Gi(), a.Gw()}));
    RETURN_IF_FAILED(c.Dims(0, 8, {a.Dy(), a.X(), a.W(), a.Gi(), a.Gw()}));
    return Shapes(c, a);
}

using Floats = std::vector<float>;

// The 950's kernels on self's elements in row-major order, cut (a1, r, a0) = (N, C, S), or one block (1, 1, all)
// for one weight. In T (the inputs' dtype): dx = self > 0 ? dy : fl_T(w * dy); update = self > 0 ? 0 :
// fl_T(self * dy) (a product of two T values is exact in float32: rounding it to T once is the device's Mul in T;
// NaN and -0 fail the compare, as Compare GT). gradWeight[c] = the float32 tree sum of channel c's updates in
// (n, s) order, rounded to T by the caller's write.
void Kernel(const stub::Rows& cut, const Floats& dy, const Floats& x, const Floats& w, aclDataType t, Floats& dx,
            Floats& dw) {
    Floats terms(static_cast<size_t>(cut.a1 * cut.a0));
    for (int64_t c = 0; c < cut.r; ++c) {
        float wc = w[static_cast<size_t>(c)];
        size_t k = 0;
        for (int64_t n = 0; n < cut.a1; ++n) {
            for (int64_t s = 0; s < cut.a0; ++s) {
                size_t at = static_cast<size_t>((n * cut.r + c) * cut.a0 + s);
                bool pos = x[at] > 0.0f;
                dx[at] = pos ? dy[at] : stub::RoundTo(wc * dy[at], t, false);
                terms[k++] = pos ? 0.0f : stub::RoundTo(x[at] * dy[at], t, false);
            }
        }
        dw[static_cast<size_t>(c)] = stub::TreeSum(terms.data(), static_cast<int64_t>(terms.size()), 1);
    }
}

// The job: copies of the five tensors; an empty gradOutput, self or weight launches nothing (nothing written).
stub::Job MakeJob(const Call& a) {
    if (stub::Numel(a.dy->view) == 0 || stub::Numel(a.x->view) == 0 || stub::Numel(a.w->view) == 0) return {};
    stub::Job job;
    int dy = job.Add(a.dy), x = job.Add(a.x), w = job.Add(a.w);
    int gi = job.Add(a.gi, true), gw = job.Add(a.gw, true);
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& xt = j.T(x);
        const aclTensor& wt = j.T(w);
        bool one = stub::Numel(wt.view) == 1;  // one weight: self is one block, gradWeight its whole sum
        stub::Rows cut = one ? stub::Rows({stub::Numel(xt.view)}, 1, 1) : stub::Rows(xt.view, 1, 2);
        Floats dx(static_cast<size_t>(stub::Numel(xt.view))), dw(static_cast<size_t>(cut.r));
        // dy read in self's shape (broadcast), weight flat (any shape of C elements: the op_api flattens it)
        Kernel(cut, stub::ReadFloats(j.T(dy), xt.view), stub::ReadFloats(xt, xt.view),
               stub::ReadFloats(wt, wt.view), xt.dtype, dx, dw);
        j.Write(gi, dx, negate);
        j.Write(gw, dw, negate);
    };
    return job;
}

}  // namespace prelu
}  // namespace

extern "C" {

// 950, A3, A2 (fp32, fp16, bf16); 910 (fp32, fp16). See prelu::Check for the order of the checks.
aclnnStatus aclnnPreluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                               const aclTensor* weight, aclTensor* gradInput, aclTensor* gradWeight,
                                               uint64_t* workspaceSize, aclOpExecutor** executor) {
    prelu::Call a{gradOutput, self, weight, gradInput, gradWeight};
    return stub::PhaseOneJob(prelu::kDef, workspaceSize, executor, [&](stub::Checker& c) { return prelu::Check(c, a); },
                             [&](const stub::Checker&) { return prelu::MakeJob(a); });
}

STUB_PHASE_TWO(aclnnPreluBackward, prelu::kDef)

}  // extern "C"
