// libopapi of the stub: AvgPool2dBackward (pooling/avg_pool3_d_grad op_api, pooling/avg_pool_v2_grad SIMT kernel) and
// MaxPool2dWithIndicesBackward (pooling/max_pool3d_grad_with_argmax op_api, max_pool_grad_with_argmax_v3 SIMT kernel).
//
// Phase one: the statuses of aclnn-cli's contract for the op (aclnn_cli/ops/window/avg_pool2d_backward.py, after
// aclnn_avgpool2d_backward.cpp's CheckParams): nulls 161001 (gradOutput, self, kernelSize, padding, gradInput; a
// null stride is the kernel's), then everything else 161002. Phase two: the 950 in float32: each input position's
// windows, oh outer and ow inner, each adding fl(g / fl(divisor)) (AvgPoolV2GradSimtNchwKernel), or the global
// pooling's Div (IsGlobalAvgPool), in float16 where cubeMathType is 1 or 2; the result rounded to gradInput's dtype.
//
// MaxPool2dWithIndicesBackward, phase one (aclnn_cli/ops/window/max_pool2d_with_indices_backward.py, after
// aclnn_max_pool2d_with_indices_backward.cpp's CheckParams): every tensor and array non-null (161001), then 161002.
// Phase two: MaxPoolGradWithArgmaxNchw, each input position (h, w) in float32: the windows that may hold it (ph
// outer, pw inner), adding gradOutput where the window's index is h * W + w; rounded once to gradInput's dtype.
// MaxPool2dWithMaskBackward (A2, A3: aclnn_cli/ops/window/max_pool2d_with_mask_backward.py): the entry's checks (the
// 950 refused, kernelSize's length 161001), then CheckParams with isMask (int8 indices, dilation 1; the mask's shape
// unchecked); phase two as above with the indices the mask's first N C Ho Wo int32 (IndicesInputProcess3D).
#include <algorithm>
#include <cmath>

#include "aclnnop/aclnn_avgpool2d_backward.h"
#include "aclnnop/aclnn_max_pool2d_with_indices_backward.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Checker;

const stub::OpDef kAvgPool{"aclnnAvgPool2dBackward", nullptr, nullptr};

struct PoolCall {
    const aclTensor *grad, *self, *out;
    const aclIntArray *kernel, *stride, *padding;
    bool ceil, include;
    int64_t divisor;
    int64_t math;
};

// (H, W) of a list of 1 or 2 values; `fill` where it is empty.
std::pair<int64_t, int64_t> Pair(const std::vector<int64_t>& v, std::pair<int64_t, int64_t> fill) {
    if (v.empty()) return fill;
    return {v[0], v.size() == 1 ? v[0] : v[1]};
}

// The window arrays both ops check alike: kernelSize 1 or 2 values > 0, stride (null: the kernel's) at most 2 values
// > 0, padding 1 or 2 values in [0, kernel / 2].
aclnnStatus CheckLists(const Checker& c, const aclIntArray* kernel, const aclIntArray* stride, const aclIntArray* padding) {
    const std::vector<int64_t>& k = kernel->values;
    const std::vector<int64_t>& p = padding->values;
    if (k.empty() || k.size() > 2 || *std::min_element(k.begin(), k.end()) <= 0) return c.Invalid("kernelSize: 1 or 2 values > 0");
    if (stride != nullptr) {
        const std::vector<int64_t>& s = stride->values;
        if (s.size() > 2 || (!s.empty() && *std::min_element(s.begin(), s.end()) <= 0)) return c.Invalid("stride: at most 2 values > 0");
    }
    if (p.empty() || p.size() > 2) return c.Invalid("padding: 1 or 2 values");
    auto kk = Pair(k, {0, 0}), pp = Pair(p, {0, 0});
    if (pp.first < 0 || pp.second < 0 || 2 * pp.first > kk.first || 2 * pp.second > kk.second) {
        return c.Invalid("padding: each >= 0 and at most half the kernel");
    }
    return ACLNN_SUCCESS;
}

aclnnStatus Check(const Checker& c, const PoolCall& e) {
    RETURN_IF_FAILED(c.NotNull({{"gradOutput", e.grad}, {"self", e.self}, {"gradInput", e.out}}));
    if (e.kernel == nullptr) return c.Null("kernelSize");
    if (e.padding == nullptr) return c.Null("padding");
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16);
    if (ok.empty()) return c.Unsupported();
    RETURN_IF_FAILED(c.DtypesIn(ok, {{"gradOutput", e.grad}, {"self", e.self}, {"gradInput", e.out}}));
    RETURN_IF_FAILED(c.SameDtype({{"gradOutput", e.grad}, {"self", e.self}, {"gradInput", e.out}}));
    RETURN_IF_FAILED(c.Dims(3, 4, {{"gradOutput", e.grad}, {"self", e.self}, {"gradInput", e.out}}));
    RETURN_IF_FAILED(CheckLists(c, e.kernel, e.stride, e.padding));
    if (e.math < 0 || e.math > 3) return c.Invalid("cubeMathType is not 0, 1, 2 or 3");
    if (e.grad->view.size() != e.out->view.size()) return c.Invalid("gradOutput and gradInput: 3-d or 4-d together");
    if (e.self->view != e.out->view) return c.Invalid("gradInput's shape is not self's");
    return ACLNN_SUCCESS;
}

stub::Job PoolJob(const PoolCall& e) {
    stub::Job job;
    int g = job.Add(e.grad), o = job.Add(e.out, true);
    auto k = Pair(e.kernel->values, {1, 1});
    auto s = Pair(e.stride == nullptr ? std::vector<int64_t>{} : e.stride->values, k);
    auto p = Pair(e.padding->values, {0, 0});
    bool include = e.include, fp16 = e.math == 1 || e.math == 2;
    int64_t divisor = e.divisor;
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& gt = j.T(g);
        const aclTensor& ot = j.T(o);
        size_t nd = ot.view.size();
        int64_t h = ot.view[nd - 2], w = ot.view[nd - 1], ho = gt.view[nd - 2], wo = gt.view[nd - 1];
        int64_t planes = stub::Numel(ot.view) / std::max<int64_t>(h * w, 1);
        std::vector<float> grad = stub::ReadFloats(gt, gt.view);
        std::vector<float> out(static_cast<size_t>(stub::Numel(ot.view)), 0.0f);
        bool global = divisor == 0 && k.first == h && k.second == w && h >= 10 && w >= 10 && ho == 1 && wo == 1;
        for (int64_t b = 0; b < planes; ++b) {
            const float* x = grad.data() + b * ho * wo;
            float* y = out.data() + b * h * w;
            for (int64_t i = 0; i < h; ++i) {
                for (int64_t jj = 0; jj < w; ++jj) {
                    float acc = 0.0f;
                    if (global) {
                        float q = x[0] / static_cast<float>(k.first * k.second);
                        if (fp16) q = stub::RoundTo(stub::RoundTo(x[0], ACL_FLOAT16, false) / static_cast<float>(k.first * k.second), ACL_FLOAT16, false);
                        y[i * w + jj] = q;
                        continue;
                    }
                    int64_t qh = i + p.first, qw = jj + p.second;
                    int64_t h0 = qh < k.first ? 0 : (qh - k.first) / s.first + 1, h1 = std::min(qh / s.first + 1, ho);
                    int64_t w0 = qw < k.second ? 0 : (qw - k.second) / s.second + 1, w1 = std::min(qw / s.second + 1, wo);
                    for (int64_t oh = h0; oh < h1; ++oh) {
                        for (int64_t ow = w0; ow < w1; ++ow) {
                            int64_t hs = oh * s.first - p.first, ws = ow * s.second - p.second;
                            int64_t he = std::min(hs + k.first, h + p.first), we = std::min(ws + k.second, w + p.second);
                            int64_t pool = (he - hs) * (we - ws);
                            hs = std::max<int64_t>(hs, 0);
                            ws = std::max<int64_t>(ws, 0);
                            he = std::min(he, h);
                            we = std::min(we, w);
                            int64_t d = divisor != 0 ? divisor : include ? pool : (he - hs) * (we - ws);
                            acc += x[oh * wo + ow] / static_cast<float>(d);
                        }
                    }
                    y[i * w + jj] = acc;
                }
            }
        }
        stub::WriteFloats(ot, out, ot.dtype, negate);
    };
    return job;
}

const stub::OpDef kMaxPool{"aclnnMaxPool2dWithIndicesBackward", nullptr, nullptr};
const stub::OpDef kMaxMask{"aclnnMaxPool2dWithMaskBackward", nullptr, nullptr};

struct MaxCall {
    const aclTensor *grad, *self, *indices, *out;
    const aclIntArray *kernel, *stride, *padding, *dilation;
    bool ceil;
    bool mask = false;
};

aclnnStatus CheckMask(const Checker& c, const MaxCall& e) {
    if (c.product() == "950") return c.Invalid("Please use aclnnMaxPool2dWithIndicesBackward.");
    if (c.product() != "A2" && c.product() != "A3") return c.Unsupported();
    if (e.kernel == nullptr) return c.Null("kernelSize");
    RETURN_IF_FAILED(c.NotNull({{"self", e.self}, {"gradOutput", e.grad}}));
    if (e.kernel->values.empty() || e.kernel->values.size() > 2) return c.Null("kernelSize of 1 or 2 values");
    RETURN_IF_FAILED(c.NotNull({{"indices", e.indices}, {"gradInput", e.out}}));
    if (e.stride == nullptr) return c.Null("stride");
    if (e.padding == nullptr) return c.Null("padding");
    if (e.dilation == nullptr) return c.Null("dilation");
    RETURN_IF_FAILED(c.DtypesIn(stub::kFloats, {{"self", e.self}}));
    RETURN_IF_FAILED(c.SameDtype({{"self", e.self}, {"gradOutput", e.grad}, {"gradInput", e.out}}));
    if (e.indices->dtype != ACL_INT8) return c.Invalid("indices: INT8");
    RETURN_IF_FAILED(c.Dims(3, 4, {{"self", e.self}, {"gradInput", e.out}, {"gradOutput", e.grad}, {"indices", e.indices}}));
    const std::vector<int64_t>& d = e.dilation->values;
    if (d.empty() || d.size() > 2) return c.Invalid("dilation: 1 or 2 values");
    RETURN_IF_FAILED(CheckLists(c, e.kernel, e.stride, e.padding));
    if (*std::min_element(d.begin(), d.end()) != 1 || *std::max_element(d.begin(), d.end()) != 1) {
        return c.Invalid("dilation: only 1");
    }
    if (e.self->view != e.out->view) return c.Invalid("gradInput's shape is not self's");
    for (size_t i = e.self->view.size() - 3; i < e.self->view.size(); ++i) {
        if (e.self->view[i] == 0) return c.Invalid("self: C, H and W must not be 0");
    }
    return ACLNN_SUCCESS;
}

aclnnStatus CheckMax(const Checker& c, const MaxCall& e) {
    RETURN_IF_FAILED(c.NotNull({{"gradOutput", e.grad}, {"self", e.self}, {"indices", e.indices}, {"gradInput", e.out}}));
    if (e.kernel == nullptr) return c.Null("kernelSize");
    if (e.stride == nullptr) return c.Null("stride");
    if (e.padding == nullptr) return c.Null("padding");
    if (e.dilation == nullptr) return c.Null("dilation");
    stub::DTypes ok = c.product() == "950" ? stub::kFloats
                      : (c.product() == "A2" || c.product() == "A3") ? stub::DTypes{ACL_FLOAT} : stub::DTypes{};
    if (ok.empty()) return c.Unsupported();
    RETURN_IF_FAILED(c.DtypesIn(ok, {{"gradOutput", e.grad}, {"self", e.self}, {"gradInput", e.out}}));
    RETURN_IF_FAILED(c.SameDtype({{"gradOutput", e.grad}, {"self", e.self}, {"gradInput", e.out}}));
    if (e.indices->dtype != ACL_INT32 && e.indices->dtype != ACL_INT64) return c.Invalid("indices: INT32 or INT64");
    RETURN_IF_FAILED(c.Dims(3, 4, {{"gradOutput", e.grad}, {"self", e.self}, {"indices", e.indices}, {"gradInput", e.out}}));
    RETURN_IF_FAILED(CheckLists(c, e.kernel, e.stride, e.padding));
    const std::vector<int64_t>& d = e.dilation->values;
    if (d.empty() || d.size() > 2 || *std::min_element(d.begin(), d.end()) <= 0) return c.Invalid("dilation: 1 or 2 values > 0");
    auto kk = Pair(e.kernel->values, {0, 0}), pp = Pair(e.padding->values, {0, 0}), dd = Pair(d, {1, 1});
    if (2 * pp.first > (kk.first - 1) * dd.first + 1 || 2 * pp.second > (kk.second - 1) * dd.second + 1) {
        return c.Invalid("padding: at most half the dilated kernel");
    }
    size_t n = e.grad->view.size();
    if (e.self->view.size() != n || e.indices->view.size() != n || e.out->view.size() != n) {
        return c.Invalid("gradOutput, self, indices and gradInput: 3-d or 4-d together");
    }
    if (e.self->view != e.out->view) return c.Invalid("gradInput's shape is not self's");
    if (e.indices->view != e.grad->view) return c.Invalid("indices' shape is not gradOutput's");
    return ACLNN_SUCCESS;
}

stub::Job MaxPoolJob(const MaxCall& e) {
    stub::Job job;
    int g = job.Add(e.grad), ix = job.Add(e.indices), o = job.Add(e.out, true);
    auto k = Pair(e.kernel->values, {1, 1});
    auto s = Pair(e.stride->values, k);
    auto p = Pair(e.padding->values, {0, 0});
    auto d = Pair(e.dilation->values, {1, 1});
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& gt = j.T(g);
        const aclTensor& ot = j.T(o);
        size_t nd = ot.view.size();
        int64_t h = ot.view[nd - 2], w = ot.view[nd - 1], ho = gt.view[nd - 2], wo = gt.view[nd - 1];
        int64_t planes = stub::Numel(ot.view) / std::max<int64_t>(h * w, 1);
        std::vector<float> grad = stub::ReadFloats(gt, gt.view);
        std::vector<int64_t> index = stub::ReadInts(j.T(ix));
        if (e.mask) {  // (the mask's bytes, little-endian int32 from its start: planes Ho Wo of them)
            std::vector<int64_t> packed(static_cast<size_t>(planes * ho * wo));
            for (size_t q = 0; q < packed.size(); ++q) {
                uint32_t v = 0;
                for (size_t byte = 0; byte < 4; ++byte) v |= static_cast<uint32_t>(index[4 * q + byte] & 0xFF) << (8 * byte);
                packed[q] = static_cast<int32_t>(v);
            }
            index.swap(packed);
        }
        std::vector<float> out(static_cast<size_t>(stub::Numel(ot.view)), 0.0f);
        // PStart / PEnd (max_pool_grad_with_argmax_v3_simt.h): the windows whose span may reach position i
        auto start = [](int64_t i, int64_t pad, int64_t kernel, int64_t dil, int64_t stride) -> int64_t {
            int64_t span = (kernel - 1) * dil + 1;
            return i + pad < span ? 0 : (i + pad - span) / stride + 1;
        };
        auto end = [](int64_t i, int64_t pad, int64_t stride, int64_t pooled) -> int64_t {
            return std::min((i + pad) / stride + 1, pooled);
        };
        for (int64_t b = 0; b < planes; ++b) {
            const float* x = grad.data() + b * ho * wo;
            const int64_t* m = index.data() + b * ho * wo;
            float* y = out.data() + b * h * w;
            for (int64_t i = 0; i < h; ++i) {
                for (int64_t jj = 0; jj < w; ++jj) {
                    float acc = 0.0f;
                    int64_t h1 = end(i, p.first, s.first, ho), w1 = end(jj, p.second, s.second, wo);
                    for (int64_t oh = start(i, p.first, k.first, d.first, s.first); oh < h1; ++oh) {
                        for (int64_t ow = start(jj, p.second, k.second, d.second, s.second); ow < w1; ++ow) {
                            if (m[oh * wo + ow] == i * w + jj) acc += x[oh * wo + ow];
                        }
                    }
                    y[i * w + jj] = acc;
                }
            }
        }
        stub::WriteFloats(ot, out, ot.dtype, negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950, A3, A2 (bf16 too); 910, 310P (fp32, fp16). See Check for the order of the checks.
aclnnStatus aclnnAvgPool2dBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                   const aclIntArray* kernelSize, const aclIntArray* stride,
                                                   const aclIntArray* padding, bool ceilMode, bool countIncludePad,
                                                   int64_t divisorOverride, int8_t cubeMathType, aclTensor* gradInput,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
    PoolCall e{gradOutput, self, gradInput, kernelSize, stride, padding, ceilMode, countIncludePad, divisorOverride,
               cubeMathType};
    return stub::PhaseOneJob(kAvgPool, workspaceSize, executor, [&](Checker& c) { return Check(c, e); },
                             [&](const Checker&) { return PoolJob(e); });
}

STUB_PHASE_TWO(aclnnAvgPool2dBackward, kAvgPool)

// 950 (FLOAT, FLOAT16, BF16; INT32 or INT64 indices), A3, A2 (FLOAT). See CheckMax for the order of the checks.
aclnnStatus aclnnMaxPool2dWithIndicesBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, const aclTensor* indices, const aclIntArray* kernelSize,
    const aclIntArray* stride, const aclIntArray* padding, const aclIntArray* dilation, bool ceilMode,
    aclTensor* gradInput, uint64_t* workspaceSize, aclOpExecutor** executor) {
    MaxCall e{gradOutput, self, indices, gradInput, kernelSize, stride, padding, dilation, ceilMode};
    return stub::PhaseOneJob(kMaxPool, workspaceSize, executor, [&](Checker& c) { return CheckMax(c, e); },
                             [&](const Checker&) { return MaxPoolJob(e); });
}

STUB_PHASE_TWO(aclnnMaxPool2dWithIndicesBackward, kMaxPool)

// A3, A2 (FLOAT, FLOAT16, BF16; INT8 mask). See CheckMask for the order of the checks.
aclnnStatus aclnnMaxPool2dWithMaskBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, const aclTensor* indices, const aclIntArray* kernelSize,
    const aclIntArray* stride, const aclIntArray* padding, const aclIntArray* dilation, bool ceilMode,
    aclTensor* gradInput, uint64_t* workspaceSize, aclOpExecutor** executor) {
    MaxCall e{gradOutput, self, indices, gradInput, kernelSize, stride, padding, dilation, ceilMode, true};
    return stub::PhaseOneJob(kMaxMask, workspaceSize, executor, [&](Checker& c) { return CheckMask(c, e); },
                             [&](const Checker&) { return MaxPoolJob(e); });
}

STUB_PHASE_TWO(aclnnMaxPool2dWithMaskBackward, kMaxMask)

}  // extern "C"
