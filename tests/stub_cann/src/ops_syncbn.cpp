// libopapi of the stub: synchronised BatchNorm's backward, BatchNormReduceBackward
// (norm/sync_batch_norm_backward_reduce).
//
// Phase one: the statuses of aclnn-cli's contract for the op (aclnn_cli/ops/channels/batch_norm_reduce_backward.py,
// whose CONTRACT_NOTES follow the op_api source): nulls 161001 (an output its mask switches on included), everything
// else 161002. Phase two: the op_api's float32 pipeline (batch_norm_reduce_kernel.py): per channel (axis 1) the tree
// sums of dy and fl(dy * x), then fl(sumDyX - fl(mean * sumDy)) and fl(that * invstd), each output rounded to its
// own dtype by the caller's write.
#include "aclnnop/aclnn_batch_norm_backward_reduce.h"
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
                             [&](Checker& c) { return syncbn::ReduceCheck(c, a); },
                             [&](const Checker& c) { return syncbn::ReduceJob(c, a); });
}

STUB_PHASE_TWO(aclnnBatchNormReduceBackward, syncbn::kReduce)

}  // extern "C"
