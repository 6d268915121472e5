// libopapi of the stub: aclnnMatmul and aclnnBatchMatMul (hicann/ops-nn matmul/mat_mul_v3 and batch_mat_mul_v3
// op_api, the 950's cube kernels).
//
// Phase one: the statuses of aclnn-cli's contracts for the two ops (aclnn_cli/ops/contraction/matmul.py, after
// aclnn_matmul.cpp's CheckInputParams; batch_mat_mul.py, after aclnn_batch_matmul.cpp's CheckShape): nulls 161001,
// then everything else 161002. Matmul: FLOAT, FLOAT16, BF16 each (the inputs promote, out any of them), cubeMathType
// 0-4, self and mat2 of 1-6 dims, K equal, batch dims broadcasting (torch.matmul's shapes); out's shape is not
// checked there (the real op_api fails later, in its graph, where the element counts differ: the stub refuses it
// here). BatchMatMul: one dtype for all, 3-d tensors, K equal, batches equal or one of them 1, out (B, M, N).
// Phase two: each output element a float32 sum over K in the cube's order (cube.h, CubeDot), rounded once to out's
// dtype; under cubeMathType 2 (USE_FP16) with operands computed as float32, the operands and the result rounded to
// float16 first (Dav2201MatMulRule's FP16 upper dtype and output dtype). The broadcast batch of an operand is read at
// its broadcast index.
#include <algorithm>
#include <string>
#include <vector>

#include "aclnnop/aclnn_batch_matmul.h"
#include "aclnnop/aclnn_matmul.h"
#include "cube.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Checker;

const stub::OpDef kMatmul{"aclnnMatmul", nullptr, nullptr};
const stub::OpDef kBatchMatMul{"aclnnBatchMatMul", nullptr, nullptr};

constexpr int kMmUseFp16 = 2;  // cubeMathType USE_FP16

// The matrices of self @ mat2 under torch.matmul's rules.
struct MmShapes {
    std::vector<int64_t> batch, left, right;  // out's batch dims, each operand's padded to as many
    int64_t m = 1, k = 1, n = 1;
    std::vector<int64_t> out;
    std::string problem;  // empty: they multiply
};

MmShapes MmAnalyse(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    MmShapes s;
    if (a.empty() || b.empty()) {
        s.problem = "a 0-d operand";
        return s;
    }
    s.m = a.size() == 1 ? 1 : a[a.size() - 2];
    s.k = a.back();
    int64_t k2 = b.size() == 1 ? b[0] : b[b.size() - 2];
    s.n = b.size() == 1 ? 1 : b.back();
    if (s.k != k2) {
        s.problem = "K differs: " + std::to_string(s.k) + " and " + std::to_string(k2);
        return s;
    }
    std::vector<int64_t> lb(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
    std::vector<int64_t> rb(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
    size_t nd = std::max(lb.size(), rb.size());
    lb.insert(lb.begin(), nd - lb.size(), 1);
    rb.insert(rb.begin(), nd - rb.size(), 1);
    for (size_t i = 0; i < nd; ++i) {
        if (lb[i] != rb[i] && lb[i] != 1 && rb[i] != 1) {
            s.problem = "batch dims do not broadcast";
            return s;
        }
        s.batch.push_back(lb[i] == 1 ? rb[i] : lb[i]);
    }
    s.left = lb;
    s.right = rb;
    s.out = s.batch;
    if (a.size() > 1) s.out.push_back(s.m);
    if (b.size() > 1) s.out.push_back(s.n);
    return s;
}

// The flat index in an operand's own (padded) batch dims of output batch b.
int64_t MmSource(const MmShapes& s, const std::vector<int64_t>& own, int64_t b) {
    int64_t src = 0, rest = b, scale = 1;
    for (size_t d = s.batch.size(); d-- > 0;) {
        int64_t digit = rest % s.batch[d];
        rest /= s.batch[d];
        src += (own[d] == 1 ? 0 : digit) * scale;
        scale *= own[d];
    }
    return src;
}

stub::Job MmJob(const aclTensor* self, const aclTensor* mat2, const aclTensor* out, int cubeMathType) {
    stub::Job job;
    int a = job.Add(self), b = job.Add(mat2), o = job.Add(out, true);
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& at = j.T(a);
        const aclTensor& bt = j.T(b);
        const aclTensor& ot = j.T(o);
        MmShapes s = MmAnalyse(at.view, bt.view);
        bool wide = at.dtype == ACL_FLOAT || bt.dtype == ACL_FLOAT || at.dtype != bt.dtype;
        bool dot = at.view.size() == 1 && bt.view.size() == 1;
        bool fp16 = cubeMathType == kMmUseFp16 && wide && !dot;
        std::vector<float> x = stub::ReadFloats(at, at.view), y = stub::ReadFloats(bt, bt.view);
        if (fp16) {
            for (float& v : x) v = stub::RoundTo(v, ACL_FLOAT16, false);
            for (float& v : y) v = stub::RoundTo(v, ACL_FLOAT16, false);
        }
        int64_t blocks = stub::Numel(s.batch);
        std::vector<float> result(static_cast<size_t>(blocks * s.m * s.n));
        for (int64_t bi = 0; bi < blocks; ++bi) {
            const float* left = x.data() + MmSource(s, s.left, bi) * s.m * s.k;
            const float* right = y.data() + MmSource(s, s.right, bi) * s.k * s.n;
            for (int64_t i = 0; i < s.m; ++i) {
                for (int64_t jn = 0; jn < s.n; ++jn) {
                    float v = stub::CubeDot(left + i * s.k, right + jn, s.n, s.k);
                    result[static_cast<size_t>((bi * s.m + i) * s.n + jn)] = fp16 ? stub::RoundTo(v, ACL_FLOAT16, false) : v;
                }
            }
        }
        stub::WriteFloats(ot, result, ot.dtype, negate);
    };
    return job;
}

aclnnStatus CheckMatmul(const Checker& c, const aclTensor* self, const aclTensor* mat2, const aclTensor* out,
                        int cubeMathType) {
    RETURN_IF_FAILED(c.NotNull({{"self", self}, {"mat2", mat2}, {"out", out}}));
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "", stub::kFp32Fp16);
    if (ok.empty()) return c.Unsupported();
    RETURN_IF_FAILED(c.DtypesIn(ok, {{"self", self}, {"mat2", mat2}, {"out", out}}));
    if (cubeMathType < 0 || cubeMathType > 4) return c.Invalid("cubeMathType " + std::to_string(cubeMathType));
    RETURN_IF_FAILED(c.Dims(1, 6, {{"self", self}, {"mat2", mat2}}));
    MmShapes s = MmAnalyse(self->view, mat2->view);
    if (!s.problem.empty()) return c.Invalid(s.problem);
    if (stub::Numel(out->view) != stub::Numel(s.out)) return c.Invalid("out holds another number of elements");
    return ACLNN_SUCCESS;
}

aclnnStatus CheckBatchMatMul(const Checker& c, const aclTensor* self, const aclTensor* mat2, const aclTensor* out) {
    RETURN_IF_FAILED(c.NotNull({{"self", self}, {"mat2", mat2}, {"out", out}}));
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "", stub::kFp32Fp16);
    if (ok.empty()) return c.Unsupported();
    RETURN_IF_FAILED(c.DtypesIn(ok, {{"self", self}, {"mat2", mat2}, {"out", out}}));
    RETURN_IF_FAILED(c.SameDtype({{"self", self}, {"mat2", mat2}, {"out", out}}));
    RETURN_IF_FAILED(c.Dims(3, 3, {{"self", self}, {"mat2", mat2}, {"out", out}}));
    MmShapes s = MmAnalyse(self->view, mat2->view);
    if (!s.problem.empty()) return c.Invalid(s.problem);
    if (out->view != s.out) return c.Invalid("out's shape is not (B, M, N)");
    return ACLNN_SUCCESS;
}

}  // namespace

extern "C" {

// 950, A3, A2: FLOAT, FLOAT16, BF16. See CheckMatmul for the order of the checks.
aclnnStatus aclnnMatmulGetWorkspaceSize(const aclTensor* self, const aclTensor* mat2, aclTensor* out,
                                        int8_t cubeMathType, uint64_t* workspaceSize, aclOpExecutor** executor) {
    int math = cubeMathType;
    return stub::PhaseOneJob(kMatmul, workspaceSize, executor,
                             [&](Checker& c) { return CheckMatmul(c, self, mat2, out, math); },
                             [&](const Checker&) { return MmJob(self, mat2, out, math); });
}

STUB_PHASE_TWO(aclnnMatmul, kMatmul)

// 950, A3, A2: FLOAT, FLOAT16, BF16, one for all three. See CheckBatchMatMul.
aclnnStatus aclnnBatchMatMulGetWorkspaceSize(const aclTensor* self, const aclTensor* mat2, aclTensor* out,
                                             int8_t cubeMathType, uint64_t* workspaceSize, aclOpExecutor** executor) {
    int math = cubeMathType;
    return stub::PhaseOneJob(kBatchMatMul, workspaceSize, executor,
                             [&](Checker& c) { return CheckBatchMatMul(c, self, mat2, out); },
                             [&](const Checker&) { return MmJob(self, mat2, out, math); });
}

STUB_PHASE_TWO(aclnnBatchMatMul, kBatchMatMul)

}  // extern "C"
