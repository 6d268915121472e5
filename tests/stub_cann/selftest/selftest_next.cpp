// Known answers and statuses of the next six operators (SwishBackward, SoftplusBackward,
// HardswishBackward, LeakyReluBackward, SigmoidBackward, GeluBackwardV2), through the public API.
// Expected values are derived by hand or from double-precision formulas, never from the stub.
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "aclnnop/aclnn_gelu_backward_v2.h"
#include "aclnnop/aclnn_hardswish_backward.h"
#include "aclnnop/aclnn_leaky_relu_backward.h"
#include "aclnnop/aclnn_sigmoid_backward.h"
#include "aclnnop/aclnn_softplus_backward.h"
#include "aclnnop/aclnn_swish_backward.h"
#include "harness.h"

namespace selftest {
namespace {

using T = const aclTensor*;
using S = const aclScalar*;
constexpr aclDataType F = ACL_FLOAT;
const float kInf = INFINITY, kNaN = NAN;
const double kPi = 3.14159265358979323846;

// ---- phase one (status only) and both phases of each op, from tensors

aclnnStatus SwishOne(T a, T b, S beta, T c, uint64_t* ws, aclOpExecutor** e) {
    return aclnnSwishBackwardGetWorkspaceSize(a, b, beta, const_cast<aclTensor*>(c), ws, e);
}
aclnnStatus SoftplusOne(T a, T b, S beta, S thr, T c, uint64_t* ws, aclOpExecutor** e) {
    return aclnnSoftplusBackwardGetWorkspaceSize(a, b, beta, thr, const_cast<aclTensor*>(c), ws, e);
}
aclnnStatus HardswishOne(T a, T b, T c, uint64_t* ws, aclOpExecutor** e) {
    return aclnnHardswishBackwardGetWorkspaceSize(a, b, const_cast<aclTensor*>(c), ws, e);
}
aclnnStatus LeakyOne(T a, T b, S slope, bool is_result, T c, uint64_t* ws, aclOpExecutor** e) {
    return aclnnLeakyReluBackwardGetWorkspaceSize(a, b, slope, is_result, const_cast<aclTensor*>(c), ws, e);
}
aclnnStatus SigmoidOne(T a, T b, T c, uint64_t* ws, aclOpExecutor** e) {
    return aclnnSigmoidBackwardGetWorkspaceSize(a, b, const_cast<aclTensor*>(c), ws, e);
}
aclnnStatus GeluOne(T a, T b, const char* mode, T c, uint64_t* ws, aclOpExecutor** e) {
    std::string m = mode ? mode : "";  // the API takes a char*
    return aclnnGeluBackwardV2GetWorkspaceSize(a, b, mode ? &m[0] : nullptr, const_cast<aclTensor*>(c), ws, e);
}

aclnnStatus Swish(const Tensor& dy, const Tensor& x, S beta, const Tensor& out) {
    return Run([&](uint64_t* ws, aclOpExecutor** e) { return SwishOne(dy.get(), x.get(), beta, out.get(), ws, e); },
               aclnnSwishBackward);
}
aclnnStatus Softplus(const Tensor& dy, const Tensor& x, S beta, S thr, const Tensor& out) {
    return Run([&](uint64_t* ws, aclOpExecutor** e) { return SoftplusOne(dy.get(), x.get(), beta, thr, out.get(), ws, e); },
               aclnnSoftplusBackward);
}
aclnnStatus Hardswish(const Tensor& dy, const Tensor& x, const Tensor& out) {
    return Run([&](uint64_t* ws, aclOpExecutor** e) { return HardswishOne(dy.get(), x.get(), out.get(), ws, e); },
               aclnnHardswishBackward);
}
aclnnStatus Leaky(const Tensor& dy, const Tensor& x, S slope, const Tensor& out, bool is_result = false) {
    return Run([&](uint64_t* ws, aclOpExecutor** e) { return LeakyOne(dy.get(), x.get(), slope, is_result, out.get(), ws, e); },
               aclnnLeakyReluBackward);
}
aclnnStatus Sigmoid(const Tensor& dy, const Tensor& y, const Tensor& out) {
    return Run([&](uint64_t* ws, aclOpExecutor** e) { return SigmoidOne(dy.get(), y.get(), out.get(), ws, e); },
               aclnnSigmoidBackward);
}
aclnnStatus Gelu(const Tensor& dy, const Tensor& x, const char* mode, const Tensor& out) {
    return Run([&](uint64_t* ws, aclOpExecutor** e) { return GeluOne(dy.get(), x.get(), mode, out.get(), ws, e); },
               aclnnGeluBackwardV2);
}

// ---- exact derivatives, in double

double Sig(double z) { return 1.0 / (1.0 + std::exp(-z)); }
double SwishRef(double dy, double x, double beta) { return dy * Sig(beta * x) * (1 + beta * x * (1 - Sig(beta * x))); }
double GeluRef(double dy, double x) {
    return dy * (0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-x * x / 2) / std::sqrt(2 * kPi));
}
double GeluTanhRef(double dy, double x) {  // sigma(2u) + x sigma(2u) sigma(-2u) 2 sqrt(2/pi) (1 + 0.134145 x^2)
    double k = std::sqrt(2 / kPi), u = k * (x + 0.044715 * x * x * x);
    return dy * (Sig(2 * u) + x * Sig(2 * u) * Sig(-2 * u) * 2 * k * (1 + 0.134145 * x * x));
}

Tensor Zeros(aclDataType dt, std::vector<int64_t> view) {
    int64_t n = 1;
    for (int64_t d : view) n *= d;
    return Tensor(dt, std::vector<uint8_t>(static_cast<size_t>(n) * Size(dt), 0), view);
}

void CheckBits(float got, uint32_t want, const std::string& what) { CheckEq(Bits(got), want, what + " (bits)"); }

}  // namespace

void NextValues() {
    const int OK = ACLNN_SUCCESS;
    {   // Swish: beta nullptr = 1; x = 0 gives dy/2; +-inf give NaN (0*inf); beta from INT32 and DOUBLE scalars.
        Tensor dy(F, F32({3, 1, 1, 1, -2}), {5}), x(F, F32({0, kInf, -kInf, 0.5f, 1.25f}), {5}), out = Zeros(F, {5});
        CheckEq(Swish(dy, x, nullptr, out), OK, "swish status");
        Check(out.F(0) == 1.5f, "swish at x=0 is dy/2");
        Check(std::isnan(out.F(1)) && std::isnan(out.F(2)), "swish at +-inf is NaN");
        CheckNear(out.F(3), SwishRef(1, 0.5, 1), 2e-6, "swish beta=1 x=0.5");
        CheckNear(out.F(4), SwishRef(-2, 1.25, 1), 2e-6, "swish beta=1 x=1.25");
        Scalar two(int32_t{2}, ACL_INT32), zero(0.0, ACL_DOUBLE);
        CheckEq(Swish(dy, x, two.get(), out), OK, "swish int32 beta status");
        CheckNear(out.F(3), SwishRef(1, 0.5, 2), 2e-6, "swish beta=2 (INT32 scalar) x=0.5");
        CheckEq(Swish(dy, x, zero.get(), out), OK, "swish beta=0 status");
        Check(out.F(3) == 0.5f && out.F(4) == -1.0f, "swish beta=0 is dy/2");
        Tensor dh(ACL_FLOAT16, U16({0x3c00}), {1}), xh(ACL_FLOAT16, U16({0}), {1}), oh(ACL_FLOAT16, U16({0}), {1});
        CheckEq(Swish(dh, xh, nullptr, oh), OK, "swish fp16 status");
        CheckEq(oh.H(0), uint16_t{0x3800}, "swish fp16 dy/2");
        Tensor db(ACL_BF16, U16({0x3f80}), {1}), xb(ACL_BF16, U16({0}), {1}), ob(ACL_BF16, U16({0}), {1});
        CheckEq(Swish(db, xb, nullptr, ob), OK, "swish bf16 status");
        CheckEq(ob.H(0), uint16_t{0x3f00}, "swish bf16 dy/2");
    }
    {   // Softplus (beta 1, threshold 20): dy/2 at 0; dy above the threshold and at +inf; +-0 at -inf; NaN.
        Scalar one(1.0f, ACL_FLOAT), twenty(20.0f, ACL_FLOAT);
        Tensor dy(F, F32({3, 0.75f, 2, 1, -1, 1, 1.5f}), {7}), x(F, F32({0, 25, kInf, -kInf, -kInf, kNaN, -2}), {7});
        Tensor out = Zeros(F, {7});
        CheckEq(Softplus(dy, x, one.get(), twenty.get(), out), OK, "softplus status");
        Check(out.F(0) == 1.5f && out.F(1) == 0.75f && out.F(2) == 2.0f, "softplus dy/2 at 0, dy above threshold and at +inf");
        CheckBits(out.F(3), 0, "softplus at -inf, dy=1: +0");
        CheckBits(out.F(4), 0x80000000u, "softplus at -inf, dy=-1: -0");
        Check(std::isnan(out.F(5)), "softplus at NaN is NaN");
        CheckNear(out.F(6), 1.5 * Sig(-2), 1e-6, "softplus x=-2");
        // The branch is fl32(beta*x) > fl32(threshold), strictly: 1.1f * 1.0909091f rounds to 1.2f exactly,
        // so the device takes dy*sigma(1.2) where the exact beta*x (> 1.2) would give dy.
        Scalar b11(1.1f, ACL_FLOAT), t12(1.2f, ACL_FLOAT);
        Tensor d1(F, F32({1}), {1}), x1(F, F32({1.0909091f}), {1}), o1 = Zeros(F, {1});
        CheckEq(Softplus(d1, x1, b11.get(), t12.get(), o1), OK, "softplus trap status");
        CheckNear(o1.F(0), Sig(1.2), 1e-6, "softplus at beta*x == threshold in float32 takes the sigmoid branch");
        // Integer self (cast to FLOAT), beta from an INT64 scalar, threshold from an INT32 one.
        Scalar b2(int64_t{2}, ACL_INT64), t5(int32_t{5}, ACL_INT32);
        Tensor di(F, F32({3, 0.5f, 1}), {3}), xi(ACL_INT32, Bytes(std::vector<int32_t>{0, 3, -1}), {3}), oi = Zeros(F, {3});
        CheckEq(Softplus(di, xi, b2.get(), t5.get(), oi), OK, "softplus int32 self status");
        Check(oi.F(0) == 1.5f && oi.F(1) == 0.5f, "softplus int32 self: dy/2 at 0, dy where 2*3 > 5");
        CheckNear(oi.F(2), Sig(-2), 1e-6, "softplus int32 self, beta 2, x=-1");
        // DOUBLE is computed in float32: 1/3 becomes 0.33333334f, halved, widened back.
        Tensor dd(ACL_DOUBLE, F64({1.0 / 3}), {1}), xd(ACL_DOUBLE, F64({0}), {1}), od(ACL_DOUBLE, F64({0}), {1});
        CheckEq(Softplus(dd, xd, one.get(), twenty.get(), od), OK, "softplus double status");
        Check(od.D(0) == static_cast<double>(static_cast<float>(1.0 / 3)) / 2, "softplus double is computed in float32");
        // float16 inputs, FLOAT output: rounded to float16 first (sigma(1) = 0.7310586 -> 1497/2048), then widened.
        Tensor dh(ACL_FLOAT16, U16({0x3c00}), {1}), xh(ACL_FLOAT16, U16({0x3c00}), {1}), of = Zeros(F, {1});
        CheckEq(Softplus(dh, xh, one.get(), twenty.get(), of), OK, "softplus fp16 -> fp32 status");
        Check(of.F(0) == 1497.0f / 2048, "softplus fp16 inputs, FLOAT output: float16 precision (two roundings)");
    }
    {   // Hardswish: -dy/2 at -3, 3dy/2 at 3, +0 at -1.5 (the kernel's g = -1.5*fp32(1/3) + 0.5 is exactly 0),
        // dy at NaN and +inf, 0 at -inf and below -3, dy above 3.
        Tensor dy(F, F32(std::vector<float>(9, 2.0f)), {9}), x(F, F32({-3, 3, -1.5f, kNaN, kInf, -kInf, 4, -4, 1}), {9});
        Tensor out = Zeros(F, {9});
        CheckEq(Hardswish(dy, x, out), OK, "hardswish status");
        Check(out.F(0) == -1.0f && out.F(1) == 3.0f, "hardswish at -3 and 3");
        CheckBits(out.F(2), 0, "hardswish at -1.5 is exactly +0");
        Check(out.F(3) == 2.0f && out.F(4) == 2.0f, "hardswish at NaN and +inf is dy");
        CheckBits(out.F(5), 0, "hardswish at -inf is +0");
        Check(out.F(6) == 2.0f && Bits(out.F(7)) == 0, "hardswish above 3: dy, below -3: +0");
        CheckNear(out.F(8), 2 * (1 / 3.0 + 0.5), 1.2e-7, "hardswish at 1");
        Tensor dh(ACL_FLOAT16, U16({0x3c00, 0x3c00}), {2}), xh(ACL_FLOAT16, U16({0xbe00, 0x4200}), {2});
        Tensor oh(ACL_FLOAT16, U16({1, 1}), {2});
        CheckEq(Hardswish(dh, xh, oh), OK, "hardswish fp16 status");
        Check(oh.H(0) == 0x0000 && oh.H(1) == 0x3e00, "hardswish fp16 at -1.5 and 3");
    }
    {   // LeakyRelu: dy for x > 0 (strictly), dy*fp32(slope) for x <= 0, -0, -inf, NaN.
        Scalar slope(0.01f, ACL_FLOAT);
        Tensor dy(F, F32({2, 2, 2, -3, 2, 2, 2}), {7}), x(F, F32({1, 0, -1, -0.0f, kInf, -kInf, kNaN}), {7});
        Tensor out = Zeros(F, {7});
        CheckEq(Leaky(dy, x, slope.get(), out), OK, "leaky_relu status");
        const float want[] = {2, 2 * 0.01f, 2 * 0.01f, -3 * 0.01f, 2, 2 * 0.01f, 2 * 0.01f};
        for (size_t i = 0; i < 7; ++i) CheckBits(out.F(i), Bits(want[i]), "leaky_relu #" + std::to_string(i));
        Scalar zero(int32_t{0}, ACL_INT32), yes(uint8_t{1}, ACL_BOOL), three(int64_t{3}, ACL_INT64);
        Tensor dn(F, F32({-1}), {1}), xn(F, F32({-1}), {1}), o1 = Zeros(F, {1});
        CheckEq(Leaky(dn, xn, zero.get(), o1), OK, "leaky_relu int32 slope status");
        CheckBits(o1.F(0), 0x80000000u, "leaky_relu slope 0 (INT32), dy < 0: -0");
        CheckEq(Leaky(dn, xn, yes.get(), o1, true), OK, "leaky_relu bool slope, selfIsResult status");
        Check(o1.F(0) == -1.0f, "leaky_relu slope true (BOOL) is 1");
        CheckEq(Leaky(dn, xn, three.get(), o1), OK, "leaky_relu int64 slope status");
        Check(o1.F(0) == -3.0f, "leaky_relu slope 3 (INT64)");
        // DOUBLE promotion (AI CPU, slope as float32); FLOAT output is cast from it.
        Scalar tenth(0.1, ACL_DOUBLE);
        Tensor dd(ACL_DOUBLE, F64({1.0}), {1}), od(ACL_DOUBLE, F64({0}), {1});
        CheckEq(Leaky(dd, xn, tenth.get(), od), OK, "leaky_relu double status");
        Check(od.D(0) == static_cast<double>(0.1f), "leaky_relu double uses the float32 slope");
        CheckEq(Leaky(dd, xn, tenth.get(), o1), OK, "leaky_relu double -> float status");
        Check(o1.F(0) == 0.1f, "leaky_relu double -> float");
    }
    {   // Sigmoid: dy*y*(1-y) with y the forward output (doc example: y = 1..4 -> 0, -2, -6, -12).
        Tensor dy(F, F32({1, 1, 1, 1, -1, 1, 0, 1}), {8}), y(F, F32({1, 2, 3, 4, 1, kInf, kInf, 0.5f}), {8});
        Tensor out = Zeros(F, {8});
        CheckEq(Sigmoid(dy, y, out), OK, "sigmoid status");
        Check(out.F(0) == 0 && out.F(1) == -2 && out.F(2) == -6 && out.F(3) == -12, "sigmoid doc example");
        CheckBits(out.F(4), 0x80000000u, "sigmoid y=1, dy=-1: -0");
        Check(out.F(5) == -kInf && std::isnan(out.F(6)) && out.F(7) == 0.25f, "sigmoid at y=inf: -inf (NaN if dy=0); y=0.5");
        Tensor dd(ACL_DOUBLE, F64({1.0}), {1}), yd(ACL_DOUBLE, F64({0.1}), {1}), od(ACL_DOUBLE, F64({0}), {1});
        CheckEq(Sigmoid(dd, yd, od), OK, "sigmoid double status");
        Check(od.D(0) == (1.0 * (1.0 - 0.1)) * 0.1, "sigmoid double computed in double");
        // float16 inputs, FLOAT output: the float16 result (y = 0x34cd = 0.300048828125; 2^-13 grid), widened.
        Tensor dh(ACL_FLOAT16, U16({0x3c00}), {1}), yh(ACL_FLOAT16, U16({0x34cd}), {1}), of = Zeros(F, {1});
        CheckEq(Sigmoid(dh, yh, of), OK, "sigmoid fp16 -> fp32 status");
        double v = (1 - 0.300048828125) * 0.300048828125;
        Check(of.F(0) == static_cast<float>(std::nearbyint(v * 8192) / 8192), "sigmoid fp16 inputs: float16 precision");
    }
    {   // GeluV2 "none": dy/2 at 0, NaN at +inf (pdf*x = 0*inf); "tanh": dy/2 at 0, dy at +inf, +0 at -inf.
        Tensor dy(F, F32({3, 1, 1, 2, 2, 1}), {6}), x(F, F32({0, 1, -1, kInf, -kInf, kNaN}), {6}), out = Zeros(F, {6});
        CheckEq(Gelu(dy, x, "none", out), OK, "gelu_v2 none status");
        Check(out.F(0) == 1.5f, "gelu_v2 none at 0 is dy/2");
        CheckNear(out.F(1), GeluRef(1, 1), 1e-6, "gelu_v2 none at 1");
        CheckNear(out.F(2), GeluRef(1, -1), 1e-5, "gelu_v2 none at -1");
        Check(std::isnan(out.F(3)) && std::isnan(out.F(4)) && std::isnan(out.F(5)), "gelu_v2 none at +-inf, NaN is NaN");
        CheckEq(Gelu(dy, x, "tanh", out), OK, "gelu_v2 tanh status");
        Check(out.F(0) == 1.5f, "gelu_v2 tanh at 0 is dy/2");
        CheckNear(out.F(1), GeluTanhRef(1, 1), 1e-5, "gelu_v2 tanh at 1");
        CheckNear(out.F(2), GeluTanhRef(1, -1), 1e-5, "gelu_v2 tanh at -1");
        Check(out.F(3) == 2.0f, "gelu_v2 tanh at +inf is dy");
        CheckBits(out.F(4), 0, "gelu_v2 tanh at -inf is +0");
        Check(std::isnan(out.F(5)), "gelu_v2 tanh at NaN is NaN");
        // An INT32 gradOutput promoted with a float16 self: cast to float16, float16 result.
        Tensor di(ACL_INT32, Bytes(std::vector<int32_t>{3}), {1}), xh(ACL_FLOAT16, U16({0}), {1});
        Tensor oh(ACL_FLOAT16, U16({0}), {1});
        CheckEq(Gelu(di, xh, "none", oh), OK, "gelu_v2 int32 + fp16 status");
        CheckEq(oh.H(0), uint16_t{0x3e00}, "gelu_v2 int32 + fp16: 1.5");
    }
}

void NextViews() {
    const int OK = ACLNN_SUCCESS;
    {   // LeakyRelu: gradOutput (2,1) broadcast against a transposed self view (2,3) strides (1,2);
        // out a (2,3) view with strides (4,1) at offset 1 of 9 elements: the rest keeps its sentinel.
        Scalar slope(0.5f, ACL_FLOAT);
        Tensor dy(F, F32({2, -4}), {2, 1}), x(F, F32({1, -1, -2, 2, 3, -3}), {2, 3}, {1, 2});
        Tensor out(F, F32(std::vector<float>(9, -7.0f)), {2, 3}, {4, 1}, 1);
        CheckEq(Leaky(dy, x, slope.get(), out), OK, "strided broadcast leaky_relu status");
        std::vector<bool> written(9, false);
        for (int i = 0; i < 2; ++i) {
            for (int j = 0; j < 3; ++j) {
                float d = i == 0 ? 2.0f : -4.0f, xv = std::vector<float>{1, -1, -2, 2, 3, -3}[i + 2 * j];
                size_t o = static_cast<size_t>(1 + 4 * i + j);
                written[o] = true;
                Check(out.F(o) == (xv > 0 ? d : d * 0.5f), "strided leaky_relu (" + std::to_string(i) + "," + std::to_string(j) + ")");
            }
        }
        for (size_t o = 0; o < 9; ++o) {
            if (!written[o]) Check(out.F(o) == -7.0f, "strided leaky_relu left element " + std::to_string(o) + " untouched");
        }
    }
    {   // Sigmoid and GeluV2 broadcast: (3,1) with (2,) -> (3,2); (2,1,3) with (4,1) -> (2,4,3).
        Tensor dy(F, F32({1, 2, 3}), {3, 1}), y(F, F32({2, 3}), {2}), out = Zeros(F, {3, 2});
        CheckEq(Sigmoid(dy, y, out), OK, "broadcast sigmoid status");
        for (int i = 0; i < 3; ++i) {
            Check(out.F(2 * i) == -2.0f * (i + 1) && out.F(2 * i + 1) == -6.0f * (i + 1), "broadcast sigmoid row " + std::to_string(i));
        }
        Tensor wrong = Zeros(F, {2, 3});
        CheckEq(Sigmoid(dy, y, wrong), ACLNN_ERR_PARAM_INVALID, "sigmoid gradInput must have the broadcast shape");
        std::vector<float> ds = {1, 2, 3, -1, -2, -3}, xs = {0, 1, -1, 0.5f};
        Tensor gd(F, F32(ds), {2, 1, 3}), gx(F, F32(xs), {4, 1}), go = Zeros(F, {2, 4, 3});
        CheckEq(Gelu(gd, gx, "none", go), OK, "broadcast gelu_v2 status");
        for (int i = 0; i < 2; ++i) {
            for (int j = 0; j < 4; ++j) {
                for (int k = 0; k < 3; ++k) {
                    CheckNear(go.F(12 * i + 3 * j + k), GeluRef(ds[3 * i + k], xs[j]), 1e-5, "broadcast gelu_v2");
                }
            }
        }
    }
    {   // Swish with a strided self (every other element, offset 1); Softplus on empty tensors; Sigmoid 0-dim.
        Tensor dy(F, F32({1, 1, 1}), {3}), x(F, F32({9, 0, 9, 1, 9, -1}), {3}, {2}, 1), out = Zeros(F, {3});
        CheckEq(Swish(dy, x, nullptr, out), OK, "strided swish status");
        Check(out.F(0) == 0.5f, "strided swish reads the view");
        CheckNear(out.F(1), SwishRef(1, 1, 1), 2e-6, "strided swish x=1");
        CheckNear(out.F(2), SwishRef(1, -1, 1), 2e-6, "strided swish x=-1");
        Scalar one(1.0f, ACL_FLOAT);
        Tensor e1(F, {}, {0, 3}), e2(F, {}, {0, 3}), e3(F, {}, {0, 3});
        uint64_t ws = 99;
        aclOpExecutor* exec = nullptr;
        CheckEq(SoftplusOne(e1.get(), e2.get(), one.get(), one.get(), e3.get(), &ws, &exec), OK, "empty softplus status");
        CheckEq(ws, uint64_t{0}, "empty softplus asks no workspace");
        CheckEq(aclnnSoftplusBackward(nullptr, 0, exec, stream), OK, "empty softplus runs");
        Tensor d0(F, F32({4}), {}), y0(F, F32({0.5f}), {}), o0 = Zeros(F, {});
        CheckEq(Sigmoid(d0, y0, o0), OK, "0-dim sigmoid status");
        Check(o0.F(0) == 1.0f, "0-dim sigmoid");
    }
}

void NextStatus() {  // phase one only; expectations by the product of ACLNN_STUB_SOC
    const std::string p = Product();
    const int OK = ACLNN_SUCCESS, NUL = ACLNN_ERR_PARAM_NULLPTR, BAD = ACLNN_ERR_PARAM_INVALID;
    const bool five = p == "950" || p == "A3" || p == "A2" || p == "910" || p == "310P";
    const bool four = five && p != "310P", bf16 = p == "950" || p == "A3" || p == "A2";
    auto want = [&](bool ok) { return ok ? OK : BAD; };
    auto t23 = Zeros(F, {2, 3}), t32 = Zeros(F, {3, 2}), t3 = Zeros(F, {3}), t0 = Zeros(F, {});
    auto t9 = Zeros(F, {1, 1, 1, 1, 1, 1, 1, 1, 2}), t03 = Zeros(F, {0, 3});
    auto h23 = Zeros(ACL_FLOAT16, {2, 3}), b23 = Zeros(ACL_BF16, {2, 3}), d23 = Zeros(ACL_DOUBLE, {2, 3});
    auto i23 = Zeros(ACL_INT32, {2, 3}), u23 = Zeros(ACL_UINT16, {2, 3}), c23 = Zeros(ACL_COMPLEX64, {2, 3});
    T f = t23.get(), h = h23.get(), b = b23.get(), d = d23.get(), i = i23.get(), r = t32.get(), z = t0.get(), n = t9.get();
    Scalar sf(1.0f, ACL_FLOAT), si(int32_t{1}, ACL_INT32), sb(uint8_t{1}, ACL_BOOL), sneg(-0.5f, ACL_FLOAT);
    Scalar sbf(uint16_t{0x3f80}, ACL_BF16), sc(std::array<float, 2>{1, 0}, ACL_COMPLEX64);
    uint64_t ws;
    aclOpExecutor* e;
    std::vector<aclOpExecutor*> made;  // phase-one successes, run at the end (executors are freed by phase two)
    auto got = [&](aclnnStatus s) {
        if (s == OK) made.push_back(e);
        return s;
    };
    const std::string on = " on " + p;
    auto swish = [&](T a, T x, S beta, T c) { return got(SwishOne(a, x, beta, c, &ws, &e)); };
    CheckEq(swish(f, f, nullptr, f), want(five), "swish fp32" + on);
    CheckEq(swish(h, h, sf.get(), h), want(five), "swish fp16" + on);
    CheckEq(swish(b, b, si.get(), b), want(bf16), "swish bf16, INT32 beta" + on);
    CheckEq(swish(nullptr, f, nullptr, f), NUL, "swish null gradOutput");
    CheckEq(swish(f, f, nullptr, nullptr), NUL, "swish null gradInput");
    CheckEq(swish(d, d, nullptr, d), BAD, "swish float64");
    CheckEq(swish(f, f, nullptr, h), BAD, "swish gradInput dtype differs");
    CheckEq(swish(h, f, nullptr, f), BAD, "swish gradOutput dtype differs");
    CheckEq(swish(f, f, sc.get(), f), BAD, "swish complex beta");
    CheckEq(swish(f, r, nullptr, f), BAD, "swish shapes differ");
    CheckEq(swish(n, n, nullptr, n), BAD, "swish 9 dims");
    CheckEq(swish(z, z, sb.get(), z), want(five), "swish 0 dims, BOOL beta" + on);
    auto softplus = [&](T a, T x, S beta, S thr, T c) { return got(SoftplusOne(a, x, beta, thr, c, &ws, &e)); };
    CheckEq(softplus(f, f, sf.get(), sf.get(), f), want(four), "softplus fp32" + on);
    CheckEq(softplus(d, d, sf.get(), si.get(), d), want(four), "softplus float64" + on);
    CheckEq(softplus(b, b, sf.get(), sf.get(), b), want(bf16), "softplus bf16" + on);
    CheckEq(softplus(h, f, sf.get(), sf.get(), d), want(four), "softplus no dtype equality" + on);
    CheckEq(softplus(f, i, sf.get(), sf.get(), f), want(four), "softplus INT32 self" + on);
    CheckEq(softplus(f, u23.get(), sf.get(), sf.get(), f), BAD, "softplus UINT16 self");
    CheckEq(softplus(i, f, sf.get(), sf.get(), f), BAD, "softplus INT32 gradOutput");
    CheckEq(softplus(f, f, nullptr, sf.get(), f), NUL, "softplus null beta (the real one dereferences it)");
    CheckEq(softplus(f, f, sf.get(), nullptr, f), NUL, "softplus null threshold");
    CheckEq(softplus(f, nullptr, sf.get(), sf.get(), f), NUL, "softplus null self");
    CheckEq(softplus(f, f, sc.get(), sf.get(), f), BAD, "softplus complex beta (stub: no conversion)");
    CheckEq(softplus(f, r, sf.get(), sf.get(), f), BAD, "softplus shapes differ");
    CheckEq(softplus(n, n, sf.get(), sf.get(), n), BAD, "softplus 9 dims");
    auto hswish = [&](T a, T x, T c) { return got(HardswishOne(a, x, c, &ws, &e)); };
    CheckEq(hswish(f, f, f), want(four), "hardswish fp32" + on);
    CheckEq(hswish(h, h, h), want(four), "hardswish fp16" + on);
    CheckEq(hswish(b, b, b), want(bf16), "hardswish bf16" + on);
    CheckEq(hswish(z, z, z), want(four), "hardswish 0 dims" + on);
    CheckEq(hswish(f, f, nullptr), NUL, "hardswish null out");
    CheckEq(hswish(d, d, d), BAD, "hardswish float64");
    CheckEq(hswish(h, f, f), BAD, "hardswish gradOutput dtype differs");
    CheckEq(hswish(f, f, h), BAD, "hardswish out dtype differs");
    CheckEq(hswish(f, r, f), BAD, "hardswish shapes differ");
    CheckEq(hswish(n, n, n), BAD, "hardswish 9 dims");
    auto leaky = [&](T a, T x, S s, bool res, T c) { return got(LeakyOne(a, x, s, res, c, &ws, &e)); };
    CheckEq(leaky(f, f, sf.get(), false, f), want(five), "leaky_relu fp32" + on);
    CheckEq(leaky(d, d, si.get(), false, d), want(five), "leaky_relu float64, INT32 slope" + on);
    CheckEq(leaky(f, d, sf.get(), false, h), want(five), "leaky_relu promoted DOUBLE cast to out" + on);
    CheckEq(leaky(b, b, sf.get(), false, b), want(bf16), "leaky_relu bf16" + on);
    CheckEq(leaky(h, b, sf.get(), false, f), want(bf16), "leaky_relu fp16 + bf16" + on);
    CheckEq(leaky(f, f, sbf.get(), false, f), want(bf16), "leaky_relu BF16 slope" + on);
    CheckEq(leaky(f, f, sc.get(), false, f), BAD, "leaky_relu complex slope");
    CheckEq(leaky(f, f, nullptr, false, f), NUL, "leaky_relu null slope");
    CheckEq(leaky(f, f, sf.get(), false, nullptr), NUL, "leaky_relu null out");
    CheckEq(leaky(f, f, sneg.get(), true, f), BAD, "leaky_relu selfIsResult with a negative slope");
    CheckEq(leaky(f, f, sneg.get(), false, f), want(five), "leaky_relu negative slope, not selfIsResult" + on);
    CheckEq(leaky(f, f, sf.get(), true, f), want(five), "leaky_relu selfIsResult, slope 1" + on);
    CheckEq(leaky(f, f, sf.get(), false, i), BAD, "leaky_relu INT32 out");
    CheckEq(leaky(i, i, sf.get(), false, f), BAD, "leaky_relu INT32 inputs");
    CheckEq(leaky(f, t3.get(), sf.get(), false, f), want(five), "leaky_relu broadcast" + on);
    CheckEq(leaky(f, t3.get(), sf.get(), false, r), BAD, "leaky_relu out not the broadcast shape");
    CheckEq(leaky(f, r, sf.get(), false, f), BAD, "leaky_relu shapes do not broadcast");
    CheckEq(leaky(n, n, sf.get(), false, n), BAD, "leaky_relu 9 dims");
    auto sigmoid = [&](T a, T y, T c) { return got(SigmoidOne(a, y, c, &ws, &e)); };
    CheckEq(sigmoid(f, f, f), want(five), "sigmoid fp32" + on);
    CheckEq(sigmoid(d, d, d), want(five), "sigmoid float64" + on);
    CheckEq(sigmoid(b, b, b), want(bf16), "sigmoid bf16 gradOutput" + on);
    CheckEq(sigmoid(h, b, b), want(five), "sigmoid bf16 output, fp16 gradOutput (only gradOutput is checked)" + on);
    CheckEq(sigmoid(f, f, h), want(five), "sigmoid cast to a narrower gradInput" + on);
    CheckEq(sigmoid(c23.get(), c23.get(), c23.get()), BAD, "sigmoid complex (the stub refuses it)");
    CheckEq(sigmoid(i, i, f), BAD, "sigmoid INT32");
    CheckEq(sigmoid(f, nullptr, f), NUL, "sigmoid null output");
    CheckEq(sigmoid(f, t3.get(), f), want(five), "sigmoid broadcast" + on);
    CheckEq(sigmoid(f, r, f), BAD, "sigmoid shapes do not broadcast");
    CheckEq(sigmoid(z, z, z), want(five), "sigmoid 0 dims" + on);
    CheckEq(sigmoid(n, n, n), BAD, "sigmoid 9 dims");
    auto gelu = [&](T a, T x, const char* m, T c) { return got(GeluOne(a, x, m, c, &ws, &e)); };
    CheckEq(gelu(f, f, "none", f), want(five), "gelu_v2 fp32 none" + on);
    CheckEq(gelu(h, h, "tanh", h), want(five), "gelu_v2 fp16 tanh" + on);
    CheckEq(gelu(b, b, "none", b), want(bf16), "gelu_v2 bf16" + on);
    CheckEq(gelu(h, b, "none", f), want(five), "gelu_v2 fp16 + bf16 -> FLOAT" + on);
    CheckEq(gelu(h, f, "none", h), BAD, "gelu_v2 gradInput not the promoted dtype");
    CheckEq(gelu(d, d, "none", d), BAD, "gelu_v2 float64");
    CheckEq(gelu(i, i, "none", i), BAD, "gelu_v2 INT32 + INT32");
    CheckEq(gelu(i, h, "none", h), want(five), "gelu_v2 INT32 + fp16" + on);
    CheckEq(gelu(f, f, "exact", f), BAD, "gelu_v2 approximate \"exact\"");
    CheckEq(gelu(f, f, nullptr, f), NUL, "gelu_v2 approximate nullptr");
    CheckEq(gelu(f, f, "none", nullptr), NUL, "gelu_v2 null gradInput");
    CheckEq(gelu(n, n, "tanh", n), want(five), "gelu_v2 9 dims (no dims check)" + on);
    CheckEq(gelu(t03.get(), t3.get(), "none", t03.get()), want(five), "gelu_v2 empty broadcast" + on);
    CheckEq(gelu(f, r, "none", f), BAD, "gelu_v2 shapes do not broadcast");
    RunAll(made, aclnnGeluBackwardV2);  // any op's phase two runs any executor
}

void NextDefect() {
    // Each op once: a 4-element view at the start of a 6-element FLOAT storage of 7.0; prints
    // "<api> status=<st>" and the storage ("%a" per element).
    Scalar one(1.0f, ACL_FLOAT), twenty(20.0f, ACL_FLOAT), slope(0.01f, ACL_FLOAT);
    auto show = [](const char* api, aclnnStatus st, const Tensor& out) {
        std::printf("%s status=%d", api, st);
        for (size_t i = 0; i < 6; ++i) std::printf(" %a", out.F(i));
        std::printf("\n");
        std::fflush(stdout);
    };
    Tensor dy(F, F32({1, 2, 3, 4, 1, 1}), {4}), x(F, F32({0.5f, -0.5f, 0.25f, -2, 0, 0}), {4});
    auto out = [] { return Tensor(F, F32(std::vector<float>(6, 7.0f)), {4}); };
    { Tensor o = out(); show("aclnnSwishBackward", Swish(dy, x, nullptr, o), o); }
    { Tensor o = out(); show("aclnnSoftplusBackward", Softplus(dy, x, one.get(), twenty.get(), o), o); }
    { Tensor o = out(); show("aclnnHardswishBackward", Hardswish(dy, x, o), o); }
    { Tensor o = out(); show("aclnnLeakyReluBackward", Leaky(dy, x, slope.get(), o), o); }
    { Tensor o = out(); show("aclnnSigmoidBackward", Sigmoid(dy, x, o), o); }
    { Tensor o = out(); show("aclnnGeluBackwardV2", Gelu(dy, x, "tanh", o), o); }
}

}  // namespace selftest
