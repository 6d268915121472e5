// libopapi of the stub: the cube's float32 accumulation (cube.h).
#include "cube.h"

#include <algorithm>

#include "stub.h"

namespace stub {

namespace {

constexpr int64_t kCubeStep = 16;      // values of K per mmad step
constexpr int64_t kCubeSplitK = 8192;  // FP32_SPLIT_K_THRESHOLD
constexpr int64_t kCubeAlign = 8;      // a round's K aligned to 8

}  // namespace

float CubeDot(const float* a, const float* b, int64_t bs, int64_t k) {
    int64_t rounds = k > kCubeSplitK ? (k + kCubeSplitK - 1) / kCubeSplitK : 1;
    int64_t size = rounds == 1 ? k : ((k + rounds - 1) / rounds + kCubeAlign - 1) / kCubeAlign * kCubeAlign;
    float out = 0.0f;
    for (int64_t r0 = 0; r0 < k; r0 += size) {
        int64_t r1 = std::min(k, r0 + size);
        float acc = 0.0f;
        for (int64_t s = r0; s < r1; s += kCubeStep) {
            double step = 0.0;
            for (int64_t i = s; i < std::min(r1, s + kCubeStep); ++i) step += static_cast<double>(a[i]) * b[i * bs];
            acc += static_cast<float>(step);
        }
        out = r0 == 0 ? acc : out + acc;
    }
    return out;
}

float RoundHf32(float v) {
    uint32_t x = Bits(v);
    if ((x & 0x7f800000u) == 0x7f800000u) return v;  // inf, NaN
    x += 0xfffu + ((x >> 13) & 1u);                  // 13 of the 23 stored bits dropped, ties to even
    return FromBits(x & ~0x1fffu);
}

}  // namespace stub
