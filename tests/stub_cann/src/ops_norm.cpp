// libopapi of the stub: RmsNormGrad (norm/rms_norm_grad), LayerNormBackward (norm/layer_norm_grad_v3) and
// LayerNormGrad (norm/layer_norm_grad: variance in, rstd by the kernel's Newton step).
//
// Phase one: RmsNormGrad has no op_api (its aclnn is generated from the OpDef): nulls 161001, the OpDef's
// dtype combinations 161002, the tiling's shape rules 561002. LayerNormBackward: the op_api's checks in their
// order. Phase two: the 950 kernels in float32 (docs/kernels.md), rows of R = prod(normalized dims).
#include <algorithm>
#include <cmath>
#include <limits>

#include "aclnnop/aclnn_layer_norm_backward.h"
#include "aclnnop/aclnn_layer_norm_grad.h"
#include "aclnnop/aclnn_rms_norm_grad.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Checker;

const stub::OpDef kRms{"aclnnRmsNormGrad", nullptr, nullptr};
const stub::OpDef kLayerNorm{"aclnnLayerNormBackward", nullptr, nullptr};
const stub::OpDef kLayerNormGrad{"aclnnLayerNormGrad", nullptr, nullptr};

constexpr aclnnStatus kTilingError = 561002;  // ACLNN_ERR_INNER_TILING_ERROR

aclnnStatus TilingError(const std::string& why) {
    stub::ReportError(std::string("aclnnRmsNormGradGetWorkspaceSize: tiling: ") + why);
    return kTilingError;
}

// RmsNormGrad's shape rules (rms_norm_grad_tiling.cpp).
aclnnStatus RmsShapes(const aclTensor* dy, const aclTensor* x, const aclTensor* rstd, const aclTensor* gamma,
                      const aclTensor* dx, const aclTensor* dgamma, const std::string& product) {
    const auto &xs = x->view, &gs = gamma->view;
    if (xs.empty() || xs.size() > 8) return TilingError("x must have 1-8 dims, not " + stub::ShapeStr(xs));
    if (gs.empty() || gs.size() > xs.size()) return TilingError("gamma must have 1 to x's dims, not " + stub::ShapeStr(gs));
    if (dy->view != xs || dx->view != xs) return TilingError("dy, x and dxOut shapes differ");
    if (!std::equal(gs.begin(), gs.end(), xs.end() - static_cast<std::ptrdiff_t>(gs.size()))) {
        return TilingError("gamma " + stub::ShapeStr(gs) + " is not the trailing dims of x " + stub::ShapeStr(xs));
    }
    if (dgamma->view != gs) return TilingError("dgammaOut " + stub::ShapeStr(dgamma->view) + " is not gamma's shape");
    if (xs.back() == 0) return TilingError("the last axis of x is empty");
    int64_t rows = stub::Numel(xs) / stub::Numel(gs);
    if (stub::Numel(rstd->view) != rows) return TilingError("rstd holds " + std::to_string(stub::Numel(rstd->view)) +
                                                            " values for " + std::to_string(rows) + " rows");
    if (rows == 0 && product != "950") return TilingError("no rows");
    return ACLNN_SUCCESS;
}

// rms_norm_grad_regbase_dx_full_load.h: a = dy*g, b = x*r, s = sum a*b, m = s*fl32(1/cols),
// dx = (a - b*m)*r; dgamma = sum over rows of dy*(x*r) (pairwise). No rows: dgamma zeros (950: rms_norm_grad_empty_dgamma.h, Duplicate 0.0f).
stub::Job RmsJob(const aclTensor* dy, const aclTensor* x, const aclTensor* rstd, const aclTensor* gamma,
                 const aclTensor* dx, const aclTensor* dgamma) {
    stub::Job job;
    int idy = job.Add(dy), ix = job.Add(x), ir = job.Add(rstd), ig = job.Add(gamma);
    int idx = job.Add(dx, true), idg = job.Add(dgamma, true);
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& xt = j.T(ix);
        int64_t cols = stub::Numel(j.T(ig).view), rows = stub::Numel(xt.view) / cols;
        std::vector<float> d = stub::ReadFloats(j.T(idy), xt.view), xv = stub::ReadFloats(xt, xt.view);
        std::vector<float> g = stub::ReadFloats(j.T(ig), j.T(ig).view), r = stub::ReadFloats(j.T(ir), j.T(ir).view);
        std::vector<float> out(d.size()), terms(static_cast<size_t>(rows * cols)), prod(static_cast<size_t>(cols));
        float inv = static_cast<float>(1.0 / static_cast<double>(cols));
        for (int64_t i = 0; i < rows; ++i) {
            for (int64_t k = 0; k < cols; ++k) {
                size_t at = static_cast<size_t>(i * cols + k);
                float a = d[at] * g[static_cast<size_t>(k)], b = xv[at] * r[static_cast<size_t>(i)];
                prod[static_cast<size_t>(k)] = a * b;
                terms[static_cast<size_t>(k * rows + i)] = d[at] * b;  // column-major: each column's rows together
            }
            float m = stub::PairwiseSum(prod.data(), cols, 1) * inv;
            for (int64_t k = 0; k < cols; ++k) {
                size_t at = static_cast<size_t>(i * cols + k);
                float a = d[at] * g[static_cast<size_t>(k)], b = xv[at] * r[static_cast<size_t>(i)];
                out[at] = (a - b * m) * r[static_cast<size_t>(i)];
            }
        }
        std::vector<float> dg(static_cast<size_t>(cols), 0.0f);
        for (int64_t k = 0; rows > 0 && k < cols; ++k) dg[static_cast<size_t>(k)] = stub::PairwiseSum(terms.data() + k * rows, rows, 1);
        stub::WriteFloats(j.T(idx), out, xt.dtype, negate);
        stub::WriteFloats(j.T(idg), dg, ACL_FLOAT, negate);
    };
    return job;
}

// LayerNorm's CheckShapeEqual, as written: compares normalizedShape[i] with t's dim i + (len(t) - len(norm))
// for i from len(t) - len(norm) (so nothing is compared once len(t) >= 2 len(norm)).
bool NormShapeEqual(const aclTensor* t, const std::vector<int64_t>& norm) {
    size_t axis = t->view.size() - norm.size();
    for (size_t i = axis; i < norm.size(); ++i) {
        if (norm[i] != t->view[i + axis]) return false;
    }
    return true;
}

struct LnOut {
    const aclTensor *dx, *dw, *db;
    bool mask[3];
};

// NormCommon::ComputeRstdNewtonRaphsonReg (norm/norm_common/op_kernel/reduce_common_regbase.h) in float32, its
// Mula steps (dst = a * b + dst) as fused multiply-adds; v = +inf gives 0, v = 0 gives +inf.
float NewtonRstd(float var, float eps) {
    float v = std::max(var + eps, -99.99f);
    float r = 1.0f / v, y = std::sqrt(r);
    float t = (v * -0.5f) * y;
    float rstd = y * std::fma(t, y, 1.5f);
    float s = std::fma(-v, r, 1.0f);
    r = std::fma(-rstd, rstd, r);
    s = std::fma(v, r, s) * rstd;
    rstd = std::fma(s, 0.5f, rstd);
    if (v == std::numeric_limits<float>::infinity()) rstd = 0.0f;
    if (v == 0.0f) rstd = std::numeric_limits<float>::infinity();
    return rstd;
}

// layer_norm_grad_v3_base.h: xh = (x - mean)*rstd, a = dy*gamma; s1 = sum a, s2 = sum xh*a;
// dx = ((a*N - s1) - xh*s2)*fl32(1/N)*rstd (each step rounded); gradWeight = sum over rows xh*dy,
// gradBias = sum over rows dy. Only the outputs outputMask asks for are written.
// eps >= 0: `rstd` is LayerNormGrad's variance, each row's rstd its NewtonRstd(variance, eps).
stub::Job LayerNormJob(const aclTensor* dy, const aclTensor* x, int64_t m, int64_t n, const aclTensor* mean,
                       const aclTensor* rstd, const aclTensor* weight, const LnOut& o, float eps = -1.0f) {
    stub::Job job;
    int idy = job.Add(dy), ix = job.Add(x), im = job.Add(mean), ir = job.Add(rstd), iw = job.Add(weight);
    int idx = o.mask[0] ? job.Add(o.dx, true) : -1, idw = o.mask[1] ? job.Add(o.dw, true) : -1,
        idb = o.mask[2] ? job.Add(o.db, true) : -1;
    if (!o.mask[0] && !o.mask[1] && !o.mask[2]) return job;  // nothing launched
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& xt = j.T(ix);
        std::vector<float> d = stub::ReadFloats(j.T(idy), xt.view), xv = stub::ReadFloats(xt, xt.view);
        std::vector<float> mu = stub::ReadFloats(j.T(im), j.T(im).view), rs = stub::ReadFloats(j.T(ir), j.T(ir).view);
        std::vector<float> g = iw >= 0 ? stub::ReadFloats(j.T(iw), j.T(iw).view) : std::vector<float>(static_cast<size_t>(n), 1.0f);
        std::vector<float> dx(d.size()), wt(static_cast<size_t>(m * n)), bt(static_cast<size_t>(m * n));
        std::vector<float> xh(static_cast<size_t>(n)), a(static_cast<size_t>(n)), xa(static_cast<size_t>(n));
        float nf = static_cast<float>(n), inv = 1.0f / nf;
        for (int64_t i = 0; i < m; ++i) {
            float r = eps >= 0.0f ? NewtonRstd(rs[static_cast<size_t>(i)], eps) : rs[static_cast<size_t>(i)];
            for (int64_t k = 0; k < n; ++k) {
                size_t at = static_cast<size_t>(i * n + k), col = static_cast<size_t>(k * m + i);
                xh[static_cast<size_t>(k)] = (xv[at] - mu[static_cast<size_t>(i)]) * r;
                a[static_cast<size_t>(k)] = d[at] * g[static_cast<size_t>(k)];
                xa[static_cast<size_t>(k)] = xh[static_cast<size_t>(k)] * a[static_cast<size_t>(k)];
                wt[col] = xh[static_cast<size_t>(k)] * d[at];
                bt[col] = d[at];
            }
            float s1 = stub::PairwiseSum(a.data(), n, 1), s2 = stub::PairwiseSum(xa.data(), n, 1);
            for (int64_t k = 0; k < n; ++k) {
                float v = (a[static_cast<size_t>(k)] * nf - s1) - xh[static_cast<size_t>(k)] * s2;
                dx[static_cast<size_t>(i * n + k)] = (v * inv) * r;
            }
        }
        std::vector<float> dw(static_cast<size_t>(n)), db(static_cast<size_t>(n));
        for (int64_t k = 0; k < n; ++k) {
            dw[static_cast<size_t>(k)] = stub::PairwiseSum(wt.data() + k * m, m, 1);
            db[static_cast<size_t>(k)] = stub::PairwiseSum(bt.data() + k * m, m, 1);
        }
        if (idx >= 0) stub::WriteFloats(j.T(idx), dx, xt.dtype, negate);
        if (idw >= 0) stub::WriteFloats(j.T(idw), dw, ACL_FLOAT, negate);
        if (idb >= 0) stub::WriteFloats(j.T(idb), db, ACL_FLOAT, negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950, A3, A2 (bf16 too); 310P (fp32, fp16); not 910 (the doc's list). Nulls 161001; dtypes (the OpDef's
// combinations: dy = x = dxOut; gamma FLOAT or x's; rstd, dgammaOut FLOAT) 161002; shapes 561002.
aclnnStatus aclnnRmsNormGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* x, const aclTensor* rstd,
                                             const aclTensor* gamma, const aclTensor* dxOut, const aclTensor* dgammaOut,
                                             uint64_t* workspaceSize, aclOpExecutor** executor) {
    auto check = [&](Checker& c) {
        Arg a{"dy", dy}, b{"x", x}, r{"rstd", rstd}, g{"gamma", gamma}, o{"dxOut", dxOut}, dg{"dgammaOut", dgammaOut};
        RETURN_IF_FAILED(c.NotNull({a, b, r, g, o, dg}));
        stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "310P", stub::kFp32Fp16);
        RETURN_IF_FAILED(c.DtypesIn(ok, {a}));
        RETURN_IF_FAILED(c.SameDtype({a, b, o}));
        if (gamma->dtype != ACL_FLOAT && gamma->dtype != x->dtype) {
            return c.Invalid("gamma " + stub::DTypeName(gamma->dtype) + " is neither FLOAT nor x's dtype");
        }
        RETURN_IF_FAILED(c.DtypesIn({ACL_FLOAT}, {r, dg}));
        return RmsShapes(dy, x, rstd, gamma, dxOut, dgammaOut, c.product());
    };
    return stub::PhaseOneJob(kRms, workspaceSize, executor, check,
                             [&](const Checker&) { return RmsJob(dy, x, rstd, gamma, dxOut, dgammaOut); });
}
STUB_PHASE_TWO(aclnnRmsNormGrad, kRms)

// 950, A3, A2 (bf16 too); 910, 310P (fp32, fp16: the doc's table; the op_api has no SoC check, but those
// products' kernels have no bf16). Order (op_api): nulls; outputMask length 3; requested
// outputs non-null (161001); dtypes; shapes (dims <= 8, normalizedShape 1-8 long, input's trailing dims as
// the source compares them, weight/bias, gradOut = input, mean = rstd with M values, outputs). All masks
// false: success, nothing launched. N = 0: success, nothing computed;
// M = 0: the requested gradWeightOut/gradBiasOut are zero-filled.
aclnnStatus aclnnLayerNormBackwardGetWorkspaceSize(const aclTensor* gradOut, const aclTensor* input,
                                                   const aclIntArray* normalizedShape, const aclTensor* mean,
                                                   const aclTensor* rstd, const aclTensor* weightOptional,
                                                   const aclTensor* biasOptional, const aclBoolArray* outputMask,
                                                   aclTensor* gradInputOut, aclTensor* gradWeightOut,
                                                   aclTensor* gradBiasOut, uint64_t* workspaceSize,
                                                   aclOpExecutor** executor) {
    LnOut outs{gradInputOut, gradWeightOut, gradBiasOut, {false, false, false}};
    int64_t m = 1, n = 1;
    auto check = [&](Checker& c) {
        Arg a{"gradOut", gradOut}, x{"input", input}, mu{"mean", mean}, r{"rstd", rstd};
        RETURN_IF_FAILED(c.NotNull({a, x}));
        if (normalizedShape == nullptr) return c.Null("normalizedShape");
        RETURN_IF_FAILED(c.NotNull({mu, r}));
        if (outputMask == nullptr) return c.Null("outputMask");
        if (outputMask->values.size() != 3) return c.Invalid("outputMask must hold 3 values");
        const char* names[3] = {"gradInputOut", "gradWeightOut", "gradBiasOut"};
        const aclTensor* ts[3] = {gradInputOut, gradWeightOut, gradBiasOut};
        for (int k = 0; k < 3; ++k) {
            outs.mask[k] = outputMask->values[static_cast<size_t>(k)];
            if (outs.mask[k] && ts[k] == nullptr) return c.Null(names[k]);
        }
        if (stub::ForProduct(c.product(), "950 A3 A2", "910 310P", stub::kFp32Fp16).empty()) return c.Unsupported();
        RETURN_IF_FAILED(c.DtypesIn(stub::kFloats, {a, x, mu, r}));
        RETURN_IF_FAILED(c.SameDtype({a, x}));
        if (input->dtype == ACL_BF16 && !stub::OneOf(c.product(), "950 A3 A2")) {  // the doc's table (see README)
            return c.Invalid("input BFLOAT16 is not supported on " + c.product());
        }
        if (weightOptional != nullptr) {
            RETURN_IF_FAILED(c.DtypesIn(stub::kFloats, {{"weightOptional", weightOptional}}));
            if (weightOptional->dtype != ACL_FLOAT) RETURN_IF_FAILED(c.SameDtype({{"weightOptional", weightOptional}, x}));
        }
        for (int k = -1; k < 3; ++k) {
            const aclTensor* t = k < 0 ? biasOptional : ts[k];
            if (t != nullptr) RETURN_IF_FAILED(c.DtypesIn(stub::kFloats, {{k < 0 ? "biasOptional" : names[k], t}}));
        }
        const std::vector<int64_t>& norm = normalizedShape->values;
        RETURN_IF_FAILED(c.Dims(0, 8, {a, x, mu, r}));
        if (norm.size() > 8 || norm.empty()) return c.Invalid("normalizedShape must hold 1-8 dims");
        for (int k = 0; k < 3; ++k) {
            if (outs.mask[k]) RETURN_IF_FAILED(c.Dims(0, 8, {{names[k], ts[k]}}));
        }
        if (input->view.size() < norm.size()) return c.Invalid("input has fewer dims than normalizedShape");
        if (!NormShapeEqual(input, norm)) return c.Invalid("input's trailing dims differ from normalizedShape");
        for (const Arg& opt : {Arg{"weightOptional", weightOptional}, Arg{"biasOptional", biasOptional}}) {
            if (opt.t == nullptr) continue;
            RETURN_IF_FAILED(c.Dims(norm.size(), std::min<size_t>(norm.size(), 8), {opt}));
            if (!NormShapeEqual(opt.t, norm)) return c.Invalid(std::string(opt.name) + " differs from normalizedShape");
        }
        size_t begin = input->view.size() - norm.size();
        for (size_t i = 0; i < input->view.size(); ++i) (i < begin ? m : n) *= input->view[i];
        RETURN_IF_FAILED(c.SameShape({a, x}));
        RETURN_IF_FAILED(c.SameShape({mu, r}));
        if (stub::Numel(mean->view) != m) return c.Invalid("mean does not hold " + std::to_string(m) + " values");
        if (outs.mask[0]) RETURN_IF_FAILED(c.SameShape({{"gradInputOut", gradInputOut}, x}));
        for (int k = 1; k < 3; ++k) {
            if (outs.mask[k] && stub::Numel(ts[k]->view) != n) {
                return c.Invalid(std::string(names[k]) + " does not hold " + std::to_string(n) + " values");
            }
        }
        return ACLNN_SUCCESS;
    };
    return stub::PhaseOneJob(kLayerNorm, workspaceSize, executor, check, [&](const Checker&) {
        if (n <= 0) return stub::Job{};  // M = 0: gradWeight and gradBias (if asked for) are zero-filled
        return LayerNormJob(gradOut, input, m, n, mean, rstd, weightOptional, outs);
    });
}
STUB_PHASE_TWO(aclnnLayerNormBackward, kLayerNorm)

// 950 only (the OpDef's one config). No op_api: the generated API's nulls 161001 and the OpDef's dtype combinations
// (dy = x = pd_x; variance, mean FLOAT; gamma FLOAT or x's; pd_gamma = pd_beta, FLOAT or gamma's) 161002; then the
// proto's and the tiling's shapes (the tiling's own refusals are 561002 on the device: 161002 here, as the Python
// contract, aclnn_cli/ops/rows/layer_norm_grad.py). eps: 1e-12 for a FLOAT x, else 1e-5 (the tiling's).
aclnnStatus aclnnLayerNormGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* x, const aclTensor* variance,
                                               const aclTensor* mean, const aclTensor* gamma, const aclTensor* pd_x,
                                               const aclTensor* pd_gamma, const aclTensor* pd_beta,
                                               uint64_t* workspaceSize, aclOpExecutor** executor) {
    LnOut outs{pd_x, pd_gamma, pd_beta, {true, true, true}};
    int64_t m = 1, n = 1;
    auto check = [&](Checker& c) {
        Arg a{"dy", dy}, b{"x", x}, v{"variance", variance}, mu{"mean", mean}, g{"gamma", gamma}, o{"pd_x", pd_x},
            og{"pd_gamma", pd_gamma}, ob{"pd_beta", pd_beta};
        RETURN_IF_FAILED(c.NotNull({a, b, v, mu, g, o, og, ob}));
        if (stub::ForProduct(c.product(), "950", "", stub::kFp32Fp16).empty()) return c.Unsupported();
        RETURN_IF_FAILED(c.DtypesIn(stub::kFloats, {a, b, v, mu, g, o, og, ob}));
        RETURN_IF_FAILED(c.SameDtype({b, a, o}));
        RETURN_IF_FAILED(c.DtypesIn({ACL_FLOAT}, {v, mu}));
        if (gamma->dtype != ACL_FLOAT && gamma->dtype != x->dtype) {
            return c.Invalid("gamma " + stub::DTypeName(gamma->dtype) + " is neither FLOAT nor x's dtype");
        }
        RETURN_IF_FAILED(c.SameDtype({og, ob}));
        if (pd_gamma->dtype != ACL_FLOAT && pd_gamma->dtype != gamma->dtype) {
            return c.Invalid("pd_gamma " + stub::DTypeName(pd_gamma->dtype) + " is neither FLOAT nor gamma's dtype");
        }
        RETURN_IF_FAILED(c.Dims(1, 8, {a, b, v, mu, g, o, og, ob}));
        RETURN_IF_FAILED(c.SameShape({b, a}));
        RETURN_IF_FAILED(c.SameShape({b, o}));
        RETURN_IF_FAILED(c.SameShape({mu, v}));
        RETURN_IF_FAILED(c.SameShape({g, og}));
        RETURN_IF_FAILED(c.SameShape({g, ob}));
        const auto &xs = x->view, &gs = gamma->view;
        if (gs.size() > xs.size()) return c.Invalid("gamma has more dims than x");
        for (int64_t d : xs) {
            if (d <= 0) return c.Invalid("every axis of x must be positive, not " + stub::ShapeStr(xs));
        }
        if (!std::equal(gs.begin(), gs.end(), xs.end() - static_cast<std::ptrdiff_t>(gs.size()))) {
            return c.Invalid("gamma " + stub::ShapeStr(gs) + " is not the trailing dims of x " + stub::ShapeStr(xs));
        }
        n = stub::Numel(gs);
        m = stub::Numel(xs) / n;
        if (stub::Numel(mean->view) != m) return c.Invalid("mean does not hold " + std::to_string(m) + " values");
        return ACLNN_SUCCESS;
    };
    return stub::PhaseOneJob(kLayerNormGrad, workspaceSize, executor, check, [&](const Checker&) {
        float eps = x->dtype == ACL_FLOAT ? 1e-12f : 1e-5f;
        return LayerNormJob(dy, x, m, n, mean, variance, gamma, outs, eps);
    });
}
STUB_PHASE_TWO(aclnnLayerNormGrad, kLayerNormGrad)

}  // extern "C"
