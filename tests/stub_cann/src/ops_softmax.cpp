// libopapi of the stub: SoftmaxBackward and LogSoftmaxBackward (activation/softmax_grad, log_softmax_grad).
//
// Phase one: the checks of op_api/aclnn_softmax_backward.cpp and aclnn_logsoftmax_backward.cpp, in their
// order; phase two: the 950 kernels' float32 formulas along `dim` (shape cut as (A1, R, A0)), the result
// rounded to the inputs' dtype, then cast to out's (l0op::Cast).
#include <cmath>

#include "aclnnop/aclnn_logsoftmax_backward.h"
#include "aclnnop/aclnn_softmax_backward.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Checker;

const stub::OpDef kSoftmax{"aclnnSoftmaxBackward", nullptr, nullptr};
const stub::OpDef kLogSoftmax{"aclnnLogSoftmaxBackward", nullptr, nullptr};

// dim in [-n, n-1], a 0-d tensor counting as n = 1 (CheckDim).
aclnnStatus CheckDim(const Checker& c, const aclTensor* t, int64_t dim) {
    int64_t n = std::max<int64_t>(1, static_cast<int64_t>(t->view.size()));
    if (dim >= n || dim < -n) return c.Invalid("dim " + std::to_string(dim) + " is not in [" + std::to_string(-n) +
                                               ", " + std::to_string(n - 1) + "]");
    return ACLNN_SUCCESS;
}

// What both ops share before their dtype checks: nulls (in the source's order), the product, and the early
// success of an empty tensor off the 950 (IsRegbase), which skips every later check.
aclnnStatus Prologue(Checker& c, Arg first, Arg second, Arg out, bool* empty_early) {
    RETURN_IF_FAILED(c.NotNull({first, second, out}));
    if (stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16).empty()) return c.Unsupported();
    *empty_early = c.product() != "950" && (stub::Numel(first.t->view) == 0 || stub::Numel(second.t->view) == 0);
    if (*empty_early) return ACLNN_SUCCESS;
    if (!stub::In(out.t->dtype, stub::kOutputTypes)) {  // l0op::Cast would take more; the stub stores floats only
        return c.Invalid("out dtype " + stub::DTypeName(out.t->dtype) + ": the stub cannot cast to it");
    }
    return ACLNN_SUCCESS;
}

bool Bf16Refused(const Checker& c, std::initializer_list<const aclTensor*> ts) {
    if (stub::OneOf(c.product(), "950 A3 A2")) return false;
    for (const aclTensor* t : ts) {
        if (t->dtype == ACL_BF16) return true;
    }
    return false;
}

// The job of either op: per (a1, a0) column of `dim`, `row` turns the R values of dy and y into out's.
using RowKernel = void (*)(const float* dy, const float* y, float* out, int64_t r, int64_t stride);

stub::Job RowJob(const aclTensor* dy, const aclTensor* y, const aclTensor* out, int64_t dim, RowKernel row) {
    stub::Job job;
    int idy = job.Add(dy), iy = job.Add(y), iout = job.Add(out, true);
    size_t axis = static_cast<size_t>(dim < 0 ? dim + std::max<int64_t>(1, dy->view.size()) : dim);
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iout);
        std::vector<float> g = stub::ReadFloats(j.T(idy), o.view), v = stub::ReadFloats(j.T(iy), o.view);
        std::vector<float> res(g.size());
        stub::Rows rows(o.view, axis, std::min(axis + 1, o.view.size()));
        for (int64_t a1 = 0; a1 < rows.a1; ++a1) {
            for (int64_t a0 = 0; a0 < rows.a0; ++a0) {
                size_t at = static_cast<size_t>(a1 * rows.r * rows.a0 + a0);
                row(&g[at], &v[at], &res[at], rows.r, rows.a0);
            }
        }
        aclDataType compute = j.T(idy).dtype;  // the kernel's output dtype, then l0op::Cast to out's
        stub::WriteFloats(o, res, compute, negate);
    };
    return job;
}

// softmax_grad_ar_full_load.h: p = y*dy; S = sum p; out = MulAddDst(-y, S, p) = p - y*S (two roundings).
void SoftmaxRow(const float* dy, const float* y, float* out, int64_t r, int64_t stride) {
    std::vector<float> p(static_cast<size_t>(r));
    for (int64_t i = 0; i < r; ++i) p[static_cast<size_t>(i)] = y[i * stride] * dy[i * stride];
    float s = stub::PairwiseSum(p.data(), r, 1);
    for (int64_t i = 0; i < r; ++i) out[i * stride] = p[static_cast<size_t>(i)] - y[i * stride] * s;
}

// log_softmax_grad_ar_full_load.h: s = sum dy; out = dy - exp(y)*s.
void LogSoftmaxRow(const float* dy, const float* y, float* out, int64_t r, int64_t stride) {
    float s = stub::PairwiseSum(dy, r, stride);
    for (int64_t i = 0; i < r; ++i) out[i * stride] = dy[i * stride] - std::exp(y[i * stride]) * s;
}

}  // namespace

extern "C" {

// 950, A3, A2 (fp32, fp16, bf16); 910, 310P (fp32, fp16). Order: nulls; empty (not 950): success;
// bf16 gradOutput off A2/A3/950; gradOutput, output dtypes; output = gradOutput's; dim; dims <= 8;
// shapes equal. out's dtype is not checked (the result is cast to it).
aclnnStatus aclnnSoftmaxBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* output, int64_t dim,
                                                 aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
    bool empty_early = false;
    auto check = [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"output", output}, o{"out", out};
        RETURN_IF_FAILED(Prologue(c, a, b, o, &empty_early));
        if (empty_early) return ACLNN_SUCCESS;
        if (Bf16Refused(c, {gradOutput})) return c.Invalid("gradOutput BFLOAT16 is not supported on " + c.product());
        RETURN_IF_FAILED(c.DtypesIn(stub::kFloats, {a, b}));
        RETURN_IF_FAILED(c.SameDtype({a, b}));
        RETURN_IF_FAILED(CheckDim(c, gradOutput, dim));
        RETURN_IF_FAILED(c.Dims(0, 8, {a}));
        return c.SameShape({a, b, o});
    };
    return stub::PhaseOneJob(kSoftmax, workspaceSize, executor, check, [&](const Checker&) {
        return empty_early ? stub::Job{} : RowJob(gradOutput, output, out, dim, SoftmaxRow);
    });
}
STUB_PHASE_TWO(aclnnSoftmaxBackward, kSoftmax)

// As SoftmaxBackward, except: bf16 in either input refused off A2/A3/950; output's dtype list first;
// shapes (dims <= 8 each) before dim.
aclnnStatus aclnnLogSoftmaxBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* output, int64_t dim,
                                                    aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
    bool empty_early = false;
    auto check = [&](Checker& c) {
        Arg a{"gradOutput", gradOutput}, b{"output", output}, o{"out", out};
        RETURN_IF_FAILED(Prologue(c, b, a, o, &empty_early));
        if (empty_early) return ACLNN_SUCCESS;
        if (Bf16Refused(c, {gradOutput, output})) return c.Invalid("BFLOAT16 is not supported on " + c.product());
        RETURN_IF_FAILED(c.DtypesIn(stub::kFloats, {b, a}));
        RETURN_IF_FAILED(c.SameDtype({a, b}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b}));
        RETURN_IF_FAILED(c.SameShape({a, b, o}));
        return CheckDim(c, gradOutput, dim);
    };
    return stub::PhaseOneJob(kLogSoftmax, workspaceSize, executor, check, [&](const Checker&) {
        return empty_early ? stub::Job{} : RowJob(gradOutput, output, out, dim, LogSoftmaxRow);
    });
}
STUB_PHASE_TWO(aclnnLogSoftmaxBackward, kLogSoftmax)

}  // extern "C"
