// libopapi of the stub: BatchNormBackward (norm/batch_norm_grad_v3).
//
// Phase one: the statuses of aclnn-cli's contract for the op (aclnn_cli/ops/batch_norm_backward.py, whose
// CONTRACT_NOTES follow the op_api source): nulls 161001, then everything else 161002. Phase two: the 950
// kernels in float32 over the channels (axis 1 of an (N, C, ...) input), each channel's M = N * S elements.
#include <cmath>

#include "aclnnop/aclnn_batch_norm_backward.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Checker;

const stub::OpDef kBatchNorm{"aclnnBatchNormBackward", nullptr, nullptr};

// The tensors in the API's order: seven inputs, then the three outputs outputMask switches.
enum Slot { kDy, kX, kWeight, kRunMean, kRunVar, kSaveMean, kSaveInvstd, kGradInput, kGradWeight, kGradBias, kSlots };
const char* const kNames[kSlots] = {"gradOut",  "input",      "weight",    "runningMean", "runningVar",
                                    "saveMean", "saveInvstd", "gradInput", "gradWeight",  "gradBias"};

struct BnCall {
    const aclTensor* t[kSlots];
    bool training;
    float eps;  // the op_api narrows the double to float32
    bool mask[3] = {false, false, false};

    Arg A(int k) const { return {kNames[k], t[k]}; }
    bool Null(int k) const { return t[k] == nullptr; }
};

// The dtype relations (RegbaseCheckDtypeSame, in the order of the contract's _dtype_rule): gradOut = input =
// gradInput; the per-channel inputs FLOAT or input's, the pairs alike; gradWeight, gradBias FLOAT or weight's
// (input's for a null weight), alike.
aclnnStatus DtypeRelations(const Checker& c, const BnCall& b) {
    aclDataType x = b.t[kX]->dtype;
    RETURN_IF_FAILED(c.SameDtype({b.A(kX), b.A(kDy)}));
    for (int k = kWeight; k <= kSaveInvstd; ++k) {
        if (!b.Null(k) && b.t[k]->dtype != ACL_FLOAT && b.t[k]->dtype != x) {
            return c.Invalid(std::string(kNames[k]) + " dtype " + stub::DTypeName(b.t[k]->dtype) +
                             " is neither FLOAT nor input's");
        }
    }
    for (int k : {kRunMean, kSaveMean, kGradWeight}) {
        if (!b.Null(k) && !b.Null(k + 1)) RETURN_IF_FAILED(c.SameDtype({b.A(k), b.A(k + 1)}));
    }
    if (!b.Null(kGradInput)) RETURN_IF_FAILED(c.SameDtype({b.A(kX), b.A(kGradInput)}));
    aclDataType w = b.Null(kWeight) ? x : b.t[kWeight]->dtype;
    for (int k : {kGradWeight, kGradBias}) {
        if (!b.Null(k) && b.t[k]->dtype != ACL_FLOAT && b.t[k]->dtype != w) {
            return c.Invalid(std::string(kNames[k]) + " dtype " + stub::DTypeName(b.t[k]->dtype) +
                             " is neither FLOAT nor weight's " + stub::DTypeName(w));
        }
    }
    return ACLNN_SUCCESS;
}

// CheckShape: input 2-8 dims (N, C, ...), gradOut and gradInput input's shape, each per-channel tensor [C].
aclnnStatus Shapes(const Checker& c, const BnCall& b) {
    const std::vector<int64_t>& shape = b.t[kX]->view;
    if (shape.size() < 2 || shape.size() > 8) {
        return c.Invalid("input has " + std::to_string(shape.size()) + " dims; it takes 2-8 (N, C, ...)");
    }
    RETURN_IF_FAILED(c.SameShape({b.A(kX), b.A(kDy)}));
    if (!b.Null(kGradInput)) RETURN_IF_FAILED(c.SameShape({b.A(kX), b.A(kGradInput)}));
    for (int k = kWeight; k < kSlots; ++k) {
        if (k == kGradInput || b.Null(k)) continue;
        if (b.t[k]->view != std::vector<int64_t>{shape[1]}) {
            return c.Invalid(std::string(kNames[k]) + " shape " + stub::ShapeStr(b.t[k]->view) + " is not [C] = [" +
                             std::to_string(shape[1]) + "]");
        }
    }
    return ACLNN_SUCCESS;
}

// Phase one in the contract's order (aclnn_cli.ops.contract.check): gradOut, input, outputMask null (161001);
// the product and each tensor's dtype list; 1-8 dims each; outputMask of 3 values; a requested output null
// (161001 in the source: 161002, as the contract reports it); the dtype relations; the shapes.
aclnnStatus Check(Checker& c, BnCall& b, const aclBoolArray* outputMask) {
    RETURN_IF_FAILED(c.NotNull({b.A(kDy), b.A(kX)}));
    if (outputMask == nullptr) return c.Null("outputMask");
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "910", stub::kFp32Fp16);
    if (ok.empty()) return c.Unsupported();
    for (int k = 0; k < kSlots; ++k) {
        bool tied = k == kDy || k == kX || k == kGradInput;  // the others take any of FLOAT, FLOAT16, BF16
        if (!b.Null(k)) RETURN_IF_FAILED(c.DtypesIn(tied ? ok : stub::kFloats, {b.A(k)}));
    }
    for (int k = 0; k < kSlots; ++k) {
        if (!b.Null(k)) RETURN_IF_FAILED(c.Dims(1, 8, {b.A(k)}));
    }
    if (outputMask->values.size() != 3) {
        return c.Invalid("outputMask has " + std::to_string(outputMask->values.size()) + " values; it takes 3");
    }
    for (int k = 0; k < 3; ++k) {
        b.mask[k] = outputMask->values[static_cast<size_t>(k)];
        if (b.mask[k] && b.Null(kGradInput + k)) {
            return c.Invalid(std::string(kNames[kGradInput + k]) + " is a null pointer while outputMask[" +
                             std::to_string(k) + "] is true");
        }
    }
    RETURN_IF_FAILED(DtypeRelations(c, b));
    return Shapes(c, b);
}

using Floats = std::vector<float>;

// gradOut and input as the kernels walk them: row-major, element (n, c, s) at (n * C + c) * S + s.
struct Channels {
    stub::Rows cut;  // a1 = N, r = C, a0 = S
    Floats dy, x;

    int64_t M() const { return cut.a1 * cut.a0; }
    // f(k, at) for each element of channel c: k its index in the channel, in (n, s) order; at its index in dy, x.
    template <class F>
    void Each(int64_t c, F f) const {
        size_t k = 0;
        for (int64_t n = 0; n < cut.a1; ++n) {
            for (int64_t s = 0; s < cut.a0; ++s) f(k++, static_cast<size_t>((n * cut.r + c) * cut.a0 + s));
        }
    }
};

// The 950's kernels (batch_norm_grad_v3 arch35), each step rounded to float32; g, mean, rstd / inv per channel.
// training: t = ((x - mean) * dy) * rstd; dgamma = sum t, dbeta = sum dy (pairwise);
// dx = rstd * (g * (dy - (((x - mean) * rstd) * dgamma + dbeta) * fl(1 / M))).
void Train(const Channels& ch, const Floats& g, const Floats& mean, const Floats& rstd, Floats& dx, Floats& dg,
           Floats& db) {
    Floats terms(static_cast<size_t>(ch.M())), dys(terms.size());
    float recip = 1.0f / static_cast<float>(ch.M());
    for (int64_t c = 0; c < ch.cut.r; ++c) {
        size_t i = static_cast<size_t>(c);
        float mu = mean[i], r = rstd[i];
        ch.Each(c, [&](size_t k, size_t at) {
            terms[k] = ((ch.x[at] - mu) * ch.dy[at]) * r;
            dys[k] = ch.dy[at];
        });
        dg[i] = stub::PairwiseSum(terms.data(), ch.M(), 1);
        db[i] = stub::PairwiseSum(dys.data(), ch.M(), 1);
        ch.Each(c, [&](size_t, size_t at) {
            float corr = (((ch.x[at] - mu) * r) * dg[i] + db[i]) * recip;
            dx[at] = r * (g[i] * (ch.dy[at] - corr));
        });
    }
}

// inference: dx = (dy * g) * invstd; gradWeight = sum dy * ((x - mean) * invstd), gradBias = sum dy.
void Infer(const Channels& ch, const Floats& g, const Floats& mean, const Floats& inv, Floats& dx, Floats& dg,
           Floats& db) {
    Floats terms(static_cast<size_t>(ch.M())), dys(terms.size());
    for (int64_t c = 0; c < ch.cut.r; ++c) {
        size_t i = static_cast<size_t>(c);
        ch.Each(c, [&](size_t k, size_t at) {
            terms[k] = ch.dy[at] * ((ch.x[at] - mean[i]) * inv[i]);
            dys[k] = ch.dy[at];
            dx[at] = (ch.dy[at] * g[i]) * inv[i];
        });
        dg[i] = stub::PairwiseSum(terms.data(), ch.M(), 1);
        db[i] = stub::PairwiseSum(dys.data(), ch.M(), 1);
    }
}

// The job: copies of the non-null tensors, the outputs outputMask asks for. Nothing is launched when no
// output is asked for or the input is empty (C = 0, or M = 0: nothing written, as the op_api).
stub::Job BnJob(const BnCall& b) {
    stub::Job job;
    int in[kGradInput], out[3];
    for (int k = 0; k < kGradInput; ++k) in[k] = job.Add(b.t[k]);
    for (int k = 0; k < 3; ++k) out[k] = b.mask[k] ? job.Add(b.t[kGradInput + k], true) : -1;
    if (job.outputs.empty() || stub::Numel(b.t[kX]->view) == 0) return stub::Job{};
    bool training = b.training;
    float eps = b.eps;
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& xt = j.T(in[kX]);
        Channels ch{stub::Rows(xt.view, 1, 2), stub::ReadFloats(j.T(in[kDy]), xt.view), stub::ReadFloats(xt, xt.view)};
        size_t cs = static_cast<size_t>(ch.cut.r);
        auto channel = [&](int k, float fill) {  // a null optional input: the op_api's fill
            return in[k] >= 0 ? stub::ReadFloats(j.T(in[k]), j.T(in[k]).view) : Floats(cs, fill);
        };
        Floats g = channel(kWeight, 1.0f), dx(ch.x.size()), dg(cs), db(cs);
        if (training) {
            Train(ch, g, channel(kSaveMean, 0.0f), channel(kSaveInvstd, 1.0f), dx, dg, db);
        } else {
            Floats inv = channel(kRunVar, 1.0f);
            for (float& v : inv) {  // rsqrt(fl(var + eps)), correctly rounded
                v = static_cast<float>(1.0 / std::sqrt(static_cast<double>(v + eps)));
            }
            Infer(ch, g, channel(kRunMean, 0.0f), inv, dx, dg, db);
        }
        j.Write(out[0], dx, negate);
        j.Write(out[1], dg, negate);
        j.Write(out[2], db, negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950, A3, A2 (bf16 too); 910 (fp32, fp16). See Check for the order of the checks.
aclnnStatus aclnnBatchNormBackwardGetWorkspaceSize(const aclTensor* gradOut, const aclTensor* input,
                                                   const aclTensor* weight, const aclTensor* runningMean,
                                                   const aclTensor* runningVar, const aclTensor* saveMean,
                                                   const aclTensor* saveInvstd, bool training, double eps,
                                                   const aclBoolArray* outputMask, aclTensor* gradInput,
                                                   aclTensor* gradWeight, aclTensor* gradBias, uint64_t* workspaceSize,
                                                   aclOpExecutor** executor) {
    BnCall b{{gradOut, input, weight, runningMean, runningVar, saveMean, saveInvstd, gradInput, gradWeight, gradBias},
             training, static_cast<float>(eps)};
    return stub::PhaseOneJob(kBatchNorm, workspaceSize, executor, [&](Checker& c) { return Check(c, b, outputMask); },
                             [&](const Checker&) { return BnJob(b); });
}

STUB_PHASE_TWO(aclnnBatchNormBackward, kBatchNorm)

}  // extern "C"
