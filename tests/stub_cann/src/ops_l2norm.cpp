// libopapi of the stub: L2NormalizeGrad (norm/l2_normalize_grad: the API generated from its OpDef).
//
// Phase one: the OpDef's nulls and dtypes, infershape's dx shape, the tiling's checks (l2_normalize_grad_tiling.cpp,
// 561002 on the device, 161002 here as in the op's contract); phase two: the 950 templates in float32 (tree sums for
// a last-axis row, by chunks of 4096 past 6144 elements, Kahan-compensated running sums along a middle axis), then
// n = max(sqrt(sq), eps) and dx = (dy - y*s) / n, rounded to dx's dtype.
#include <cmath>

#include "aclnnop/aclnn_l2_normalize_grad.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Checker;

const stub::OpDef kL2Norm{"aclnnL2NormalizeGrad", nullptr, nullptr};
constexpr int64_t kL2FullLoad = 6144, kL2Chunk = 4096;

// The axis a dim list names (null or empty: 1), negative from the end; -1 for more than one entry.
int64_t L2Axis(const aclIntArray* dims, int64_t rank) {
    if (dims == nullptr || dims->values.empty()) return 1;
    if (dims->values.size() > 1) return -1;
    int64_t d = dims->values[0];
    return d < 0 ? d + rank : d;
}

aclnnStatus L2Shapes(const Checker& c, const aclTensor* x, const aclTensor* y, const aclTensor* dy,
                     const aclTensor* dx, const aclIntArray* dims) {
    for (auto [name, t] : {std::pair<const char*, const aclTensor*>{"y", y}, {"dy", dy}, {"dx", dx}}) {
        if (t->view != x->view) return c.Invalid(std::string(name) + " shape is not x's");
    }
    if (dims != nullptr && dims->values.size() > 1) return c.Invalid("dim: the kernel takes a single axis");
    int64_t rank = static_cast<int64_t>(x->view.size()), d = L2Axis(dims, rank);
    if (d < 0 || d >= rank) return c.Invalid("dim is outside x's rank");
    return ACLNN_SUCCESS;
}

// A sum of n float32 terms `stride` apart in the template's order.
float L2Sum(const float* v, int64_t n, int64_t stride) {
    if (stride > 1) {  // strided: Kahan-compensated, in index order
        float acc = 0.0f, comp = 0.0f;
        for (int64_t i = 0; i < n; ++i) {
            float yv = v[i * stride] - comp, t = acc + yv;
            comp = (t - acc) - yv;
            acc = t;
        }
        return acc;
    }
    if (n <= kL2FullLoad) return stub::TreeSum(v, n, 1);
    std::vector<float> parts;
    for (int64_t i = 0; i < n; i += kL2Chunk) parts.push_back(stub::TreeSum(v + i, std::min(kL2Chunk, n - i), 1));
    return stub::TreeSum(parts.data(), static_cast<int64_t>(parts.size()), 1);
}

stub::Job L2Job(const aclTensor* x, const aclTensor* y, const aclTensor* dy, const aclTensor* dx, int64_t axis,
                float eps) {
    stub::Job job;
    int ix = job.Add(x), iy = job.Add(y), idy = job.Add(dy), idx = job.Add(dx, true);
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(idx);
        std::vector<float> xv = stub::ReadFloats(j.T(ix), o.view), yv = stub::ReadFloats(j.T(iy), o.view),
                           gv = stub::ReadFloats(j.T(idy), o.view);
        std::vector<float> res(xv.size()), sq(xv.size()), p(xv.size());
        for (size_t i = 0; i < xv.size(); ++i) {
            sq[i] = xv[i] * xv[i];
            p[i] = yv[i] * gv[i];
        }
        stub::Rows rows(o.view, static_cast<size_t>(axis), static_cast<size_t>(axis) + 1);
        for (int64_t a1 = 0; a1 < rows.a1; ++a1) {
            for (int64_t a0 = 0; a0 < rows.a0; ++a0) {
                size_t at = static_cast<size_t>(a1 * rows.r * rows.a0 + a0);
                float n = std::max(std::sqrt(L2Sum(&sq[at], rows.r, rows.a0)), eps);
                float s = L2Sum(&p[at], rows.r, rows.a0);
                for (int64_t i = 0; i < rows.r; ++i) {
                    size_t k = at + static_cast<size_t>(i * rows.a0);
                    res[k] = (gv[k] - yv[k] * s) / n;
                }
            }
        }
        stub::WriteFloats(o, res, o.dtype, negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950 only; nulls; the four of one dtype among FLOAT, FLOAT16 (the OpDef); L2Shapes. eps narrowed to float.
aclnnStatus aclnnL2NormalizeGradGetWorkspaceSize(const aclTensor* x, const aclTensor* y, const aclTensor* dy,
                                                 const aclIntArray* dimOptional, double eps, const aclTensor* dx,
                                                 uint64_t* workspaceSize, aclOpExecutor** executor) {
    auto check = [&](Checker& c) {
        Arg a{"x", x}, b{"y", y}, g{"dy", dy}, o{"dx", dx};
        RETURN_IF_FAILED(c.NotNull({a, b, g, o}));
        if (c.product() != "950") return c.Unsupported();
        RETURN_IF_FAILED(c.DtypesIn(stub::kFp32Fp16, {a, b, g, o}));
        RETURN_IF_FAILED(c.SameDtype({a, b, g, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {a, b, g, o}));
        return L2Shapes(c, x, y, dy, dx, dimOptional);
    };
    return stub::PhaseOneJob(kL2Norm, workspaceSize, executor, check, [&](const Checker&) {
        int64_t axis = L2Axis(dimOptional, static_cast<int64_t>(x->view.size()));
        return L2Job(x, y, dy, dx, axis, static_cast<float>(eps));
    });
}
STUB_PHASE_TWO(aclnnL2NormalizeGrad, kL2Norm)

}  // extern "C"
