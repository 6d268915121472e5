// libopapi of the stub: RepeatInterleaveGrad (index/repeat_interleave_grad: ops-nn has no op_api; the doc's contract).
//
// Phase one: the statuses of aclnn-cli's contract for the op (aclnn_cli/ops/segments/repeat_interleave_grad.py,
// CONTRACT_NOTES): nulls 161001; the 950 only; yGrad and out FLOAT, FLOAT16, BF16 and alike, repeats INT64 or INT32;
// 0-8 dims; axis in [-n, n); repeats 0-d or 1-d and not empty (the tiling's 561002: 161002 here); out's size yGrad's
// with the axis reduced. Phase two: each run in float32, a run of one copied, a longer one the 950's tree sum along
// the axis, the result rounded to out's dtype. Run lengths that do not add up to the axis (undefined on the device)
// are cut at its end.
#include <algorithm>

#include "aclnnop/aclnn_repeat_interleave_grad.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Arg;
using stub::Checker;

const stub::OpDef kRepeatGrad{"aclnnRepeatInterleaveGrad", nullptr, nullptr};

aclnnStatus RigShapes(const Checker& c, const aclTensor* y, const aclTensor* rep, int64_t axis, const aclTensor* out) {
    int64_t rank = static_cast<int64_t>(y->view.size());
    if (axis < -rank || axis >= rank) return c.Invalid("axis is outside [-n, n) of yGrad");
    if (rep->view.size() > 1) return c.Invalid("repeats is 0-d or 1-d");
    int64_t n = stub::Numel(rep->view);
    if (n == 0) return c.Invalid("repeats is empty");
    size_t at = static_cast<size_t>(axis < 0 ? axis + rank : axis);
    std::vector<int64_t> rest = y->view;
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(at));
    int64_t outer = stub::Numel(rest), size = stub::Numel(out->view);
    if (n > 1 && size != outer * n) return c.Invalid("out's size is not yGrad's with the axis reduced to repeats'");
    if (n == 1 && outer != 0 && size % outer != 0) return c.Invalid("out's size is not a multiple of yGrad's outside the axis");
    return ACLNN_SUCCESS;
}

stub::Job RigJob(const aclTensor* y, const aclTensor* rep, int64_t axis, const aclTensor* out) {
    stub::Job job;
    int iy = job.Add(y), ir = job.Add(rep), io = job.Add(out, true);
    job.run = [=](const stub::Job& j, bool negate) {
        const aclTensor& yt = j.T(iy);
        const aclTensor& ot = j.T(io);
        size_t at = static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(yt.view.size()) : axis);
        stub::Rows rows(yt.view, at, at + 1);
        std::vector<int64_t> counts = stub::ReadInts(j.T(ir));
        int64_t outer = rows.a1 * rows.a0;
        int64_t runs = counts.size() > 1 ? static_cast<int64_t>(counts.size())
                                         : (outer != 0 ? stub::Numel(ot.view) / outer : 0);
        std::vector<float> v = stub::ReadFloats(yt, yt.view);
        std::vector<float> res(static_cast<size_t>(stub::Numel(ot.view)), 0.0f);
        for (int64_t a1 = 0; a1 < rows.a1; ++a1) {
            int64_t start = 0;
            for (int64_t s = 0; s < runs; ++s) {
                int64_t len = counts[counts.size() > 1 ? static_cast<size_t>(s) : 0];
                len = std::max<int64_t>(0, std::min(len, rows.r - start));
                for (int64_t a0 = 0; len > 0 && a0 < rows.a0; ++a0) {  // (an empty run stays +0)
                    const float* first = v.data() + (a1 * rows.r + start) * rows.a0 + a0;
                    res[static_cast<size_t>((a1 * runs + s) * rows.a0 + a0)] =
                        len == 1 ? first[0] : stub::TreeSum(first, len, rows.a0);
                }
                start += len;
            }
        }
        stub::WriteFloats(ot, res, ot.dtype, negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950 only; see the file's comment for the order of the checks.
aclnnStatus aclnnRepeatInterleaveGradGetWorkspaceSize(const aclTensor* yGrad, const aclTensor* repeats, int64_t axis,
                                                      const aclTensor* out, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor) {
    auto check = [&](Checker& c) {
        Arg y{"yGrad", yGrad}, r{"repeats", repeats}, o{"out", out};
        RETURN_IF_FAILED(c.NotNull({y, r, o}));
        if (c.product() != "950") return c.Unsupported();
        RETURN_IF_FAILED(c.DtypesIn(stub::kFloats, {y}));
        RETURN_IF_FAILED(c.DtypesIn({ACL_INT64, ACL_INT32}, {r}));
        RETURN_IF_FAILED(c.DtypesIn(stub::kFloats, {o}));
        RETURN_IF_FAILED(c.SameDtype({y, o}));
        RETURN_IF_FAILED(c.Dims(0, 8, {y, r, o}));
        return RigShapes(c, yGrad, repeats, axis, out);
    };
    return stub::PhaseOneJob(kRepeatGrad, workspaceSize, executor, check,
                             [&](const Checker&) { return RigJob(yGrad, repeats, axis, out); });
}
STUB_PHASE_TWO(aclnnRepeatInterleaveGrad, kRepeatGrad)

}  // extern "C"
