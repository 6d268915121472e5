// libopapi of the stub: GroupNormBackward (norm/group_norm_grad), the groups family.
//
// Phase one: the statuses of aclnn-cli's contract for the op (aclnn_cli/ops/groups/group_norm_backward.py, checked by
// aclnn_cli.ops.contract.check), in its order: nulls 161001, then everything else 161002. Phase two: the 950
// kernel (op_kernel/arch35/group_norm_grad_base.h, _g_full_load.h) in float32, the order groups/group_norm_kernel.py
// writes down: per (n, g) of D = C / group channels of HxW elements, sums in the 950's 64-lane tree order.
#include "aclnnop/aclnn_group_norm_backward.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Checker;

const stub::OpDef kGroupNorm{"aclnnGroupNormBackward", nullptr, nullptr};

// The tensors in the API's order (the contract's too): five inputs, then the three outputs outputMask switches.
enum Slot { kDy, kX, kMean, kRstd, kGamma, kGradInput, kGradGamma, kGradBeta, kSlots };
const char* const kNames[kSlots] = {"gradOut", "input",     "mean",         "rstd",
                                    "gamma",   "gradInput", "gradGammaOut", "gradBetaOut"};

struct GnCall {
    const aclTensor* t[kSlots];
    int64_t n, c, hxw, group;
    bool mask[3] = {false, false, false};

    Arg A(int k) const { return {kNames[k], t[k]}; }
    bool Null(int k) const { return t[k] == nullptr; }
};

// CheckAttr (the contract's attribute_rule): group > 0, C divisible by group, C / group <= 8000 and C <= 240000,
// outputMask of 3 values.
aclnnStatus Attributes(const Checker& c, const GnCall& g, const aclBoolArray* outputMask) {
    if (g.group <= 0) return c.Invalid("group " + std::to_string(g.group) + " is not greater than 0");
    if (g.c % g.group != 0) {
        return c.Invalid("C " + std::to_string(g.c) + " is not divisible by group " + std::to_string(g.group));
    }
    if (g.c / g.group > 8000 || g.c > 240000) return c.Invalid("C / group is over 8000 or C over 240000");
    if (outputMask->values.size() != 3) {
        return c.Invalid("outputMask has " + std::to_string(outputMask->values.size()) + " values; it takes 3");
    }
    return ACLNN_SUCCESS;
}

// a * b, or -1 (no tensor has that many elements) where int64 overflows.
int64_t Times(int64_t a, int64_t b) {
    int64_t p = 0;
    return __builtin_mul_overflow(a, b, &p) ? -1 : p;
}

// The contract's shape_rule: a true outputMask entry beside a null output; the dtypes (input = gradOut =
// gradInput; mean input's or FLOAT; rstd, gamma, gradGammaOut, gradBetaOut mean's); CheckShape: numel of gradOut
// and input N * C * HxW, of mean and rstd N * group, of gamma C; gradInput input's shape; the channel outputs C.
aclnnStatus Relations(const Checker& c, GnCall& g, const aclBoolArray* outputMask) {
    for (int k = 0; k < 3; ++k) {
        g.mask[k] = outputMask->values[static_cast<size_t>(k)];
        if (g.mask[k] && g.Null(kGradInput + k)) {
            return c.Invalid(std::string(kNames[kGradInput + k]) + " is a null pointer while outputMask[" +
                             std::to_string(k) + "] is true");
        }
    }
    aclDataType x = g.t[kX]->dtype, m = g.t[kMean]->dtype;
    if (g.t[kDy]->dtype != x || (!g.Null(kGradInput) && g.t[kGradInput]->dtype != x)) {
        return c.Invalid(std::string("gradOut and gradInput must have input's dtype ") + stub::DTypeName(x));
    }
    if (m != x && m != ACL_FLOAT) {
        return c.Invalid(std::string("mean dtype ") + stub::DTypeName(m) + " is neither input's nor FLOAT");
    }
    for (int k : {kRstd, kGamma, kGradGamma, kGradBeta}) {
        if (!g.Null(k) && g.t[k]->dtype != m) {
            return c.Invalid(std::string(kNames[k]) + " dtype " + stub::DTypeName(g.t[k]->dtype) + " is not mean's " +
                             stub::DTypeName(m));
        }
    }
    int64_t whole = Times(Times(g.n, g.c), g.hxw), rows = Times(g.n, g.group);
    auto numel = [&](int k, int64_t want) {
        if (g.Null(k) || stub::Numel(g.t[k]->view) == want) return ACLNN_SUCCESS;
        int64_t have = stub::Numel(g.t[k]->view);
        return c.Invalid(std::string(kNames[k]) + " has " + std::to_string(have) + " elements, not " +
                         std::to_string(want));
    };
    RETURN_IF_FAILED(numel(kDy, whole));
    RETURN_IF_FAILED(numel(kX, whole));
    RETURN_IF_FAILED(numel(kMean, rows));
    RETURN_IF_FAILED(numel(kRstd, rows));
    RETURN_IF_FAILED(numel(kGamma, g.c));
    if (!g.Null(kGradInput)) RETURN_IF_FAILED(c.SameShape({g.A(kX), g.A(kGradInput)}));
    RETURN_IF_FAILED(numel(kGradGamma, g.c));
    return numel(kGradBeta, g.c);
}

// Phase one in the contract's order: gradOut, input, mean, rstd null, then outputMask null (161001); the product
// and each tensor's dtype list (gradOut, input, gradInput the product's; the others FLOAT, FLOAT16, BF16); 0-8
// dims each; the attributes; the relations.
aclnnStatus Check(Checker& c, GnCall& g, const aclBoolArray* outputMask) {
    RETURN_IF_FAILED(c.NotNull({g.A(kDy), g.A(kX), g.A(kMean), g.A(kRstd)}));
    if (outputMask == nullptr) return c.Null("outputMask");
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "910", stub::kFp32Fp16);
    if (ok.empty()) return c.Unsupported();
    for (int k = 0; k < kSlots; ++k) {
        bool tied = k == kDy || k == kX || k == kGradInput;
        if (!g.Null(k)) RETURN_IF_FAILED(c.DtypesIn(tied ? ok : stub::kFloats, {g.A(k)}));
    }
    for (int k = 0; k < kSlots; ++k) {
        if (!g.Null(k)) RETURN_IF_FAILED(c.Dims(0, 8, {g.A(k)}));
    }
    RETURN_IF_FAILED(Attributes(c, g, outputMask));
    return Relations(c, g, outputMask);
}

using Floats = std::vector<float>;

// The 950's kernel on (n, c, hw)-ordered input (module comment; group_norm_kernel.py's docstring), each step
// rounded to float32 (no FMA). dx per element; dgamma, dbeta per channel, the samples' partials added in order.
struct Groups {
    int64_t n, c, hxw, group;
    const Floats &dy, &x, &mean, &rstd, &gamma;

    void Run(Floats& dx, Floats& dg, Floats& db) const {
        int64_t d = c / group;
        if (n == 0) return;  // (HxW may be anything then)
        size_t hw = static_cast<size_t>(hxw);
        float s = 1.0f / static_cast<float>(d * hxw > 0 ? d * hxw : 1);
        Floats prod(hw), ds(static_cast<size_t>(d)), dsum(ds.size()), t1(ds.size()), t2(ds.size());
        for (int64_t i = 0; i < n; ++i) {
            for (int64_t gi = 0; gi < group; ++gi) {
                size_t row = static_cast<size_t>(i * group + gi);
                float mu = mean[row], r = rstd[row];
                size_t first = static_cast<size_t>(i * c + gi * d);  // the group's first channel of sample i
                for (size_t k = 0; k < ds.size(); ++k) {
                    size_t at = (first + k) * hw;
                    for (size_t j = 0; j < hw; ++j) prod[j] = x[at + j] * dy[at + j];
                    ds[k] = stub::TreeSum(prod.data(), hxw, 1);
                    dsum[k] = stub::TreeSum(dy.data() + at, hxw, 1);
                    t1[k] = ds[k] * gamma[gi * d + static_cast<int64_t>(k)];
                    t2[k] = dsum[k] * gamma[gi * d + static_cast<int64_t>(k)];
                }
                float sum1 = stub::TreeSum(t1.data(), d, 1), sum2 = stub::TreeSum(t2.data(), d, 1);
                float c2 = ((((sum2 * mu) - sum1) * r) * r) * r * s;
                float c3 = (-c2 * mu) - ((sum2 * r) * s);
                for (size_t k = 0; k < ds.size(); ++k) {
                    size_t ch = static_cast<size_t>(gi * d) + k, at = (first + k) * hw;
                    float gr = gamma[ch] * r;
                    for (size_t j = 0; j < hw; ++j) dx[at + j] = ((x[at + j] * c2) + (dy[at + j] * gr)) + c3;
                    float pg = (ds[k] - dsum[k] * mu) * r;
                    dg[ch] = i == 0 ? pg : dg[ch] + pg;  // float32 atomic adds, sample after sample
                    db[ch] = i == 0 ? dsum[k] : db[ch] + dsum[k];
                }
            }
        }
    }
};

// The job: copies of the non-null tensors, the outputs outputMask asks for, each result rounded once (to nearest
// even) to its output's dtype. Nothing is launched when no output is asked for or they hold no element, nor for the
// negative sizes the contract lets through (N = 1, C = -4, HxW = -2); an empty input with C > 0 gives zero channel
// sums (the 950's kernel over no element).
stub::Job GnJob(const GnCall& g) {
    stub::Job job;
    int in[kGradInput], out[3];
    for (int k = 0; k < kGradInput; ++k) in[k] = job.Add(g.t[k]);
    for (int k = 0; k < 3; ++k) out[k] = g.mask[k] ? job.Add(g.t[kGradInput + k], true) : -1;
    if (job.Work() == 0 || g.n < 0 || g.c < 0 || g.hxw < 0) return stub::Job{};
    int64_t n = g.n, c = g.c, hxw = g.hxw, group = g.group;
    job.run = [=](const stub::Job& j, bool negate) {
        auto read = [&](int k) { return stub::ReadFloats(j.T(in[k]), j.T(in[k]).view); };
        Floats dy = read(kDy), x = read(kX), mean = read(kMean), rstd = read(kRstd);
        Floats gamma = in[kGamma] >= 0 ? read(kGamma) : Floats(static_cast<size_t>(c), 1.0f);  // null: ones
        Floats res[3] = {Floats(x.size()), Floats(static_cast<size_t>(c), 0.0f), Floats(static_cast<size_t>(c), 0.0f)};
        Groups{n, c, hxw, group, dy, x, mean, rstd, gamma}.Run(res[0], res[1], res[2]);  // dx, dgamma, dbeta
        for (int k = 0; k < 3; ++k) j.Write(out[k], res[k], negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950, A3, A2 (bf16 too); 910 (fp32, fp16); not 310P. See Check for the order of the checks.
aclnnStatus aclnnGroupNormBackwardGetWorkspaceSize(const aclTensor* gradOut, const aclTensor* input,
                                                   const aclTensor* mean, const aclTensor* rstd, const aclTensor* gamma,
                                                   int64_t N, int64_t C, int64_t HxW, int64_t group,
                                                   const aclBoolArray* outputMask, aclTensor* gradInput,
                                                   aclTensor* gradGammaOut, aclTensor* gradBetaOut,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
    GnCall g{{gradOut, input, mean, rstd, gamma, gradInput, gradGammaOut, gradBetaOut}, N, C, HxW, group};
    return stub::PhaseOneJob(kGroupNorm, workspaceSize, executor, [&](Checker& c) { return Check(c, g, outputMask); },
                             [&](const Checker&) { return GnJob(g); });
}

STUB_PHASE_TWO(aclnnGroupNormBackward, kGroupNorm)

}  // extern "C"
