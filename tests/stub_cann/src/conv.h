// Internals of libopapi (not installed): a convolution's gradients lowered to matrix products on the cube (cube.h), in
// the order aclnn_cli/ops/convolution/conv_lowering.py writes the device's down (ops_conv.cpp calls them). Tensors are
// row-major float32 vectors; every element is a CubeDot over its whole K, the padding's zeros included (an inf or NaN
// meets them as on the cube).
#pragma once

#include <cstdint>
#include <vector>

#include "elements.h"

namespace stub {

// A convolution: input (N, cin, sizes), output (N, cout, out), weight (cout, cin / groups, kernel). Along each axis,
// output position o's tap j reads input position o * stride - pad + j * dilation (outside [0, size): the padding, a
// zero).
struct ConvGeometry {
    int64_t n = 0, cin = 0, cout = 0, groups = 1;
    std::vector<int64_t> sizes, out, kernel, stride, pad, dilation;
    int64_t Cg() const { return cin / groups; }
    int64_t Cog() const { return cout / groups; }
    int64_t Taps() const { return Numel(kernel); }
    int64_t Pin() const { return Numel(sizes); }
    int64_t Pout() const { return Numel(out); }
};


// gradWeight (cout, cg, taps) of src (N, cin, Pin) and dy (N, cout, Pout): K = (sample, output position).
std::vector<float> ConvWeightGrad(const ConvGeometry& c, const std::vector<float>& src, const std::vector<float>& dy);
// gradInput (N, cin, Pin) of w (cout, cg, taps) and dy (N, cout, Pout): K = (tap, output channel of the group).
std::vector<float> ConvInputGrad(const ConvGeometry& c, const std::vector<float>& w, const std::vector<float>& dy);
// The forward (N, cout, Pout) of w (cout, cg, taps) and src (N, cin, Pin): K = (input channel of the group, tap).
std::vector<float> ConvForward(const ConvGeometry& c, const std::vector<float>& w, const std::vector<float>& src);
// gradBias (channels) of dy (N, channels, P): K = (sample, position), against ones.
std::vector<float> ConvBiasGrad(const std::vector<float>& dy, int64_t n, int64_t channels, int64_t p);

// cubeMathType's roundings of the cube gradients' operands: 1 or 3 with operands promoted to FLOAT, every operand
// value as HFLOAT32; 2 (USE_FP16) with an operand that is not FLOAT16, every operand cast to FLOAT16 (the op_api's
// InputPreProcess) and gradInput leaving the cube as FLOAT16.
struct ConvMath {
    bool hf32 = false, fp16 = false;
};
ConvMath ConvMathOf(int math, aclDataType grad, aclDataType input, aclDataType weight);

struct ConvGrads {
    std::vector<float> input, weight, bias;  // (empty where not asked)
};
// The gradients asked of convolution c (transposed: the one whose input gradient the forward is) from dy (n, channels,
// P), src and w, as ConvolutionBackward computes them: gradBias from dy as it is, then the operands rounded as `math`
// says for gradInput (transposed: the forward) and gradWeight (transposed: src and dy exchanged).
ConvGrads ConvGradients(const ConvGeometry& c, bool transposed, ConvMath math, std::vector<float> dy,
                        std::vector<float> src, std::vector<float> w, int64_t n, int64_t channels, bool input,
                        bool weight, bool bias);

}  // namespace stub
