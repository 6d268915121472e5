// libopapi of the stub: InstanceNormGrad (norm/instance_norm_grad: the API generated from its OpDef).
//
// Phase one: the OpDef's nulls and dtypes (the eight tensors all FLOAT or all FLOAT16), the tiling's checks
// (instance_norm_grad_tiling_arch35.cpp, 561002 on the device, 161002 here as in the op's contract), which an empty x
// skips; pd_gamma and pd_beta gamma's shape (the proto). Phase two: the 950 kernel in float32 per instance (n, c) over
// its M positions (instance_norm_grad_common.h): rstd = 1 / sqrt(var + 1e-6f); Kahan sums (a NaN compensation reset
// to 0) of dy, dy*((x - mean)*rstd), -(dy*gamma)*rstd, -0.5*((dy*gamma)*(x - mean))*rstd^3; the samples' partials of
// pd_gamma, pd_beta Kahan-added in sample order; pd_x = ((a*rstd) + cVar*(x - mean)) + cMean, each step rounded.
#include <cmath>

#include "aclnnop/aclnn_instance_norm_grad.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Checker;

const stub::OpDef kInstanceNormGrad{"aclnnInstanceNormGrad", nullptr, nullptr};
constexpr float kInEps = 1e-6f;

// One Kahan-compensated running sum with the kernel's NaN guard (an infinite sum stays infinite).
struct Kahan {
    float sum = 0.0f, comp = 0.0f;
    void Add(float v) {
        float y = v - comp, t = sum + y;
        comp = (t - sum) - y;
        if (std::isnan(comp)) comp = 0.0f;
        sum = t;
    }
};

// The tiling's shape checks (GetShapeAttrsInfo, InputCheck, ParamsCheck); none for an empty x (the empty tiling).
aclnnStatus InShapes(const Checker& c, const aclTensor* dy, const aclTensor* x, const aclTensor* variance,
                     const aclTensor* mean, const aclTensor* gamma, const aclTensor* pd_x) {
    if (stub::Numel(x->view) == 0) return ACLNN_SUCCESS;
    if (dy->view.size() < 2) return c.Invalid("dy must have at least 2 dims [N, ..., C]");
    if (x->view != dy->view || pd_x->view != dy->view) return c.Invalid("the shapes of dy, x and pd_x must be the same");
    int64_t n = dy->view.front(), ch = dy->view.back();
    if (stub::Numel(gamma->view) != ch) return c.Invalid("the size of gamma must equal the C axis of dy");
    if (stub::Numel(variance->view) != n * ch || stub::Numel(mean->view) != n * ch) {
        return c.Invalid("the size of variance and mean must equal N*C");
    }
    return ACLNN_SUCCESS;
}

stub::Job InJob(const aclTensor* dy, const aclTensor* x, const aclTensor* variance, const aclTensor* mean,
                const aclTensor* gamma, const aclTensor* pd_x, const aclTensor* pd_gamma, const aclTensor* pd_beta) {
    stub::Job job;
    int idy = job.Add(dy), ix = job.Add(x), iv = job.Add(variance), im = job.Add(mean), ig = job.Add(gamma);
    int ox = job.Add(pd_x, true), og = job.Add(pd_gamma, true), ob = job.Add(pd_beta, true);
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& xt = j.T(ix);
        std::vector<float> d = stub::ReadFloats(j.T(idy), xt.view), xv = stub::ReadFloats(xt, xt.view);
        std::vector<float> var = stub::ReadFloats(j.T(iv), j.T(iv).view), mu = stub::ReadFloats(j.T(im), j.T(im).view);
        std::vector<float> g = stub::ReadFloats(j.T(ig), j.T(ig).view);
        int64_t ch = stub::Numel(j.T(ig).view), n = xt.view.empty() ? 0 : xt.view.front();
        int64_t m = n * ch > 0 ? stub::Numel(xt.view) / (n * ch) : 0;
        std::vector<float> dx(d.size());
        std::vector<Kahan> dgamma(static_cast<size_t>(ch)), dbeta(static_cast<size_t>(ch));
        float s = 1.0f / static_cast<float>(std::max<int64_t>(m, 1)), two = 2.0f * s;
        for (int64_t i = 0; i < n; ++i) {
            for (int64_t c = 0; c < ch; ++c) {
                size_t st = static_cast<size_t>(i * ch + c);
                float r = 1.0f / std::sqrt(var[st] + kInEps), r3 = (r * r) * r, mean_v = mu[st];
                float gv = g[static_cast<size_t>(c)];
                Kahan db, dg, pm, pv;
                for (int64_t p = 0; p < m; ++p) {
                    size_t at = static_cast<size_t>((i * m + p) * ch + c);
                    float xc = xv[at] - mean_v, a = d[at] * gv;
                    db.Add(d[at]);
                    dg.Add(d[at] * (xc * r));
                    pm.Add((a * r) * -1.0f);
                    pv.Add(((a * xc) * r3) * -0.5f);
                }
                float c_var = pv.sum * two, c_mean = pm.sum * s;
                for (int64_t p = 0; p < m; ++p) {
                    size_t at = static_cast<size_t>((i * m + p) * ch + c);
                    float xc = xv[at] - mean_v, a = d[at] * gv;
                    float ar = a * r, vx = c_var * xc;  // (MulAddDst unfused)
                    dx[at] = (ar + vx) + c_mean;
                }
                dgamma[static_cast<size_t>(c)].Add(dg.sum);
                dbeta[static_cast<size_t>(c)].Add(db.sum);
            }
        }
        std::vector<float> pg(static_cast<size_t>(ch)), pb(static_cast<size_t>(ch));
        for (size_t c = 0; c < pg.size(); ++c) {
            pg[c] = dgamma[c].sum;
            pb[c] = dbeta[c].sum;
        }
        stub::WriteFloats(j.T(ox), dx, xt.dtype, negate);
        stub::WriteFloats(j.T(og), pg, xt.dtype, negate);
        stub::WriteFloats(j.T(ob), pb, xt.dtype, negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950 only (the OpDef's one config); nulls 161001; the eight of one dtype among FLOAT, FLOAT16 (the OpDef) 161002;
// 1-8 dims; InShapes; pd_gamma and pd_beta gamma's shape.
aclnnStatus aclnnInstanceNormGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* x, const aclTensor* variance,
                                                  const aclTensor* mean, const aclTensor* gamma, const aclTensor* pd_x,
                                                  const aclTensor* pd_gamma, const aclTensor* pd_beta,
                                                  uint64_t* workspaceSize, aclOpExecutor** executor) {
    auto check = [&](Checker& c) {
        Arg a{"dy", dy}, b{"x", x}, v{"variance", variance}, mu{"mean", mean}, g{"gamma", gamma}, o{"pd_x", pd_x},
            og{"pd_gamma", pd_gamma}, ob{"pd_beta", pd_beta};
        RETURN_IF_FAILED(c.NotNull({a, b, v, mu, g, o, og, ob}));
        if (c.product() != "950") return c.Unsupported();
        RETURN_IF_FAILED(c.DtypesIn(stub::kFp32Fp16, {a, b, v, mu, g, o, og, ob}));
        RETURN_IF_FAILED(c.SameDtype({a, b, v, mu, g, o, og, ob}));
        RETURN_IF_FAILED(c.Dims(1, 8, {a, b, v, mu, g, o, og, ob}));
        RETURN_IF_FAILED(InShapes(c, dy, x, variance, mean, gamma, pd_x));
        RETURN_IF_FAILED(c.SameShape({g, og}));
        return c.SameShape({g, ob});
    };
    return stub::PhaseOneJob(kInstanceNormGrad, workspaceSize, executor, check, [&](const Checker&) {
        return InJob(dy, x, variance, mean, gamma, pd_x, pd_gamma, pd_beta);
    });
}
STUB_PHASE_TWO(aclnnInstanceNormGrad, kInstanceNormGrad)

}  // extern "C"
