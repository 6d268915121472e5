// libopapi of the stub: AdaptiveAvgPool2dBackward and AdaptiveAvgPool3dBackward (pooling/adaptive_avg_pool2d_grad,
// pooling/adaptive_avg_pool3d_grad).
//
// Phase one: the statuses of aclnn-cli's contracts for the ops
// (aclnn_cli/ops/adaptive/adaptive_avg_pool{2,3}d_backward.py, after the op_apis' CheckParams): nulls 161001, everything else 161002. Phase two: a gradOutput of one position per
// plane (volume) takes the op_api's Fill of fl_T(float(1.0 / S)) and Mul in the dtype T; else each input position in
// float32, its adaptive windows (window o of an axis of n positions pooled into m covering
// [floor(o n / m), ceil((o + 1) n / m))) in order, the outer axis first: 2-D the 950's SIMT kernel
// AdaptiveAvgPool2dGradNchw (fl(fl(g fl(1 / kH)) / kW)), 3-D AdaptiveAvgPool3dGradNcdhw (fl(g / fl(kD kH kW))); the
// result rounded once to the output's dtype.
#include <algorithm>
#include <array>

#include "aclnnop/aclnn_adaptive_avg_pool2d_backward.h"
#include "aclnnop/aclnn_adaptive_avg_pool3d_backward.h"
#include "elements.h"
#include "opapi.h"
#include "stub.h"

namespace {
namespace adaptive {  // (the ops build as one translation unit: names of its own)

using stub::Arg;
using stub::Checker;

const stub::OpDef kDef2d{"aclnnAdaptiveAvgPool2dBackward", nullptr, nullptr};
const stub::OpDef kDef3d{"aclnnAdaptiveAvgPool3dBackward", nullptr, nullptr};

struct Call {
    const aclTensor *grad, *self, *out;
    Arg G() const { return {"gradOutput", grad}; }
    Arg S() const { return {"self", self}; }
    Arg O() const { return {"out", out}; }
};

std::vector<int64_t> Lead(const std::vector<int64_t>& v, size_t spatial) {
    return {v.begin(), v.end() - static_cast<std::ptrdiff_t>(std::min(spatial, v.size()))};
}

// The 2-D contract: nulls; dtypes of the product (BF16 on 950, A3, A2), one for all; 3-4 dims; gradOutput's and out's
// dims self's; the leading (N, C) axes of out and gradOutput self's.
aclnnStatus Check2d(const Checker& c, const Call& a) {
    RETURN_IF_FAILED(c.NotNull({a.G(), a.S(), a.O()}));
    RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16),
                                {a.G(), a.S(), a.O()}));
    RETURN_IF_FAILED(c.SameDtype({a.G(), a.S()}));
    RETURN_IF_FAILED(c.Dims(3, 4, {a.G(), a.S(), a.O()}));
    if (a.grad->view.size() != a.self->view.size()) return c.Invalid("gradOutput and self: as many dims");
    if (a.out->view.size() != a.self->view.size()) return c.Invalid("out and self: as many dims");
    if (Lead(a.out->view, 2) != Lead(a.self->view, 2) || Lead(a.grad->view, 2) != Lead(a.self->view, 2)) {
        return c.Invalid("the N, C axes of out and gradOutput must be self's");
    }
    return ACLNN_SUCCESS;
}

// The 3-D contract (950, A3, A2): nulls; dtypes, one for all three; 4-5 dims, as many each; self's axes but N > 0; out
// self's shape; gradOutput's leading axes self's, its D, H, W > 0.
aclnnStatus Check3d(const Checker& c, const Call& a) {
    RETURN_IF_FAILED(c.NotNull({a.G(), a.S(), a.O()}));
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "", stub::kFp32Fp16);
    if (ok.empty()) return c.Unsupported();
    RETURN_IF_FAILED(c.DtypesIn(ok, {a.G(), a.S(), a.O()}));
    RETURN_IF_FAILED(c.SameDtype({a.G(), a.S(), a.O()}));
    RETURN_IF_FAILED(c.Dims(4, 5, {a.G(), a.S(), a.O()}));
    const std::vector<int64_t>&g = a.grad->view, &s = a.self->view;
    if (g.size() != s.size() || a.out->view.size() != s.size()) {
        return c.Invalid("gradOutput, self and out: as many dims");
    }
    for (size_t i = 1; i < s.size(); ++i) {
        if (s[i] <= 0) return c.Invalid("self: every axis but N > 0");
    }
    if (a.out->view != s) return c.Invalid("out's shape is not self's");
    if (Lead(g, 3) != Lead(s, 3)) return c.Invalid("gradOutput's leading axes must be self's");
    for (size_t i = g.size() - 3; i < g.size(); ++i) {
        if (g[i] <= 0) return c.Invalid("gradOutput: D, H and W > 0");
    }
    return ACLNN_SUCCESS;
}

// [start, end) of window o of an axis of n positions pooled into m, and the windows covering position i.
int64_t Start(int64_t o, int64_t n, int64_t m) { return o * n / m; }
int64_t End(int64_t o, int64_t n, int64_t m) { return ((o + 1) * n + m - 1) / m; }
int64_t First(int64_t i, int64_t n, int64_t m) { return i * m / n; }
int64_t Last(int64_t i, int64_t n, int64_t m) { return ((i + 1) * m + n - 1) / n; }

// A value rounded to `dtype` (FLOAT: as it is).
float Rounded(float v, aclDataType dtype) {
    if (dtype == ACL_FLOAT16) return stub::HalfToFloat(stub::FloatToHalf(v));
    if (dtype == ACL_BF16) return stub::Bf16ToFloat(stub::FloatToBf16(v));
    return v;
}

stub::Job AdaptiveJob(const Call& e, size_t spatial) {
    stub::Job job;
    int gi = job.Add(e.grad), oi = job.Add(e.out, true);
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& gt = j.T(gi);
        const aclTensor& ot = j.T(oi);
        size_t nd = ot.view.size();
        std::array<int64_t, 3> n{1, 1, 1}, m{1, 1, 1};  // (2-D: a depth of 1)
        for (size_t a = 0; a < spatial; ++a) {
            n[3 - spatial + a] = ot.view[nd - spatial + a];
            m[3 - spatial + a] = gt.view[nd - spatial + a];
        }
        int64_t in_size = n[0] * n[1] * n[2], out_size = m[0] * m[1] * m[2];
        int64_t planes = in_size > 0 ? stub::Numel(ot.view) / in_size : 0;
        std::vector<float> grad = stub::ReadFloats(gt, gt.view);
        std::vector<float> out(static_cast<size_t>(stub::Numel(ot.view)), 0.0f);
        bool global = out_size == 1;
        float fill = Rounded(static_cast<float>(1.0 / static_cast<double>(std::max<int64_t>(in_size, 1))), ot.dtype);
        for (int64_t b = 0; b < planes; ++b) {
            const float* x = grad.data() + b * out_size;
            float* y = out.data() + b * in_size;
            for (int64_t d = 0; d < n[0]; ++d) {
                for (int64_t h = 0; h < n[1]; ++h) {
                    for (int64_t w = 0; w < n[2]; ++w) {
                        float acc = 0.0f;
                        if (global) {
                            acc = Rounded(x[0] * fill, ot.dtype);  // (the Mul in T: the product's one rounding)
                        }
                        for (int64_t od = First(d, n[0], m[0]); !global && od < Last(d, n[0], m[0]); ++od) {
                            int64_t kd = End(od, n[0], m[0]) - Start(od, n[0], m[0]);
                            for (int64_t oh = First(h, n[1], m[1]); oh < Last(h, n[1], m[1]); ++oh) {
                                int64_t kh = End(oh, n[1], m[1]) - Start(oh, n[1], m[1]);
                                float inv_kh = 1.0f / static_cast<float>(kh);
                                for (int64_t ow = First(w, n[2], m[2]); ow < Last(w, n[2], m[2]); ++ow) {
                                    int64_t kw = End(ow, n[2], m[2]) - Start(ow, n[2], m[2]);
                                    float g = x[(od * m[1] + oh) * m[2] + ow];
                                    acc += spatial == 2 ? g * inv_kh / static_cast<float>(kw)
                                                        : g / static_cast<float>(kd * kh * kw);
                                }
                            }
                        }
                        y[(d * n[1] + h) * n[2] + w] = acc;
                    }
                }
            }
        }
        stub::WriteFloats(ot, out, ot.dtype, negate);
    };
    return job;
}

}  // namespace adaptive
}  // namespace

extern "C" {

aclnnStatus aclnnAdaptiveAvgPool2dBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                           aclTensor* out, uint64_t* workspaceSize,
                                                           aclOpExecutor** executor) {
    adaptive::Call e{gradOutput, self, out};
    return stub::PhaseOneJob(adaptive::kDef2d, workspaceSize, executor,
                             [&](stub::Checker& c) { return adaptive::Check2d(c, e); },
                             [&](const stub::Checker&) { return adaptive::AdaptiveJob(e, 2); });
}

STUB_PHASE_TWO(aclnnAdaptiveAvgPool2dBackward, adaptive::kDef2d)

aclnnStatus aclnnAdaptiveAvgPool3dBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                           aclTensor* out, uint64_t* workspaceSize,
                                                           aclOpExecutor** executor) {
    adaptive::Call e{gradOutput, self, out};
    return stub::PhaseOneJob(adaptive::kDef3d, workspaceSize, executor,
                             [&](stub::Checker& c) { return adaptive::Check3d(c, e); },
                             [&](const stub::Checker&) { return adaptive::AdaptiveJob(e, 3); });
}

STUB_PHASE_TWO(aclnnAdaptiveAvgPool3dBackward, adaptive::kDef3d)

}  // extern "C"
