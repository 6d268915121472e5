// libopapi of the stub: synchronised BatchNorm's backward, BatchNormReduceBackward
// (norm/sync_batch_norm_backward_reduce) and BatchNormElemtBackward (norm/sync_batch_norm_backward_elemt).
//
// Phase one: the statuses of aclnn-cli's contracts for the ops (aclnn_cli/ops/channels/batch_norm_reduce_backward.py,
// batch_norm_elemt_backward.py, whose CONTRACT_NOTES follow the op_api sources): nulls 161001 (an output its mask
// switches on included), everything else 161002. Phase two: the op_apis' float32 computations
// (batch_norm_reduce_kernel.py: per channel (axis 1) the tree sums of dy and fl(dy * x), then fl(sumDyX - fl(mean *
// sumDy)) and fl(that * invstd); batch_norm_elemt_kernel.py: the count, the means, the DAG per element, through
// float16 where every input but counter is float16), each output rounded to its own dtype by the caller's write.
#include "aclnnop/aclnn_batch_norm_backward_reduce.h"
#include "aclnnop/aclnn_batch_norm_elemt_backward.h"
#include "elements.h"
#include "opapi.h"

namespace {
namespace syncbn {  // (the ops build as one translation unit: names of its own)

using stub::Arg;
using stub::Checker;
using Floats = std::vector<float>;

const stub::OpDef kReduce{"aclnnBatchNormReduceBackward", nullptr, nullptr};

// The tensors in the API's order; the outputs and the mask (inputG, weightG, biasG) that switches each on.
enum Slot { kDy, kX, kMean, kInv, kWeight, kSumDy, kSumDyXmu, kGradWeight, kGradBias, kSlots };
const char* const kNames[kSlots] = {"gradOut", "input",    "mean",       "invstd",  "weight",
                                    "sumDy",   "sumDyXmu", "gradWeight", "gradBias"};
const int kMaskOf[4] = {0, 0, 1, 2};  // sumDy, sumDyXmu: inputG; gradWeight: weightG; gradBias: biasG

struct ReduceCall {
    const aclTensor* t[kSlots];
    bool mask[3];

    Arg A(int k) const { return {kNames[k], t[k]}; }
    bool Null(int k) const { return t[k] == nullptr; }
    bool On(int k) const { return mask[kMaskOf[k - kSumDy]]; }
};

// Phase one in the contract's order (aclnn_cli.ops.contract.check): gradOut, input, mean, invstd null; an output
// its mask switches on null (161001); each non-null dtype in the product's list (weight: any float); gradOut's
// dtype input's; 1-8 dims each; gradOut and input 2-8 dims, C not 0, each output switched on [C].
aclnnStatus ReduceCheck(const Checker& c, const ReduceCall& a) {
    RETURN_IF_FAILED(c.NotNull({a.A(kDy), a.A(kX), a.A(kMean), a.A(kInv)}));
    for (int k = kSumDy; k < kSlots; ++k) {
        if (a.On(k) && a.Null(k)) {
            return c.Null(kNames[k]);
        }
    }
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "910", stub::kFp32Fp16);
    if (ok.empty()) return c.Unsupported();
    for (int k = 0; k < kSlots; ++k) {
        if (!a.Null(k)) RETURN_IF_FAILED(c.DtypesIn(k == kWeight ? stub::kFloats : ok, {a.A(k)}));
    }
    RETURN_IF_FAILED(c.SameDtype({a.A(kX), a.A(kDy)}));
    for (int k = 0; k < kSlots; ++k) {
        if (!a.Null(k)) RETURN_IF_FAILED(c.Dims(1, 8, {a.A(k)}));
    }
    for (int k : {kDy, kX}) RETURN_IF_FAILED(c.Dims(2, 8, {a.A(k)}));
    int64_t channels = a.t[kX]->view[1];
    if (channels == 0) return c.Invalid("input's channel axis (1) is 0");
    for (int k = kSumDy; k < kSlots; ++k) {
        if (a.On(k) && a.t[k]->view != std::vector<int64_t>{channels}) {
            return c.Invalid(std::string(kNames[k]) + " shape " + stub::ShapeStr(a.t[k]->view) + " is not [C] = [" +
                             std::to_string(channels) + "]");
        }
    }
    return ACLNN_SUCCESS;
}

// Per channel c of (N, C, S) = cut: sumDy = tree sum of dy, sumDyX = tree sum of fl(dy * x) (both in (n, s)
// order), sumDyXmu = fl(sumDyX - fl(mean * sumDy)), y = fl(sumDyXmu * invstd).
void Reduce(const stub::Rows& cut, const Floats& dy, const Floats& x, const Floats& mean, const Floats& inv,
            Floats& sum_dy, Floats& xmu, Floats& y) {
    Floats dys(static_cast<size_t>(cut.a1 * cut.a0)), dyx(dys.size());
    for (int64_t c = 0; c < cut.r; ++c) {
        size_t k = 0;
        for (int64_t n = 0; n < cut.a1; ++n) {
            for (int64_t s = 0; s < cut.a0; ++s, ++k) {
                size_t at = static_cast<size_t>((n * cut.r + c) * cut.a0 + s);
                dys[k] = dy[at];
                dyx[k] = dy[at] * x[at];
            }
        }
        size_t i = static_cast<size_t>(c);
        int64_t m = static_cast<int64_t>(dys.size());
        sum_dy[i] = stub::TreeSum(dys.data(), m, 1);
        float sum_dyx = stub::TreeSum(dyx.data(), m, 1);
        xmu[i] = sum_dyx - mean[i] * sum_dy[i];
        y[i] = xmu[i] * inv[i];
    }
}

// The job: copies of the inputs and of the outputs switched on. An empty gradOut, input, mean or invstd: on the
// 950 (a regbase SoC) every output switched on is filled with zeros, elsewhere nothing is launched.
stub::Job ReduceJob(const Checker& c, const ReduceCall& a) {
    stub::Job job;
    int in[kWeight];
    for (int k = 0; k < kWeight; ++k) in[k] = job.Add(a.t[k]);
    int out[4];
    for (int k = kSumDy; k < kSlots; ++k) out[k - kSumDy] = a.On(k) ? job.Add(a.t[k], true) : -1;
    bool empty = false;
    for (int k = 0; k < kWeight; ++k) empty = empty || stub::Numel(a.t[k]->view) == 0;
    if (job.outputs.empty() || (empty && c.product() != "950")) return stub::Job{};
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& xt = j.T(in[kX]);
        stub::Rows cut(xt.view, 1, 2);
        size_t cs = static_cast<size_t>(cut.r);
        Floats sum_dy(cs, 0.0f), xmu(cs, 0.0f), y(cs, 0.0f);
        if (!empty) {
            Reduce(cut, stub::ReadFloats(j.T(in[kDy]), xt.view), stub::ReadFloats(xt, xt.view),
                   stub::ReadFloats(j.T(in[kMean]), j.T(in[kMean]).view),
                   stub::ReadFloats(j.T(in[kInv]), j.T(in[kInv]).view), sum_dy, xmu, y);
        }
        j.Write(out[0], sum_dy, negate);
        j.Write(out[1], xmu, negate);
        j.Write(out[2], y, negate);
        j.Write(out[3], sum_dy, negate);
    };
    return job;
}

const stub::OpDef kElemt{"aclnnBatchNormElemtBackward", nullptr, nullptr};

// The tensors in the API's order.
enum ElemtSlot { eDy, eX, eMean, eInv, eWeight, eSumDy, eSumDyXmu, eCounter, eGradInput, eSlots };
const char* const kElemtNames[eSlots] = {"gradOut", "input",    "mean",    "invstd",   "weight",
                                         "sumDy",   "sumDyXmu", "counter", "gradInput"};
const int kPerChannel[5] = {eMean, eInv, eWeight, eSumDy, eSumDyXmu};

struct ElemtCall {
    const aclTensor* t[eSlots];

    Arg A(int k) const { return {kElemtNames[k], t[k]}; }
    bool Null(int k) const { return t[k] == nullptr; }
};

// Phase one in the contract's order: every tensor but weight null (161001); each non-null dtype in the product's list
// (counter: FLOAT, FLOAT16, INT32); 1-8 dims each; input 2-8 dims, C not 0, gradOut and gradInput input's shape, the
// per-channel tensors (a null weight aside) [C].
aclnnStatus ElemtCheck(const Checker& c, const ElemtCall& a) {
    for (int k = 0; k < eSlots; ++k) {
        if (k != eWeight) RETURN_IF_FAILED(c.NotNull({a.A(k)}));
    }
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "910", stub::kFp32Fp16);
    if (ok.empty()) return c.Unsupported();
    const stub::DTypes counts{ACL_FLOAT, ACL_FLOAT16, ACL_INT32};
    for (int k = 0; k < eSlots; ++k) {
        if (!a.Null(k)) RETURN_IF_FAILED(c.DtypesIn(k == eCounter ? counts : ok, {a.A(k)}));
    }
    for (int k = 0; k < eSlots; ++k) {
        if (!a.Null(k)) RETURN_IF_FAILED(c.Dims(1, 8, {a.A(k)}));
    }
    RETURN_IF_FAILED(c.Dims(2, 8, {a.A(eX)}));
    int64_t channels = a.t[eX]->view[1];
    if (channels == 0) return c.Invalid("input's channel axis (1) is 0");
    RETURN_IF_FAILED(c.SameShape({a.A(eX), a.A(eDy), a.A(eGradInput)}));
    for (int k : kPerChannel) {
        if (!a.Null(k) && a.t[k]->view != std::vector<int64_t>{channels}) {
            return c.Invalid(std::string(kElemtNames[k]) + " shape " + stub::ShapeStr(a.t[k]->view) +
                             " is not [C] = [" + std::to_string(channels) + "]");
        }
    }
    return ACLNN_SUCCESS;
}

// The op_api's P: float16 where gradOut, input, mean, invstd, weight (a null one is float32 ones), sumDy and sumDyXmu
// all are.
bool HalfPromoted(const ElemtCall& a) {
    for (int k = 0; k < eCounter; ++k) {
        if (a.Null(k) || a.t[k]->dtype != ACL_FLOAT16) return false;
    }
    return true;
}

// Per element (n, c, s) of cut = (N, C, S): count = tree sum of counter in float32; meanDy = fl(sumDy / count),
// meanDyXmu = fl(sumDyXmu / count), rounded to float16 where P is; the DAG's steps in float32, the result rounded to
// float16 where P is.
void Elemt(const stub::Rows& cut, const std::vector<Floats>& v, const Floats& counter, bool half, Floats& gi) {
    float count = stub::TreeSum(counter.data(), static_cast<int64_t>(counter.size()), 1);
    auto p = [&](float x) { return half ? stub::RoundTo(x, ACL_FLOAT16, false) : x; };
    for (int64_t c = 0; c < cut.r; ++c) {
        size_t i = static_cast<size_t>(c);
        float mean = v[eMean][i], inv = v[eInv][i], w = v[eWeight][i];
        float mdy = p(v[eSumDy][i] / count), mdxm = p(v[eSumDyXmu][i] / count);
        for (int64_t n = 0; n < cut.a1; ++n) {
            for (int64_t s = 0; s < cut.a0; ++s) {
                size_t at = static_cast<size_t>((n * cut.r + c) * cut.a0 + s);
                float sub1 = v[eDy][at] - mdy;
                float sub2 = v[eX][at] - mean;
                float mul1 = inv * inv;
                float mul2 = mdxm * mul1;
                float mul3 = sub2 * mul2;
                float sub3 = sub1 - mul3;
                float mulw = inv * w;
                gi[at] = p(sub3 * mulw);
            }
        }
    }
}

// The job: copies of the tensors; an empty gradOut or input launches nothing.
stub::Job ElemtJob(const ElemtCall& a) {
    if (stub::Numel(a.t[eDy]->view) == 0 || stub::Numel(a.t[eX]->view) == 0) return {};
    stub::Job job;
    int in[eGradInput];
    for (int k = 0; k < eGradInput; ++k) in[k] = job.Add(a.t[k]);
    int out = job.Add(a.t[eGradInput], true);
    bool half = HalfPromoted(a);
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& xt = j.T(in[eX]);
        stub::Rows cut(xt.view, 1, 2);
        std::vector<Floats> v(eCounter);
        v[eDy] = stub::ReadFloats(j.T(in[eDy]), xt.view);
        v[eX] = stub::ReadFloats(xt, xt.view);
        for (int k : kPerChannel) {
            v[static_cast<size_t>(k)] = in[k] >= 0 ? stub::ReadFloats(j.T(in[k]), j.T(in[k]).view)
                                                   : Floats(static_cast<size_t>(cut.r), 1.0f);
        }
        const aclTensor& ct = j.T(in[eCounter]);
        Floats gi(v[eX].size());
        Elemt(cut, v, stub::ReadFloats(ct, ct.view), half, gi);
        j.Write(out, gi, negate);
    };
    return job;
}

}  // namespace syncbn
}  // namespace

extern "C" {

// 950, A3, A2 (bf16 too); 910 (fp32, fp16). See syncbn::ReduceCheck for the order of the checks.
aclnnStatus aclnnBatchNormReduceBackwardGetWorkspaceSize(const aclTensor* gradOut, const aclTensor* input,
                                                         const aclTensor* mean, const aclTensor* invstd,
                                                         const aclTensor* weight, const bool inputG, const bool weightG,
                                                         const bool biasG, aclTensor* sumDy, aclTensor* sumDyXmu,
                                                         aclTensor* gradWeight, aclTensor* gradBias,
                                                         uint64_t* workspaceSize, aclOpExecutor** executor) {
    syncbn::ReduceCall a{{gradOut, input, mean, invstd, weight, sumDy, sumDyXmu, gradWeight, gradBias},
                         {inputG, weightG, biasG}};
    return stub::PhaseOneJob(syncbn::kReduce, workspaceSize, executor,
                             [&](stub::Checker& c) { return syncbn::ReduceCheck(c, a); },
                             [&](const stub::Checker& c) { return syncbn::ReduceJob(c, a); });
}

STUB_PHASE_TWO(aclnnBatchNormReduceBackward, syncbn::kReduce)

// 950, A3, A2 (bf16 too); 910 (fp32, fp16). See syncbn::ElemtCheck for the order of the checks.
aclnnStatus aclnnBatchNormElemtBackwardGetWorkspaceSize(const aclTensor* gradOut, const aclTensor* input,
                                                        const aclTensor* mean, const aclTensor* invstd,
                                                        const aclTensor* weight, const aclTensor* sumDy,
                                                        const aclTensor* sumDyXmu, aclTensor* counter,
                                                        aclTensor* gradInput, uint64_t* workspaceSize,
                                                        aclOpExecutor** executor) {
    syncbn::ElemtCall a{{gradOut, input, mean, invstd, weight, sumDy, sumDyXmu, counter, gradInput}};
    return stub::PhaseOneJob(syncbn::kElemt, workspaceSize, executor,
                             [&](stub::Checker& c) { return syncbn::ElemtCheck(c, a); },
                             [&](const stub::Checker&) { return syncbn::ElemtJob(a); });
}

STUB_PHASE_TWO(aclnnBatchNormElemtBackward, syncbn::kElemt)

}  // extern "C"
