// libopapi of the stub: SwiGluGrad (activation/swi_glu_grad), the split family.
//
// Phase one: the statuses of aclnn-cli's contract for the op (aclnn_cli/ops/swi_glu_grad.py, checked by
// aclnn_cli.ops.contract.check), in its order: nulls 161001, then everything else 161002. Phase two: the 950
// kernel (op_kernel/arch35/swi_glu_grad_base.h, SwiGluGradBaseKernel::Compute) in float32, x = [A, B] cut in
// halves along dim.
#include <cmath>

#include "aclnnop/aclnn_swi_glu_grad.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Checker;

const stub::OpDef kSwiGluGrad{"aclnnSwiGluGrad", nullptr, nullptr};

// The contract's shape rule (_shape_rule): dim in [-n, n-1] for x's n dims; x even along dim; yGrad x's shape
// with dim halved; out x's shape. Sets *axis to dim counted from the front.
aclnnStatus Shapes(const Checker& c, const aclTensor* yGrad, const aclTensor* x, int64_t dim, const aclTensor* out,
                   size_t* axis) {
    const std::vector<int64_t>& shape = x->view;
    int64_t n = static_cast<int64_t>(shape.size());
    if (dim < -n || dim >= n) {
        return c.Invalid("dim " + std::to_string(dim) + " is outside [" + std::to_string(-n) + ", " +
                         std::to_string(n - 1) + "] for a " + std::to_string(n) + "-d x");
    }
    *axis = static_cast<size_t>(dim < 0 ? dim + n : dim);
    if (shape[*axis] % 2 != 0) {
        return c.Invalid("x has " + std::to_string(shape[*axis]) + " elements along dim " + std::to_string(dim) +
                         ": not split in halves");
    }
    std::vector<int64_t> half = shape;
    half[*axis] /= 2;
    if (yGrad->view != half) {
        return c.Invalid("yGrad shape " + stub::ShapeStr(yGrad->view) + " is not x's with dim halved, " +
                         stub::ShapeStr(half));
    }
    if (out->view != shape) {
        return c.Invalid("out shape " + stub::ShapeStr(out->view) + " is not x's " + stub::ShapeStr(shape));
    }
    return ACLNN_SUCCESS;
}

// Phase one in the contract's order: yGrad, x, out null (161001); each dtype in the product's list (950, A3,
// A2: FLOAT, FLOAT16, BF16; 310P: FLOAT, FLOAT16; elsewhere none); the three dtypes identical; 1-8 dims each;
// the shape rule.
aclnnStatus Check(Checker& c, const aclTensor* yGrad, const aclTensor* x, int64_t dim, const aclTensor* out,
                  size_t* axis) {
    Arg dy{"yGrad", yGrad}, xa{"x", x}, o{"out", out};
    RETURN_IF_FAILED(c.NotNull({dy, xa, o}));
    RETURN_IF_FAILED(c.DtypesIn(stub::ForProduct(c.product(), "950 A3 A2", "310P", stub::kFp32Fp16), {dy, xa, o}));
    RETURN_IF_FAILED(c.SameDtype({dy, xa, o}));
    RETURN_IF_FAILED(c.Dims(1, 8, {dy, xa, o}));
    return Shapes(c, yGrad, x, dim, out, axis);
}

// One element pair of the 950 kernel, every step rounded to float32 (no FMA): s = 1 / (exp(-A) + 1);
// out_A = (((1 - s) * A + 1) * (yGrad * s)) * B; out_B = (s * yGrad) * A.
void Kernel(float a, float b, float dy, float* out_a, float* out_b) {
    float s = 1.0f / (std::exp(-a) + 1.0f);
    float t = dy * s;
    *out_a = (((1.0f - s) * a + 1.0f) * t) * b;
    *out_b = (s * dy) * a;
}

// x cut as (A1, R, A0) at the split axis: A is [:, :R/2, :], B [:, R/2:, :], yGrad (A1, R/2, A0); each result
// rounded once (to nearest even) to out's dtype, which is x's.
stub::Job SwiGluJob(const aclTensor* yGrad, const aclTensor* x, const aclTensor* out, size_t axis) {
    stub::Job job;
    int idy = job.Add(yGrad), ix = job.Add(x), iout = job.Add(out, true);
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& o = j.T(iout);
        std::vector<float> xs = stub::ReadFloats(j.T(ix), o.view), dys = stub::ReadFloats(j.T(idy), j.T(idy).view);
        std::vector<float> res(xs.size());
        stub::Rows cut(o.view, axis, axis + 1);
        int64_t h = cut.r / 2;
        for (int64_t a1 = 0; a1 < cut.a1; ++a1) {
            for (int64_t r = 0; r < h; ++r) {
                for (int64_t a0 = 0; a0 < cut.a0; ++a0) {
                    size_t at = static_cast<size_t>((a1 * cut.r + r) * cut.a0 + a0);
                    size_t bt = at + static_cast<size_t>(h * cut.a0);
                    size_t gt = static_cast<size_t>((a1 * h + r) * cut.a0 + a0);
                    Kernel(xs[at], xs[bt], dys[gt], &res[at], &res[bt]);
                }
            }
        }
        stub::WriteFloats(o, res, o.dtype, negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950, A3, A2 (fp32, fp16, bf16); 310P (fp32, fp16); not 910. See Check for the order of the checks. An empty x
// is accepted (the contract has no empty check): nothing is launched.
aclnnStatus aclnnSwiGluGradGetWorkspaceSize(const aclTensor* yGrad, const aclTensor* x, int64_t dim,
                                            const aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
    size_t axis = 0;
    return stub::PhaseOneJob(kSwiGluGrad, workspaceSize, executor,
                             [&](Checker& c) { return Check(c, yGrad, x, dim, out, &axis); },
                             [&](const Checker&) { return SwiGluJob(yGrad, x, out, axis); });
}

STUB_PHASE_TWO(aclnnSwiGluGrad, kSwiGluGrad)

}  // extern "C"
