// libopapi of the stub: aclnnConvTbcBackward (hicann/ops-nn conv/convolution_backward op_api: the gradients of
// ConvolutionBackward, outputMask all true, stride 1, dilation 1, groups 1, on the TBC tensors laid out anew).
//
// Phase one: the statuses of aclnn-cli's contract for the op (aclnn_cli/ops/tbc/conv_tbc_backward.py, after
// convtbc_backward_checker.cpp's CheckTbcParams): any of the seven tensors null: 161001; then 161002 for each tensor's
// dtype outside the product's list (950, A3, A2: FLOAT, FLOAT16, BF16), the four inputs not of one dtype, each tensor
// outside 1-3 dims, pad < 0 or cubeMathType outside 0-3, and the shape rule (TbcCheckShapes).
//
// Phase two: the 950's lowering (CalculateConvolutionTbcBackwardBy3D): input [1, 1, T, B, Cin] NDHWC, i.e. the
// NCDHW (1, Cin, 1, T, B) of one sample, self alike, weight [1, K, 1, Cin, Cout] DHWCN, i.e. (Cout, Cin, 1, K, 1),
// padding (0, pad, 0); the convolution's gradients (conv.h's ConvGradients, as ops_conv.cpp's) permuted back.
#include <string>
#include <vector>

#include "aclnnop/aclnn_convolution_backward.h"
#include "conv.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Checker;

const stub::OpDef kConvTbcBackward{"aclnnConvTbcBackward", nullptr, nullptr};

struct TbcCall {
    const aclTensor *self, *input, *weight, *bias;
    int64_t pad;
    int math;
    const aclTensor *grad_input, *grad_weight, *grad_bias;
};

// CheckTbcShape after the dims: input[2] = weight[1], bias[0] = weight[2], self (T + 2 pad + 1 - K, B, Cout), each
// output its input's shape.
aclnnStatus TbcCheckShapes(const Checker& c, const TbcCall& e) {
    const std::vector<int64_t> &s = e.self->view, &x = e.input->view, &w = e.weight->view, &b = e.bias->view;
    const std::pair<const aclTensor*, size_t> dims[] = {{e.self, 3}, {e.input, 3}, {e.weight, 3}, {e.bias, 1},
        {e.grad_bias, 1}, {e.grad_input, 3}, {e.grad_weight, 3}};
    for (const auto& d : dims) {
        if (d.first->view.size() != d.second) return c.Invalid("a tensor has the wrong number of dims");
    }
    if (x[2] != w[1]) return c.Invalid("input[2] is not weight[1]");
    if (b[0] != w[2]) return c.Invalid("bias is not weight[2]");
    int64_t to = x[0] + 2 * e.pad + 1 - w[0];
    if (to < 0 || s != std::vector<int64_t>{to, x[1], w[2]}) return c.Invalid("self is not the forward's size");
    if (e.grad_input->view != x || e.grad_weight->view != w || e.grad_bias->view != b) {
        return c.Invalid("an output's shape is not its input's");
    }
    return ACLNN_SUCCESS;
}

aclnnStatus TbcCheck(const Checker& c, const TbcCall& e) {
    RETURN_IF_FAILED(c.NotNull({{"self", e.self}, {"input", e.input}, {"weight", e.weight}, {"bias", e.bias},
                                {"gradInput", e.grad_input}, {"gradWeight", e.grad_weight}, {"gradBias", e.grad_bias}}));
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "", stub::kFp32Fp16);
    for (stub::Arg a : {stub::Arg{"self", e.self}, stub::Arg{"input", e.input}, stub::Arg{"weight", e.weight},
                        stub::Arg{"bias", e.bias}, stub::Arg{"gradInput", e.grad_input},
                        stub::Arg{"gradWeight", e.grad_weight}, stub::Arg{"gradBias", e.grad_bias}}) {
        RETURN_IF_FAILED(c.DtypesIn(ok, {a}));
    }
    RETURN_IF_FAILED(c.SameDtype({{"self", e.self}, {"input", e.input}, {"weight", e.weight}, {"bias", e.bias},
                                  {"gradInput", e.grad_input}, {"gradWeight", e.grad_weight},
                                  {"gradBias", e.grad_bias}}));
    if (e.pad < 0) return c.Invalid("pad must be >= 0");
    if (e.math < 0 || e.math > 3) return c.Invalid("cubeMathType must be 0, 1, 2 or 3");
    if (stub::Numel(e.self->view) == 0) return c.Invalid("self is empty");
    return TbcCheckShapes(c, e);
}

// v (row-major over `dims`, 3 axes) with its axes in the order `perm`: out[i0, i1, i2] = v[j] where j's axis perm[a]
// is i_a.
std::vector<float> Permute3(const std::vector<float>& v, const std::vector<int64_t>& dims, const int (&perm)[3]) {
    const int64_t stride[3] = {dims[1] * dims[2], dims[2], 1};
    const int64_t n0 = dims[perm[0]], n1 = dims[perm[1]], n2 = dims[perm[2]];
    std::vector<float> out;
    out.reserve(v.size());
    for (int64_t i0 = 0; i0 < n0; ++i0) {
        for (int64_t i1 = 0; i1 < n1; ++i1) {
            for (int64_t i2 = 0; i2 < n2; ++i2) {
                out.push_back(v[i0 * stride[perm[0]] + i1 * stride[perm[1]] + i2 * stride[perm[2]]]);
            }
        }
    }
    return out;
}

constexpr int kToCtb[3] = {2, 0, 1};    // (T, B, C) -> (C, T, B): the NCDHW (1, C, 1, T, B) of By3D
constexpr int kFromCtb[3] = {1, 2, 0};  // (C, T, B) -> (T, B, C)
constexpr int kWeight[3] = {2, 1, 0};   // (K, Cin, Cout) <-> (Cout, Cin, K)

stub::Job TbcJob(const TbcCall& e) {
    stub::Job job;
    int gy = job.Add(e.self), x = job.Add(e.input), w = job.Add(e.weight);
    int gi = job.Add(e.grad_input, true), gw = job.Add(e.grad_weight, true), gb = job.Add(e.grad_bias, true);
    const std::vector<int64_t> &xs = e.input->view, &ws = e.weight->view, &ss = e.self->view;
    stub::ConvGeometry c;
    c.n = 1, c.cin = xs[2], c.cout = ws[2], c.groups = 1;
    c.sizes = {1, xs[0], xs[1]}, c.out = {1, ss[0], ss[1]}, c.kernel = {1, ws[0], 1};
    c.stride = {1, 1, 1}, c.pad = {0, e.pad, 0}, c.dilation = {1, 1, 1};
    stub::ConvMath math = stub::ConvMathOf(e.math, e.self->dtype, e.input->dtype, e.weight->dtype);
    job.run = [=](const stub::Job& j, bool negate) {
        auto read = [&j](int at, const int (&perm)[3]) {
            return Permute3(stub::ReadFloats(j.T(at), j.T(at).view), j.T(at).view, perm);
        };
        stub::ConvGrads r = stub::ConvGradients(c, false, math, read(gy, kToCtb), read(x, kToCtb), read(w, kWeight), 1,
                                                c.cout, true, true, true);
        j.Write(gb, r.bias, negate);
        j.Write(gi, Permute3(r.input, {xs[2], xs[0], xs[1]}, kFromCtb), negate);
        j.Write(gw, Permute3(r.weight, {ws[2], ws[1], ws[0]}, kWeight), negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950, A3, A2: FLOAT, FLOAT16, BF16. See TbcCheck for the order of the checks.
aclnnStatus aclnnConvTbcBackwardGetWorkspaceSize(const aclTensor* self, const aclTensor* input,
                                                 const aclTensor* weight, const aclTensor* bias, int64_t pad,
                                                 int8_t cubeMathType, aclTensor* gradInput, aclTensor* gradWeight,
                                                 aclTensor* gradBias, uint64_t* workspaceSize,
                                                 aclOpExecutor** executor) {
    TbcCall e{self, input, weight, bias, pad, cubeMathType, gradInput, gradWeight, gradBias};
    return stub::PhaseOneJob(kConvTbcBackward, workspaceSize, executor, [&](Checker& c) { return TbcCheck(c, e); },
                             [&](const Checker&) { return TbcJob(e); });
}

STUB_PHASE_TWO(aclnnConvTbcBackward, kConvTbcBackward)

}  // extern "C"
