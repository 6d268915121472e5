// libopapi of the stub: AvgPool3dBackward (pooling/avg_pool3_d_grad op_api and AvgPool3DGrad kernel) and
// MaxPool3dWithArgmaxBackward (pooling/max_pool3d_grad_with_argmax op_api, the arch35 SIMT kernel).
//
// Phase one: the statuses of aclnn-cli's contract for the op (aclnn_cli/ops/window/avg_pool3d_backward.py, after
// aclnn_avgpool3d_backward.cpp): nulls 161001 (gradOutput, self, kernelSize, stride, padding, output: a null stride
// is refused, unlike the 2-D op's), then everything else 161002. Phase two: each input position (d, h, w) in
// float32, its windows od outer, oh, ow inner, each adding fl(g * fl(1 / divisor)) (the kernel's Muls by mulsFactor
// into a float32 workspace); the result rounded once to output's dtype.
//
// MaxPool3dWithArgmaxBackward, phase one (aclnn_cli/ops/window/max_pool3d_with_argmax_backward.py, after
// aclnn_max_pool3d_with_argmax_backward.cpp's CheckParams): every tensor and array non-null (161001), then 161002 in
// CheckParams' order (dtypes, 4-5 dims, the arrays, the shapes). An empty tensor: success, nothing computed. Phase
// two: MaxPool3DGradWithArgmaxNcdhw, each input position (d, h, w) in float32: the windows whose span may reach it
// (pd outer, ph, pw inner), adding gradOutput where the window's index is d H W + h W + w; rounded once.
#include <algorithm>
#include <array>
#include <cmath>

#include "aclnnop/aclnn_avgpool3d_backward.h"
#include "aclnnop/aclnn_max_pool3d_with_argmax_backward.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Checker;

const stub::OpDef kAvgPool3d{"aclnnAvgPool3dBackward", nullptr, nullptr};

using Triple = std::array<int64_t, 3>;

struct Pool3dCall {
    const aclTensor *grad, *self, *out;
    const aclIntArray *kernel, *stride, *padding;
    bool ceil, include;
    int64_t divisor;
};

// (D, H, W) of a list of 1 or 3 values; `fill` where it is empty.
Triple Spread3(const std::vector<int64_t>& v, Triple fill) {
    if (v.empty()) return fill;
    if (v.size() == 1) return {v[0], v[0], v[0]};
    return {v[0], v[1], v[2]};
}

// (D, H, W) of an NCDHW or CDHW tensor: its last three axes.
Triple Last3(const aclTensor& t) {
    size_t nd = t.view.size();
    return {t.view[nd - 3], t.view[nd - 2], t.view[nd - 1]};
}

// How many (D, H, W) volumes a tensor holds (N C, or C).
int64_t Volumes(const aclTensor& t) {
    Triple n = Last3(t);
    return stub::Numel(t.view) / std::max<int64_t>(n[0] * n[1] * n[2], 1);
}

// Every input position (d, h, w) of every volume, d outer, in float32 from 0: add(acc, b, window, window offset,
// position offset) for each of its windows from range(axis, i), od outer, ow inner (both 3-D kernels' loop); the
// sums written to out.
template <typename Range, typename Add>
void WindowSums(const Triple& n, const Triple& m, int64_t volumes, Range range, Add add, std::vector<float>& out) {
    int64_t in_size = n[0] * n[1] * n[2];
    for (int64_t b = 0; b < volumes; ++b) {
        for (int64_t id = 0; id < n[0]; ++id) {
            auto rd = range(0, id);
            for (int64_t ih = 0; ih < n[1]; ++ih) {
                auto rh = range(1, ih);
                for (int64_t iw = 0; iw < n[2]; ++iw) {
                    auto rw = range(2, iw);
                    int64_t at = (id * n[1] + ih) * n[2] + iw;
                    float acc = 0.0f;
                    for (int64_t od = rd.first; od < rd.second; ++od) {
                        for (int64_t oh = rh.first; oh < rh.second; ++oh) {
                            for (int64_t ow = rw.first; ow < rw.second; ++ow) {
                                add(acc, b, Triple{od, oh, ow}, (od * m[1] + oh) * m[2] + ow, at);
                            }
                        }
                    }
                    out[static_cast<size_t>(b * in_size + at)] = acc;
                }
            }
        }
    }
}

aclnnStatus Check3d(const Checker& c, const Pool3dCall& e) {
    RETURN_IF_FAILED(c.NotNull({{"gradOutput", e.grad}, {"self", e.self}, {"output", e.out}}));
    if (e.kernel == nullptr) return c.Null("kernelSize");
    if (e.stride == nullptr) return c.Null("stride");
    if (e.padding == nullptr) return c.Null("padding");
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "", stub::kFp32Fp16);
    if (ok.empty()) return c.Unsupported();
    RETURN_IF_FAILED(c.DtypesIn(ok, {{"gradOutput", e.grad}, {"self", e.self}, {"output", e.out}}));
    RETURN_IF_FAILED(c.SameDtype({{"gradOutput", e.grad}, {"self", e.self}, {"output", e.out}}));
    RETURN_IF_FAILED(c.Dims(4, 5, {{"gradOutput", e.grad}, {"self", e.self}, {"output", e.out}}));
    if (e.self->view.size() != e.grad->view.size() || e.out->view.size() != e.grad->view.size()) {
        return c.Invalid("gradOutput, self and output: as many dims");
    }
    if (e.self->view != e.out->view) return c.Invalid("output's shape is not self's");
    const std::vector<int64_t>& k = e.kernel->values;
    const std::vector<int64_t>& s = e.stride->values;
    const std::vector<int64_t>& p = e.padding->values;
    if (k.size() != 1 && k.size() != 3) return c.Invalid("kernelSize: 1 or 3 values");
    if (p.size() != 1 && p.size() != 3) return c.Invalid("padding: 1 or 3 values");
    if (s.size() != 0 && s.size() != 1 && s.size() != 3) return c.Invalid("stride: 0, 1 or 3 values");
    Triple kk = Spread3(k, {0, 0, 0}), ss = Spread3(s, kk), pp = Spread3(p, {0, 0, 0});
    for (int i = 0; i < 3; ++i) {
        if (kk[i] <= 0) return c.Invalid("kernelSize: each > 0");
        if (ss[i] <= 0) return c.Invalid("stride: each > 0");
        if (pp[i] < 0 || pp[i] > kk[i] / 2) return c.Invalid("padding: each >= 0 and at most half the kernel");
    }
    return ACLNN_SUCCESS;
}

stub::Job Pool3dJob(const Pool3dCall& e) {
    stub::Job job;
    int g = job.Add(e.grad), o = job.Add(e.out, true);
    Triple k = Spread3(e.kernel->values, {1, 1, 1});
    Triple s = Spread3(e.stride->values, k);
    Triple p = Spread3(e.padding->values, {0, 0, 0});
    bool include = e.include;
    int64_t divisor = e.divisor;
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& gt = j.T(g);
        const aclTensor& ot = j.T(o);
        Triple n = Last3(ot), m = Last3(gt);
        int64_t out_size = m[0] * m[1] * m[2], volumes = Volumes(ot);
        std::vector<float> grad = stub::ReadFloats(gt, gt.view);
        std::vector<float> out(static_cast<size_t>(stub::Numel(ot.view)), 0.0f);
        // first and one past the last window covering position i of axis a
        auto range = [&](int a, int64_t i) {
            int64_t q = i + p[a];
            int64_t first = q < k[a] ? 0 : (q - k[a]) / s[a] + 1;
            return std::make_pair(first, std::max(first, std::min(q / s[a] + 1, m[a])));
        };
        auto add = [&](float& acc, int64_t b, const Triple& o3, int64_t w, int64_t) {
            int64_t pool = 1, inside = 1;
            for (int a = 0; a < 3; ++a) {
                int64_t start = o3[a] * s[a] - p[a];
                int64_t end = std::min(start + k[a], n[a] + p[a]);
                pool *= end - start;
                inside *= std::min(end, n[a]) - std::max<int64_t>(start, 0);
            }
            int64_t d = divisor != 0 ? divisor : include ? pool : inside;
            float factor = 1.0f / static_cast<float>(d);
            acc += grad[static_cast<size_t>(b * out_size + w)] * factor;
        };
        WindowSums(n, m, volumes, range, add, out);
        stub::WriteFloats(ot, out, ot.dtype, negate);
    };
    return job;
}

const stub::OpDef kMaxPool3d{"aclnnMaxPool3dWithArgmaxBackward", nullptr, nullptr};

struct Max3dCall {
    const aclTensor *grad, *self, *indices, *out;
    const aclIntArray *kernel, *stride, *padding, *dilation;
    bool ceil;
};

aclnnStatus CheckMax3d(const Checker& c, const Max3dCall& e) {
    RETURN_IF_FAILED(c.NotNull({{"gradOutput", e.grad}, {"self", e.self}, {"indices", e.indices}}));
    if (e.kernel == nullptr) return c.Null("kernelSize");
    if (e.stride == nullptr) return c.Null("stride");
    if (e.padding == nullptr) return c.Null("padding");
    if (e.dilation == nullptr) return c.Null("dilation");
    RETURN_IF_FAILED(c.NotNull({{"gradInput", e.out}}));
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "", stub::kFp32Fp16);
    if (ok.empty()) return c.Unsupported();
    RETURN_IF_FAILED(c.DtypesIn(ok, {{"gradOutput", e.grad}, {"self", e.self}, {"gradInput", e.out}}));
    if (e.indices->dtype != ACL_INT32 && e.indices->dtype != ACL_INT64) return c.Invalid("indices: INT32 or INT64");
    RETURN_IF_FAILED(c.SameDtype({{"gradOutput", e.grad}, {"self", e.self}, {"gradInput", e.out}}));
    RETURN_IF_FAILED(
        c.Dims(4, 5, {{"gradOutput", e.grad}, {"gradInput", e.out}, {"indices", e.indices}, {"self", e.self}}));
    const std::vector<int64_t>& k = e.kernel->values;
    const std::vector<int64_t>& s = e.stride->values;
    const std::vector<int64_t>& p = e.padding->values;
    const std::vector<int64_t>& d = e.dilation->values;
    if ((k.size() != 1 && k.size() != 3) || *std::min_element(k.begin(), k.end()) <= 0) {
        return c.Invalid("kernelSize: 1 or 3 values > 0");
    }
    bool stride_ok = s.size() == 0 || s.size() == 1 || s.size() == 3;
    if (!stride_ok || (!s.empty() && *std::min_element(s.begin(), s.end()) <= 0)) {
        return c.Invalid("stride: 0, 1 or 3 values > 0");
    }
    if (p.size() != 1 && p.size() != 3) return c.Invalid("padding: 1 or 3 values");
    Triple kk = Spread3(k, {0, 0, 0}), pp = Spread3(p, {0, 0, 0});
    for (int i = 0; i < 3; ++i) {
        if (pp[i] < 0 || pp[i] > kk[i] / 2) return c.Invalid("padding: each >= 0 and at most half the kernel");
    }
    if ((d.size() != 1 && d.size() != 3) || *std::min_element(d.begin(), d.end()) <= 0) {
        return c.Invalid("dilation: 1 or 3 values > 0");
    }
    if (e.indices->view != e.grad->view) return c.Invalid("indices' shape is not gradOutput's");
    if (e.self->view != e.out->view) return c.Invalid("gradInput's shape is not self's");
    return ACLNN_SUCCESS;
}

stub::Job MaxPool3dJob(const Max3dCall& e) {
    stub::Job job;
    int g = job.Add(e.grad), ix = job.Add(e.indices), o = job.Add(e.out, true);
    Triple k = Spread3(e.kernel->values, {1, 1, 1});
    Triple s = Spread3(e.stride->values, k);
    Triple p = Spread3(e.padding->values, {0, 0, 0});
    Triple dl = Spread3(e.dilation->values, {1, 1, 1});
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& gt = j.T(g);
        const aclTensor& ot = j.T(o);
        Triple n = Last3(ot), m = Last3(gt);
        int64_t out_size = m[0] * m[1] * m[2], volumes = Volumes(ot);
        std::vector<float> grad = stub::ReadFloats(gt, gt.view);
        std::vector<int64_t> index = stub::ReadInts(j.T(ix));
        std::vector<float> out(static_cast<size_t>(stub::Numel(ot.view)), 0.0f);
        // PStart / PEnd (max_pool3d_grad_with_argmax_simt.h): the windows whose span may reach position i of axis a
        auto range = [&](int a, int64_t i) {
            int64_t span = (k[a] - 1) * dl[a] + 1;
            int64_t first = i + p[a] < span ? 0 : (i + p[a] - span) / s[a] + 1;
            return std::make_pair(first, std::min((i + p[a]) / s[a] + 1, m[a]));
        };
        auto add = [&](float& acc, int64_t b, const Triple&, int64_t w, int64_t at) {
            size_t i = static_cast<size_t>(b * out_size + w);
            if (index[i] == at) acc += grad[i];
        };
        WindowSums(n, m, volumes, range, add, out);
        stub::WriteFloats(ot, out, ot.dtype, negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950, A3, A2: FLOAT, FLOAT16, BF16. See Check3d for the order of the checks.
aclnnStatus aclnnAvgPool3dBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                   const aclIntArray* kernelSize, const aclIntArray* stride,
                                                   const aclIntArray* padding, bool ceilMode, bool countIncludePad,
                                                   int64_t divisorOverride, aclTensor* output,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
    Pool3dCall e{gradOutput, self, output, kernelSize, stride, padding, ceilMode, countIncludePad, divisorOverride};
    return stub::PhaseOneJob(kAvgPool3d, workspaceSize, executor, [&](Checker& c) { return Check3d(c, e); },
                             [&](const Checker&) { return Pool3dJob(e); });
}

STUB_PHASE_TWO(aclnnAvgPool3dBackward, kAvgPool3d)

// 950, A3, A2: FLOAT, FLOAT16, BF16 (INT32 or INT64 indices). See CheckMax3d for the order of the checks.
aclnnStatus aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, const aclTensor* indices, const aclIntArray* kernelSize,
    const aclIntArray* stride, const aclIntArray* padding, const aclIntArray* dilation, bool ceilMode,
    aclTensor* gradInput, uint64_t* workspaceSize, aclOpExecutor** executor) {
    Max3dCall e{gradOutput, self, indices, gradInput, kernelSize, stride, padding, dilation, ceilMode};
    return stub::PhaseOneJob(kMaxPool3d, workspaceSize, executor, [&](Checker& c) { return CheckMax3d(c, e); },
                             [&](const Checker&) { return MaxPool3dJob(e); });
}

STUB_PHASE_TWO(aclnnMaxPool3dWithArgmaxBackward, kMaxPool3d)

}  // extern "C"
