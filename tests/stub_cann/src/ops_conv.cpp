// libopapi of the stub: aclnnConvolutionBackward (hicann/ops-nn conv/convolution_backward op_api: gradInput by
// Conv{2,3}DBackpropInput, gradWeight by Conv{2,3}DBackpropFilter*2Fp32, both on the cube, gradBias by ReduceSum).
//
// Phase one: the statuses of aclnn-cli's contract for the op (aclnn_cli/ops/convolution/convolution_backward.py, after
// convolution_backward_checker.cpp's CheckParams), in its order: gradOutput, input, weight null, then biasSizes,
// stride, padding, dilation, outputPadding, outputMask null: 161001; then 161002 for each tensor's dtype outside the
// product's list (950, A3, A2: FLOAT, FLOAT16, BF16), each tensor outside 1-5 dims, the attribute rule
// (ConvCheckAttributes) and the shape rule (ConvCheckShapes). Beyond the contract, the stub refuses (161002) a weight
// whose first dim groups does not divide (the source's CheckConvChannelAndGroup) and, where the contract leaves the
// size rule out (outputPadding of 4 values; transposed with a padding of 4), a gradOutput of another batch than
// input's: its kernel computes convolutions only.
//
// Phase two: each gradient lowered to matrix products on the cube (conv.h), each element rounded once to its output's
// dtype. Transposed, the convolution whose input gradient the forward is (input gradOutput's shape, output input's):
// gradInput its forward, gradWeight its filter gradient with input and gradOutput exchanged. cubeMathType 1 or 3
// with operands promoted to FLOAT: every operand value of the cube gradients as HFLOAT32 (RoundHf32). 2 (USE_FP16)
// with an operand that is not FLOAT16: the op_api's InputPreProcess casts gradOutput, input and weight to FLOAT16
// (to nearest) after gradBias has read gradOutput, and gradInput leaves the cube as FLOAT16 (Conv*BackpropInputFp162Fp16)
// before the cast to its dtype; gradWeight leaves it as FLOAT (Conv*BackpropFilterFp162Fp32).
#include <algorithm>
#include <string>
#include <vector>

#include "aclnnop/aclnn_convolution_backward.h"
#include "conv.h"
#include "cube.h"
#include "elements.h"
#include "opapi.h"

namespace {

using stub::Checker;
using stub::ConvGeometry;

const stub::OpDef kConvBackward{"aclnnConvolutionBackward", nullptr, nullptr};

constexpr int64_t kConvMaxGroups = 65535;

struct ConvCall {
    const aclTensor *grad, *input, *weight;
    const aclIntArray *bias_sizes, *stride, *padding, *dilation;
    bool transposed;
    const aclIntArray* output_padding;
    int64_t groups;
    const aclBoolArray* mask;
    int math;
    const aclTensor *grad_input, *grad_weight, *grad_bias;
};

const char* const kConvOutputs[3] = {"gradInput", "gradWeight", "gradBias"};

int64_t ConvFloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// The padding before and after each of `sp` axes: sp values (both sides alike) or, in 2-D, 4 (up, down, left, right:
// convolution_backward_checker.h kPadding4UpIdx ... kPadding4RightIdx).
std::vector<std::pair<int64_t, int64_t>> ConvSides(const std::vector<int64_t>& v, size_t sp) {
    std::vector<std::pair<int64_t, int64_t>> sides;
    for (size_t a = 0; a < sp; ++a) {
        sides.emplace_back(v.size() == sp ? v[a] : v[2 * a], v.size() == sp ? v[a] : v[2 * a + 1]);
    }
    return sides;
}

// gradOutput's spatial sizes for input x and weight w: the forward's, or (transposed) the transposed convolution's.
std::vector<int64_t> ConvWantSizes(const ConvCall& e, const std::vector<int64_t>& x, const std::vector<int64_t>& w) {
    size_t sp = x.size() - 2;
    auto sides = ConvSides(e.padding->values, sp);
    std::vector<int64_t> want;
    for (size_t a = 0; a < sp; ++a) {
        int64_t n = x[a + 2], k = w[a + 2], s = e.stride->values[a], d = e.dilation->values[a];
        int64_t both = sides[a].first + sides[a].second;
        want.push_back(e.transposed ? (n - 1) * s - both + d * (k - 1) + e.output_padding->values[a] + 1
                                    : ConvFloorDiv(n + both - d * (k - 1) - 1, s) + 1);
    }
    return want;
}

// The contract's attribute_rule: outputMask of 3, stride and dilation >= 1, padding >= 0, outputPadding 0 unless
// transposed (then each below its stride), groups in [1, 65535], cubeMathType 0-3.
aclnnStatus ConvCheckAttributes(const Checker& c, const ConvCall& e) {
    if (e.mask->values.size() != 3) return c.Invalid("outputMask takes 3 values (gradInput, gradWeight, gradBias)");
    const std::pair<const char*, const aclIntArray*> floors[] = {
        {"stride", e.stride}, {"dilation", e.dilation}, {"padding", e.padding}};
    for (const auto& f : floors) {
        int64_t low = f.second == e.padding ? 0 : 1;
        for (int64_t v : f.second->values) {
            if (v < low) return c.Invalid(std::string(f.first) + ": each value must be >= " + std::to_string(low));
        }
    }
    const std::vector<int64_t>& op = e.output_padding->values;
    const std::vector<int64_t>& s = e.stride->values;
    for (size_t i = 0; i < op.size(); ++i) {
        if (!e.transposed && op[i] != 0) return c.Invalid("outputPadding: every value 0 when transposed is false");
        if (e.transposed && i < s.size() && (op[i] < 0 || op[i] >= s[i])) {
            return c.Invalid("outputPadding: each in [0, stride)");
        }
    }
    if (e.groups < 1 || e.groups > kConvMaxGroups) return c.Invalid("groups must be in [1, 65535]");
    if (e.math < 0 || e.math > 3) return c.Invalid("cubeMathType must be 0, 1, 2 or 3");
    return ACLNN_SUCCESS;
}

// The contract's shape_rule, in its order.
aclnnStatus ConvCheckShapes(const Checker& c, const ConvCall& e) {
    const aclTensor* outs[3] = {e.grad_input, e.grad_weight, e.grad_bias};
    const aclTensor* of[3] = {e.input, e.weight, e.grad};
    for (size_t k = 0; k < 3; ++k) {
        if (e.mask->values[k] && outs[k] == nullptr) {
            return c.Invalid(std::string(kConvOutputs[k]) + " is a null pointer while outputMask[" + std::to_string(k) +
                             "] is true");
        }
    }
    for (size_t k = 0; k < 3; ++k) {
        if (outs[k] != nullptr && outs[k]->dtype != of[k]->dtype) {
            return c.Invalid(std::string(kConvOutputs[k]) + "'s dtype is not its input's");
        }
    }
    const std::vector<int64_t> &x = e.input->view, &w = e.weight->view, &g = e.grad->view;
    if (x.size() < 3 || x.size() > 5) return c.Invalid("input takes 3 (NCL), 4 (NCHW) or 5 (NCDHW) dims");
    size_t sp = x.size() - 2;
    auto fits = [sp](const aclIntArray* a, bool four) {
        return a->values.size() == sp || (four && sp == 2 && a->values.size() == 4);
    };
    if (!fits(e.stride, false) || !fits(e.dilation, false)) return c.Invalid("stride, dilation: a value per axis");
    if (!fits(e.padding, true) || !fits(e.output_padding, true)) return c.Invalid("padding, outputPadding: per axis");
    if (g.size() != x.size() || w.size() != x.size()) return c.Invalid("gradOutput, input and weight differ in rank");
    if (stub::Numel(g) == 0 || stub::Numel(w) == 0) return c.Invalid("gradOutput or weight is empty");
    if (e.grad_input != nullptr && e.grad_input->view != x) return c.Invalid("gradInput's shape is not input's");
    if (e.grad_weight != nullptr && e.grad_weight->view != w) return c.Invalid("gradWeight's shape is not weight's");
    if (e.grad_bias != nullptr && e.grad_bias->view != std::vector<int64_t>{g[1]}) {
        return c.Invalid("gradBias's shape is not (gradOutput's C,)");
    }
    const std::vector<int64_t>& inner = e.transposed ? g : x;
    const std::vector<int64_t>& outer = e.transposed ? x : g;
    if (outer[1] != w[0]) return c.Invalid("channels: not weight's first dim");
    if (w[1] == 0 || inner[1] % w[1] != 0 || inner[1] / w[1] != e.groups) {
        return c.Invalid("channels: not groups x weight's second dim");
    }
    if (e.output_padding->values.size() == sp && !(e.transposed && e.padding->values.size() != sp)) {
        std::vector<int64_t> want = ConvWantSizes(e, x, w);
        if (*std::min_element(want.begin(), want.end()) < 1) {
            return c.Invalid("the dilated kernel spans more than the padded input");
        }
        if (std::vector<int64_t>(g.begin() + 2, g.end()) != want || g[0] != x[0]) {
            return c.Invalid("gradOutput is not the forward's size");
        }
    }
    return ACLNN_SUCCESS;
}

aclnnStatus ConvCheck(const Checker& c, const ConvCall& e) {
    RETURN_IF_FAILED(c.NotNull({{"gradOutput", e.grad}, {"input", e.input}, {"weight", e.weight}}));
    const std::pair<const char*, const void*> lists[] = {{"biasSizes", e.bias_sizes}, {"stride", e.stride},
        {"padding", e.padding}, {"dilation", e.dilation}, {"outputPadding", e.output_padding}, {"outputMask", e.mask}};
    for (const auto& l : lists) {
        if (l.second == nullptr) return c.Null(l.first);
    }
    stub::DTypes ok = stub::ForProduct(c.product(), "950 A3 A2", "", stub::kFp32Fp16);
    std::vector<stub::Arg> live;
    for (stub::Arg a : {stub::Arg{"gradOutput", e.grad}, stub::Arg{"input", e.input}, stub::Arg{"weight", e.weight},
                        stub::Arg{"gradInput", e.grad_input}, stub::Arg{"gradWeight", e.grad_weight},
                        stub::Arg{"gradBias", e.grad_bias}}) {
        if (a.t != nullptr) live.push_back(a);
    }
    for (const stub::Arg& a : live) RETURN_IF_FAILED(c.DtypesIn(ok, {a}));
    for (const stub::Arg& a : live) RETURN_IF_FAILED(c.Dims(1, 5, {a}));
    RETURN_IF_FAILED(ConvCheckAttributes(c, e));
    RETURN_IF_FAILED(ConvCheckShapes(c, e));
    if (e.weight->view[0] % e.groups != 0) return c.Invalid("weight's first dim is not divisible by groups");
    if (e.grad->view[0] != e.input->view[0]) return c.Invalid("gradOutput's batch is not input's");
    return ACLNN_SUCCESS;
}

// The call's convolution; transposed, the one whose input gradient the forward is (input gradOutput's shape, output
// input's). The near side's padding places the taps (the far side's is in the sizes).
ConvGeometry ConvOf(const ConvCall& e) {
    const std::vector<int64_t> &x = e.input->view, &w = e.weight->view, &g = e.grad->view;
    const std::vector<int64_t>& inner = e.transposed ? g : x;
    const std::vector<int64_t>& outer = e.transposed ? x : g;
    ConvGeometry c;
    c.n = x[0], c.cin = inner[1], c.cout = w[0], c.groups = e.groups;
    c.sizes.assign(inner.begin() + 2, inner.end());
    c.out.assign(outer.begin() + 2, outer.end());
    c.kernel.assign(w.begin() + 2, w.end());
    c.stride = e.stride->values;
    c.dilation = e.dilation->values;
    for (const auto& side : ConvSides(e.padding->values, c.kernel.size())) c.pad.push_back(side.first);
    return c;
}

stub::Job ConvJob(const ConvCall& e) {
    stub::Job job;
    int gy = job.Add(e.grad), x = job.Add(e.input), w = job.Add(e.weight);
    const std::vector<bool>& mask = e.mask->values;
    int gi = mask[0] ? job.Add(e.grad_input, true) : -1;
    int gw = mask[1] ? job.Add(e.grad_weight, true) : -1;
    int gb = mask[2] ? job.Add(e.grad_bias, true) : -1;
    if (job.outputs.empty()) return job;  // nothing asked: nothing launched
    ConvGeometry c = ConvOf(e);
    bool transposed = e.transposed;
    stub::ConvMath math = stub::ConvMathOf(e.math, e.grad->dtype, e.input->dtype, e.weight->dtype);
    job.run = [=](const stub::Job& j, bool negate) {
        auto read = [&j](int at) { return stub::ReadFloats(j.T(at), j.T(at).view); };
        const std::vector<int64_t>& gshape = j.T(gy).view;
        stub::ConvGrads r = stub::ConvGradients(c, transposed, math, read(gy), read(x), read(w), gshape[0], gshape[1],
                                                gi >= 0, gw >= 0, gb >= 0);
        j.Write(gb, r.bias, negate);
        j.Write(gi, r.input, negate);
        j.Write(gw, r.weight, negate);
    };
    return job;
}

}  // namespace

extern "C" {

// 950, A3, A2: FLOAT, FLOAT16, BF16. See ConvCheck for the order of the checks.
aclnnStatus aclnnConvolutionBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* input, const aclTensor* weight, const aclIntArray* biasSizes,
    const aclIntArray* stride, const aclIntArray* padding, const aclIntArray* dilation, bool transposed,
    const aclIntArray* outputPadding, int groups, const aclBoolArray* outputMask, int8_t cubeMathType,
    aclTensor* gradInput, aclTensor* gradWeight, aclTensor* gradBias, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
    ConvCall e{gradOutput, input, weight, biasSizes, stride, padding, dilation, transposed, outputPadding, groups,
               outputMask, cubeMathType, gradInput, gradWeight, gradBias};
    return stub::PhaseOneJob(kConvBackward, workspaceSize, executor, [&](Checker& c) { return ConvCheck(c, e); },
                             [&](const Checker&) { return ConvJob(e); });
}

STUB_PHASE_TWO(aclnnConvolutionBackward, kConvBackward)

}  // extern "C"
