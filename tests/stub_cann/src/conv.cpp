// libopapi of the stub: a convolution's gradients on the cube (conv.h).
#include "conv.h"

#include <algorithm>
#include <functional>

#include "cube.h"
#include "opapi.h"

namespace stub {

namespace {

// (taps x positions), row-major: entry t * P + p the flat position (row-major over `target`) that kernel tap t meets
// at position p, -1 where any axis has none; axis(a, j, q) gives one axis's (a position, or -1).
std::vector<int64_t> ConvTable(const ConvGeometry& c, const std::vector<int64_t>& positions,
                               const std::vector<int64_t>& target,
                               const std::function<int64_t(size_t, int64_t, int64_t)>& axis) {
    std::vector<int64_t> table{0};
    int64_t taps = 1, count = 1;
    for (size_t a = 0; a < c.kernel.size(); ++a) {
        int64_t k = c.kernel[a], m = positions[a];
        std::vector<int64_t> next(static_cast<size_t>(taps * k * count * m));
        for (int64_t t = 0; t < taps; ++t) {
            for (int64_t j = 0; j < k; ++j) {
                for (int64_t p = 0; p < count; ++p) {
                    for (int64_t q = 0; q < m; ++q) {
                        int64_t before = table[static_cast<size_t>(t * count + p)], here = axis(a, j, q);
                        next[static_cast<size_t>(((t * k + j) * count + p) * m + q)] =
                            before < 0 || here < 0 ? -1 : before * target[a] + here;
                    }
                }
            }
        }
        table.swap(next);
        taps *= k;
        count *= m;
    }
    return table;
}

// Per (tap, output position): the input position it reads.
std::vector<int64_t> ConvReads(const ConvGeometry& c) {
    return ConvTable(c, c.out, c.sizes, [&c](size_t a, int64_t j, int64_t o) {
        int64_t i = o * c.stride[a] - c.pad[a] + j * c.dilation[a];
        return i >= 0 && i < c.sizes[a] ? i : int64_t{-1};
    });
}

// Per (tap, input position): the output position whose tap reads it.
std::vector<int64_t> ConvSources(const ConvGeometry& c) {
    return ConvTable(c, c.sizes, c.out, [&c](size_t a, int64_t j, int64_t i) {
        int64_t q = i + c.pad[a] - j * c.dilation[a];
        return q >= 0 && q % c.stride[a] == 0 && q / c.stride[a] < c.out[a] ? q / c.stride[a] : int64_t{-1};
    });
}

using ConvColumn = std::function<void(int64_t g, int64_t col, float* buffer)>;

// out (G, M, C) of left (G, M, K) times R (G, K, C): each element the cube's sum (CubeDot) of its row of left and its
// column of R, which `column` gathers (K values).
std::vector<float> ConvCube(int64_t groups, int64_t m, int64_t k, int64_t cols, const std::vector<float>& left,
                            const ConvColumn& column) {
    std::vector<float> out(static_cast<size_t>(groups * m * cols));
    std::vector<float> buffer(static_cast<size_t>(std::max<int64_t>(k, 1)));
    for (int64_t g = 0; g < groups; ++g) {
        for (int64_t col = 0; col < cols; ++col) {
            column(g, col, buffer.data());
            for (int64_t i = 0; i < m; ++i) {
                const float* row = left.data() + (g * m + i) * k;
                out[static_cast<size_t>((g * m + i) * cols + col)] = CubeDot(row, buffer.data(), 1, k);
            }
        }
    }
    return out;
}

// (G, M, N x P) as (N, G x M, P): a gathered gradient in its tensor's order.
std::vector<float> ConvSampleMajor(const std::vector<float>& v, int64_t gm, int64_t n, int64_t p) {
    std::vector<float> out(v.size());
    for (int64_t r = 0; r < gm; ++r) {
        for (int64_t s = 0; s < n; ++s) {
            std::copy_n(v.begin() + (r * n + s) * p, p, out.begin() + (s * gm + r) * p);
        }
    }
    return out;
}

}  // namespace

std::vector<float> ConvWeightGrad(const ConvGeometry& c, const std::vector<float>& src, const std::vector<float>& dy) {
    int64_t cg = c.Cg(), cog = c.Cog(), taps = c.Taps(), pin = c.Pin(), pout = c.Pout(), k = c.n * pout;
    std::vector<float> left(static_cast<size_t>(c.cout * k));
    for (int64_t co = 0; co < c.cout; ++co) {
        for (int64_t s = 0; s < c.n; ++s) {
            std::copy_n(dy.begin() + (s * c.cout + co) * pout, pout, left.begin() + co * k + s * pout);
        }
    }
    std::vector<int64_t> reads = ConvReads(c);
    return ConvCube(c.groups, cog, k, cg * taps, left, [&](int64_t g, int64_t col, float* b) {
        const int64_t* at = reads.data() + (col % taps) * pout;
        for (int64_t s = 0; s < c.n; ++s) {
            const float* plane = src.data() + (s * c.cin + g * cg + col / taps) * pin;
            for (int64_t o = 0; o < pout; ++o) b[s * pout + o] = at[o] < 0 ? 0.0f : plane[at[o]];
        }
    });
}

std::vector<float> ConvInputGrad(const ConvGeometry& c, const std::vector<float>& w, const std::vector<float>& dy) {
    int64_t cg = c.Cg(), cog = c.Cog(), taps = c.Taps(), pin = c.Pin(), pout = c.Pout();
    std::vector<float> left(static_cast<size_t>(c.groups * cg * taps * cog));
    for (int64_t g = 0; g < c.groups; ++g) {
        for (int64_t ch = 0; ch < cg; ++ch) {
            for (int64_t t = 0; t < taps; ++t) {
                for (int64_t co = 0; co < cog; ++co) {
                    left[static_cast<size_t>(((g * cg + ch) * taps + t) * cog + co)] =
                        w[static_cast<size_t>(((g * cog + co) * cg + ch) * taps + t)];
                }
            }
        }
    }
    std::vector<int64_t> sources = ConvSources(c);
    auto out = ConvCube(c.groups, cg, taps * cog, c.n * pin, left, [&](int64_t g, int64_t col, float* b) {
        int64_t s = col / pin, i = col % pin;
        const float* planes = dy.data() + (s * c.cout + g * cog) * pout;
        for (int64_t t = 0; t < taps; ++t) {
            int64_t o = sources[static_cast<size_t>(t * pin + i)];
            for (int64_t co = 0; co < cog; ++co) b[t * cog + co] = o < 0 ? 0.0f : planes[co * pout + o];
        }
    });
    return ConvSampleMajor(out, c.cin, c.n, pin);
}

std::vector<float> ConvForward(const ConvGeometry& c, const std::vector<float>& w, const std::vector<float>& src) {
    int64_t cg = c.Cg(), taps = c.Taps(), pin = c.Pin(), pout = c.Pout();
    std::vector<int64_t> reads = ConvReads(c);
    auto out = ConvCube(c.groups, c.Cog(), cg * taps, c.n * pout, w, [&](int64_t g, int64_t col, float* b) {
        int64_t s = col / pout, o = col % pout;
        for (int64_t ch = 0; ch < cg; ++ch) {
            const float* plane = src.data() + (s * c.cin + g * cg + ch) * pin;
            for (int64_t t = 0; t < taps; ++t) {
                int64_t i = reads[static_cast<size_t>(t * pout + o)];
                b[ch * taps + t] = i < 0 ? 0.0f : plane[i];
            }
        }
    });
    return ConvSampleMajor(out, c.cout, c.n, pout);
}

std::vector<float> ConvBiasGrad(const std::vector<float>& dy, int64_t n, int64_t channels, int64_t p) {
    std::vector<float> left(dy.size());
    for (int64_t ch = 0; ch < channels; ++ch) {
        for (int64_t s = 0; s < n; ++s) {
            std::copy_n(dy.begin() + (s * channels + ch) * p, p, left.begin() + (ch * n + s) * p);
        }
    }
    return ConvCube(1, channels, n * p, 1, left, [&](int64_t, int64_t, float* b) { std::fill_n(b, n * p, 1.0f); });
}

ConvMath ConvMathOf(int math, aclDataType grad, aclDataType input, aclDataType weight) {
    constexpr int kAllowFp32Down = 1, kUseFp16 = 2, kUseHf32 = 3;
    ConvMath m;
    m.hf32 = (math == kAllowFp32Down || math == kUseHf32) && Promote(Promote(grad, input), weight) == ACL_FLOAT;
    m.fp16 = math == kUseFp16 && (grad != ACL_FLOAT16 || input != ACL_FLOAT16 || weight != ACL_FLOAT16);
    return m;
}

ConvGrads ConvGradients(const ConvGeometry& c, bool transposed, ConvMath math, std::vector<float> dy,
                        std::vector<float> src, std::vector<float> w, int64_t n, int64_t channels, bool input,
                        bool weight, bool bias) {
    ConvGrads r;
    if (bias) r.bias = ConvBiasGrad(dy, n, channels, static_cast<int64_t>(dy.size()) / (n * channels));
    auto to_fp16 = [](float v) { return RoundTo(v, ACL_FLOAT16, false); };
    for (std::vector<float>* v : {&dy, &src, &w}) {
        if (math.hf32) std::transform(v->begin(), v->end(), v->begin(), RoundHf32);
        if (math.fp16) std::transform(v->begin(), v->end(), v->begin(), to_fp16);
    }
    if (input) {
        r.input = transposed ? ConvForward(c, w, dy) : ConvInputGrad(c, w, dy);
        if (math.fp16) std::transform(r.input.begin(), r.input.end(), r.input.begin(), to_fp16);
    }
    if (weight) r.weight = transposed ? ConvWeightGrad(c, dy, src) : ConvWeightGrad(c, src, dy);
    return r;
}

}  // namespace stub
