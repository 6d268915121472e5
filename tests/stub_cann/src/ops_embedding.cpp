// libopapi of the stub: EmbeddingDenseBackward (index/embedding_dense_grad_v2 op_api, embedding_dense_grad kernels).
//
// Phase one: the statuses of aclnn-cli's contract for the op (aclnn_cli/ops/embedding_dense_backward.py, whose
// CONTRACT_NOTES follow the op_api source): nulls 161001, then everything else 161002. Phase two: the 950 kernels in
// float32: each index's rows in row order, added in groups of 5 (a group summed from 0, then added to the index's
// sum), times fl(1 / count) with scaleGradByFreq; rows of paddingIdx or outside [0, numWeights) add nothing; the
// result rounded to grad's dtype, then cast to out's. An empty grad or indices: out zero-filled.
#include <cmath>

#include "aclnnop/aclnn_embedding_dense_backward.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Checker;

const stub::OpDef kEmbedding{"aclnnEmbeddingDenseBackward", nullptr, nullptr};
const stub::DTypes kIndexTypes = {ACL_FLOAT16, ACL_FLOAT, ACL_DOUBLE, ACL_INT8, ACL_UINT8,
                                  ACL_INT16,   ACL_INT32, ACL_INT64,  ACL_BOOL};
constexpr size_t kGroup = 5;  // PROCESS_GROUP

struct EmbCall {
    const aclTensor *grad, *indices, *out;
    int64_t numWeights, paddingIdx;
    bool scale;
};

// Phase one in the contract's order (aclnn_cli.ops.contract.check): nulls; each tensor's dtype list; 1-8 dims
// each; indices' numel against grad's rows (unless D = 0); out 2-d, (numWeights, D).
aclnnStatus Check(const Checker& c, const EmbCall& e) {
    RETURN_IF_FAILED(c.NotNull({{"grad", e.grad}, {"indices", e.indices}, {"out", e.out}}));
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "910", stub::kFp32Fp16);
    if (ok.empty()) return c.Unsupported();
    RETURN_IF_FAILED(c.DtypesIn(ok, {{"grad", e.grad}}));
    RETURN_IF_FAILED(c.DtypesIn(kIndexTypes, {{"indices", e.indices}}));
    RETURN_IF_FAILED(c.DtypesIn(ok, {{"out", e.out}}));
    RETURN_IF_FAILED(c.Dims(1, 8, {{"grad", e.grad}, {"indices", e.indices}, {"out", e.out}}));
    const std::vector<int64_t>& g = e.grad->view;
    int64_t d = g.back();
    int64_t rows = stub::Numel(std::vector<int64_t>(g.begin(), g.end() - 1));
    if (d != 0 && stub::Numel(e.indices->view) != rows) {
        return c.Invalid("indices " + stub::ShapeStr(e.indices->view) + " has not one value per row of grad " +
                         stub::ShapeStr(g));
    }
    if (e.out->view != std::vector<int64_t>{e.numWeights, d}) {
        return c.Invalid("out shape " + stub::ShapeStr(e.out->view) + " is not [numWeights, D] = [" +
                         std::to_string(e.numWeights) + ", " + std::to_string(d) + "]");
    }
    return ACLNN_SUCCESS;
}

// Index values row-major: integers exactly, floats truncated toward zero (the op_api's Cast to int32).
std::vector<int64_t> Indices(const aclTensor& t) {
    if (stub::IsIntegral(t.dtype)) return stub::ReadInts(t);
    std::vector<int64_t> out;
    for (float v : stub::ReadFloats(t, t.view)) out.push_back(std::isfinite(v) ? static_cast<int64_t>(v) : -1);
    return out;
}

stub::Job EmbJob(const EmbCall& e) {
    stub::Job job;
    int g = job.Add(e.grad), ix = job.Add(e.indices), o = job.Add(e.out, true);
    int64_t width = e.numWeights, pad = e.paddingIdx;
    bool scale = e.scale;
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& gt = j.T(g);
        size_t d = static_cast<size_t>(gt.view.back());
        std::vector<float> out(static_cast<size_t>(width) * d, 0.0f);
        if (stub::Numel(gt.view) != 0 && stub::Numel(j.T(ix).view) != 0) {
            std::vector<float> rows = stub::ReadFloats(gt, gt.view);
            std::vector<int64_t> index = Indices(j.T(ix));
            std::vector<std::vector<size_t>> hits(static_cast<size_t>(width));
            for (size_t m = 0; m < index.size(); ++m) {
                if (index[m] >= 0 && index[m] < width && index[m] != pad) hits[static_cast<size_t>(index[m])].push_back(m);
            }
            for (size_t w = 0; w < hits.size(); ++w) {
                const std::vector<size_t>& mine = hits[w];
                float recip = 1.0f / static_cast<float>(mine.size());
                for (size_t k = 0; k < d; ++k) {
                    float acc = 0.0f;
                    for (size_t a = 0; a < mine.size(); a += kGroup) {
                        float group = 0.0f;
                        for (size_t b = a; b < mine.size() && b < a + kGroup; ++b) group += rows[mine[b] * d + k];
                        acc += group;
                    }
                    out[w * d + k] = scale && !mine.empty() ? acc * recip : acc;
                }
            }
        }
        stub::WriteFloats(j.T(o), out, gt.dtype, negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950, A3, A2 (bf16 too); 910 (fp32, fp16). See Check for the order of the checks.
aclnnStatus aclnnEmbeddingDenseBackwardGetWorkspaceSize(const aclTensor* grad, const aclTensor* indices,
                                                        uint64_t numWeights, uint64_t paddingIdx, bool scaleGradByFreq,
                                                        const aclTensor* out, uint64_t* workspaceSize,
                                                        aclOpExecutor** executor) {
    EmbCall e{grad, indices, out, static_cast<int64_t>(numWeights), static_cast<int64_t>(paddingIdx), scaleGradByFreq};
    return stub::PhaseOneJob(kEmbedding, workspaceSize, executor, [&](Checker& c) { return Check(c, e); },
                             [&](const Checker&) { return EmbJob(e); });
}

STUB_PHASE_TWO(aclnnEmbeddingDenseBackward, kEmbedding)

}  // extern "C"
