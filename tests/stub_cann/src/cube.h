// Internals of libopapi (not installed): the 950's cube, as its batch matmul kernel drives it
// (aclnn_cli/ops/contraction/cube.py), for every cube op of the stub (ops_matmul.cpp, ops_conv.cpp).
#pragma once

#include <cstdint>

namespace stub {

// One output element's float32 accumulation over K: steps of 16 values of K (an mmad step), each step's products
// summed in double and rounded once to float32, the steps added in K order into L0C; K past 8192 in splitKRound
// rounds of CeilAlign(ceil(K / rounds), 8), each accumulated on its own, added in order. `a` is read with stride 1,
// `b` with stride `bs`; every product is formed (an inf meeting a 0 gives NaN, as on the cube).
float CubeDot(const float* a, const float* b, int64_t bs, int64_t k);

// A float32 operand as HFLOAT32 (cubeMathType 1 or 3): 11 significant bits, rounded to nearest even (the device's
// rounding is not published; truncation would stay inside the same allowance). inf and NaN unchanged.
float RoundHf32(float v);

}  // namespace stub
