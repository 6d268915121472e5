// libopapi of the stub: SoftmaxBackward and LogSoftmaxBackward (activation/softmax_grad, log_softmax_grad), and
// SoftmaxGradExt (activation/softmax_grad_ext: the API generated from its OpDef).
//
// Phase one: the checks of op_api/aclnn_softmax_backward.cpp and aclnn_logsoftmax_backward.cpp, in their
// order; phase two: the 950 kernels' float32 formulas along `dim` (shape cut as (A1, R, A0)), the result
// rounded to the inputs' dtype, then cast to out's (l0op::Cast).
#include <cmath>

#include "aclnnop/aclnn_logsoftmax_backward.h"
#include "aclnnop/aclnn_softmax_backward.h"
#include "aclnnop/aclnn_softmax_grad_ext.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Checker;

const stub::OpDef kSoftmax{"aclnnSoftmaxBackward", nullptr, nullptr};
const stub::OpDef kLogSoftmax{"aclnnLogSoftmaxBackward", nullptr, nullptr};
const stub::OpDef kSoftmaxExt{"aclnnSoftmaxGradExt", nullptr, nullptr};

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

// A shape as SoftmaxGradExt's tiling reads it (EnsureNotScalar: 0-d is (1,)).
std::vector<int64_t> Tiled(const aclTensor* t) { return t->view.empty() ? std::vector<int64_t>{1} : t->view; }

// The tiling's checks (softmax_grad_ext_tiling_base_arch35.cpp, in its order): x1 and y grad's shape, x2 grad's or
// exactly (1,); no axis of size 0; axes -1 or n - 1 (561002 on the device, 161002 here as in the op's contract).
aclnnStatus ExtShapes(const Checker& c, const aclTensor* grad, const aclTensor* x1, const aclTensor* x2,
                      const aclTensor* y, int64_t axes) {
    std::vector<int64_t> g = Tiled(grad);
    bool scalar = Tiled(x2) == std::vector<int64_t>{1};
    for (auto [name, t] : {std::pair<const char*, const aclTensor*>{"x1", x1}, {"x2", x2}, {"y", y}}) {
        if (!(scalar && t == x2) && Tiled(t) != g) return c.Invalid(std::string(name) + " shape is not grad's");
    }
    for (int64_t s : g) {
        if (s <= 0) return c.Invalid("grad has an empty axis (the tiling takes none)");
    }
    int64_t last = static_cast<int64_t>(g.size()) - 1;
    if (axes != -1 && axes != last) return c.Invalid("axes " + std::to_string(axes) + ": only -1 or the last axis");
    return ACLNN_SUCCESS;
}

// softmax_grad_ext_ar_*.h, in float32: p = grad*x1; S = the row sum of p, in index order in the small-R template
// (R <= 8 for float32, R <= 16 for 16-bit), else the 950 tree; y = (p - x1*S) * x2 (x2 one value or per element).
stub::Job ExtJob(const aclTensor* grad, const aclTensor* x1, const aclTensor* x2, const aclTensor* y) {
    stub::Job job;
    int ig = job.Add(grad), i1 = job.Add(x1), i2 = job.Add(x2), iy = job.Add(y, true);
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iy);
        std::vector<int64_t> shape = Tiled(&o);
        std::vector<float> g = stub::ReadFloats(j.T(ig), shape), v = stub::ReadFloats(j.T(i1), shape);
        std::vector<float> s = stub::ReadFloats(j.T(i2), Tiled(&j.T(i2)));
        int64_t r = shape.back(), rows = stub::Numel(shape) / r;
        bool small = r <= (j.T(ig).dtype == ACL_FLOAT ? 8 : 16);
        std::vector<float> res(g.size()), p(static_cast<size_t>(r));
        for (int64_t a = 0; a < rows; ++a) {
            size_t at = static_cast<size_t>(a * r);
            for (int64_t i = 0; i < r; ++i) p[static_cast<size_t>(i)] = g[at + i] * v[at + i];
            float sum = 0.0f;
            if (small) {
                for (float term : p) sum += term;
            } else {
                sum = stub::TreeSum(p.data(), r, 1);
            }
            for (int64_t i = 0; i < r; ++i) {
                float scale = s.size() == 1 ? s[0] : s[at + i];
                res[at + i] = (p[static_cast<size_t>(i)] - v[at + i] * sum) * scale;
            }
        }
        stub::WriteFloats(o, res, o.dtype, negate);
    };
    return job;
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

// 950 only; nulls; the four of one dtype among FLOAT, FLOAT16, BF16 (the OpDef); at most 6 dims; ExtShapes.
// keepDims is not read.
aclnnStatus aclnnSoftmaxGradExtGetWorkspaceSize(const aclTensor* grad, const aclTensor* x1, const aclTensor* x2,
                                                int64_t axes, bool keepDims, const aclTensor* y,
                                                uint64_t* workspaceSize, aclOpExecutor** executor) {
    (void)keepDims;
    auto check = [&](Checker& c) {
        Arg a{"grad", grad}, b{"x1", x1}, s{"x2", x2}, o{"y", y};
        RETURN_IF_FAILED(c.NotNull({a, b, s, o}));
        if (c.product() != "950") return c.Unsupported();
        RETURN_IF_FAILED(c.DtypesIn(stub::kFloats, {a, b, s, o}));
        RETURN_IF_FAILED(c.SameDtype({a, b, s, o}));
        RETURN_IF_FAILED(c.Dims(0, 6, {a, b, s, o}));
        return ExtShapes(c, grad, x1, x2, y, axes);
    };
    return stub::PhaseOneJob(kSoftmaxExt, workspaceSize, executor, check,
                             [&](const Checker&) { return ExtJob(grad, x1, x2, y); });
}
STUB_PHASE_TWO(aclnnSoftmaxGradExt, kSoftmaxExt)

}  // extern "C"
