// Known-answer tests of the stub CANN toolkit, through the public API only
// (built like a harness: -I<root>/include -I<root>/include/aclnn, -lascendcl -lnnopbase -lopapi).
//
//   selftest values|strided|broadcast|status|runtime|defect|lifecycle      (the first four operators)
//   selftest next-values|next-views|next-status|next-defect                 (the next six: selftest_next.cpp)
//
// Prints one FAIL line per failed check and exits 1 if any; `defect` prints
// the output storages for the Python side to judge. Expected values are
// computed here independently (double precision formulas, hand-derived bits).
#include "aclnnop/aclnn_fast_gelu_backward.h"
#include "aclnnop/aclnn_hardsigmoid_backward.h"
#include "aclnnop/aclnn_logsigmoid_backward.h"
#include "aclnnop/aclnn_silu_backward.h"
#include "harness.h"

namespace {

using namespace selftest;

aclnnStatus Silu(const Tensor& dy, const Tensor& x, const Tensor& out) {
    return Run([&](uint64_t* ws, aclOpExecutor** e) {
        return aclnnSiluBackwardGetWorkspaceSize(dy.get(), x.get(), out.get(), ws, e); }, aclnnSiluBackward);
}
aclnnStatus FastGelu(const Tensor& dy, const Tensor& x, const Tensor& out) {
    return Run([&](uint64_t* ws, aclOpExecutor** e) {
        return aclnnFastGeluBackwardGetWorkspaceSize(dy.get(), x.get(), out.get(), ws, e); }, aclnnFastGeluBackward);
}
aclnnStatus LogSigmoid(const Tensor& dy, const Tensor& x, const Tensor& buf, const Tensor& out) {
    return Run([&](uint64_t* ws, aclOpExecutor** e) {
        return aclnnLogSigmoidBackwardGetWorkspaceSize(dy.get(), x.get(), buf.get(), out.get(), ws, e); },
        aclnnLogSigmoidBackward);
}
aclnnStatus Hardsigmoid(const Tensor& dy, const Tensor& x, const Tensor& out) {
    return Run([&](uint64_t* ws, aclOpExecutor** e) {
        return aclnnHardsigmoidBackwardGetWorkspaceSize(dy.get(), x.get(), out.get(), ws, e); }, aclnnHardsigmoidBackward);
}

// The exact derivatives, in double.
double Sig(double z) { return 1.0 / (1.0 + std::exp(-z)); }
double SiluRef(double dy, double x) { return dy * Sig(x) * (1 + x * (1 - Sig(x))); }
double FastGeluRef(double dy, double x) { return dy * Sig(1.702 * x) * (1 + 1.702 * x * (1 - Sig(1.702 * x))); }
double LogSigRef(double dy, double x) { return dy / (1.0 + std::exp(x)); }

// ---------------------------------------------------------------- scenarios

void Values() {
    const std::vector<float> xs = {0.0f, 1.0f, -1.0f, 2.5f, -4.0f, 7.75f, -0.25f, 12.0f};  // (not near FastGelu's zero at -0.7512)
    const std::vector<float> dys = {3.0f, 1.0f, -2.0f, 0.5f, 1.25f, -1.0f, 4.0f, 1.0f};
    size_t n = xs.size();
    {
        Tensor dy(ACL_FLOAT, F32(dys), {2, 4}), x(ACL_FLOAT, F32(xs), {2, 4}), out(ACL_FLOAT, F32(std::vector<float>(n)), {2, 4});
        CheckEq(Silu(dy, x, out), ACLNN_SUCCESS, "silu fp32 status");
        Check(out.F(0) == 1.5f, "silu at x=0 is dy/2");
        for (size_t i = 0; i < n; ++i) CheckNear(out.F(i), SiluRef(dys[i], xs[i]), 1e-6, "silu fp32 #" + std::to_string(i));
        CheckEq(FastGelu(dy, x, out), ACLNN_SUCCESS, "fast_gelu fp32 status");
        Check(out.F(0) == 1.5f, "fast_gelu at x=0 is dy/2");
        for (size_t i = 0; i < n; ++i) {
            CheckNear(out.F(i), FastGeluRef(dys[i], xs[i]), 1e-5, "fast_gelu fp32 #" + std::to_string(i));
        }
        Tensor buf(ACL_FLOAT, F32(std::vector<float>(n, NAN)), {2, 4});  // never read: NaN must not show
        CheckEq(LogSigmoid(dy, x, buf, out), ACLNN_SUCCESS, "log_sigmoid fp32 status");
        Check(out.F(0) == 1.5f, "log_sigmoid at x=0 is dy/2");
        for (size_t i = 0; i < n; ++i) CheckNear(out.F(i), LogSigRef(dys[i], xs[i]), 1e-6, "log_sigmoid fp32 #" + std::to_string(i));
    }
    {   // log_sigmoid: saturation and a subnormal result
        Tensor dy(ACL_FLOAT, F32({1.0f, 1.0f, 1.0f}), {3}), x(ACL_FLOAT, F32({-100.0f, 100.0f, NAN}), {3});
        Tensor buf(ACL_FLOAT, F32({0, 0, 0}), {3}), out(ACL_FLOAT, F32({0, 0, 0}), {3});
        CheckEq(LogSigmoid(dy, x, buf, out), ACLNN_SUCCESS, "log_sigmoid extremes status");
        Check(out.F(0) == 1.0f, "log_sigmoid at x=-100 is dy");
        float sub = out.F(1);  // e^-100 = 3.72e-44: 26.6 units of 2^-149
        Check(std::fpclassify(sub) == FP_SUBNORMAL && std::fabs(sub - std::exp(-100.0)) <= std::ldexp(1.0, -149),
              "log_sigmoid at x=100 is the subnormal e^-100, got " + std::to_string(Bits(sub)));
        Check(std::isnan(out.F(2)), "log_sigmoid at x=NaN is NaN");
    }
    {   // hardsigmoid: dy/6 strictly inside (-3, 3) as the device decides it, else +0
        const float almost3 = FromBits(0x403fffff);  // 2.9999998: t rounds to 1.0 on the device -> 0
        std::vector<float> x = {0.0f, 2.9f, -2.9f, 3.0f, -3.0f, 3.5f, NAN, INFINITY, -INFINITY, almost3, -almost3, 1.0f, 1.0f};
        std::vector<float> dy = {6.0f, 6.0f, 6.0f, 6.0f, 6.0f, 6.0f, 6.0f, 6.0f, 6.0f, 6.0f, 6.0f, NAN, -INFINITY};
        size_t m = x.size();
        Tensor tdy(ACL_FLOAT, F32(dy), {static_cast<int64_t>(m)}), tx(ACL_FLOAT, F32(x), {static_cast<int64_t>(m)});
        Tensor out(ACL_FLOAT, F32(std::vector<float>(m, 5.0f)), {static_cast<int64_t>(m)});
        CheckEq(Hardsigmoid(tdy, tx, out), ACLNN_SUCCESS, "hardsigmoid status");
        const float sixth = 6.0f * (1.0f / 6.0f);
        const float want[] = {sixth, sixth, sixth, 0, 0, 0, 0, 0, 0, 0, sixth};
        for (size_t i = 0; i < 11; ++i) {
            Check(Bits(out.F(i)) == Bits(want[i]), "hardsigmoid #" + std::to_string(i) + " got " + std::to_string(out.F(i)));
        }
        Check(std::isnan(out.F(11)) && out.F(12) == -INFINITY, "hardsigmoid passes NaN/inf gradOutput inside");
    }
    {   // float16 output: dy/2 at x=0 exercises ties to even among subnormals
        std::vector<uint16_t> dy = {0x0001, 0x0003, 0x0005, 0x0007, 0x8001, 0x0400, 0x7bff, 0x3c01, 0x7c00, 0x7e00};
        std::vector<uint16_t> want = {0x0000, 0x0002, 0x0002, 0x0004, 0x8000, 0x0200, 0x77ff, 0x3801, 0x7c00, 0x7e00};
        int64_t m = static_cast<int64_t>(dy.size());
        Tensor tdy(ACL_FLOAT16, U16(dy), {m}), tx(ACL_FLOAT16, U16(std::vector<uint16_t>(dy.size(), 0)), {m});
        Tensor out(ACL_FLOAT16, U16(std::vector<uint16_t>(dy.size(), 0x1234)), {m});
        CheckEq(Silu(tdy, tx, out), ACLNN_SUCCESS, "silu fp16 status");
        for (size_t i = 0; i < dy.size(); ++i) {
            uint16_t got = out.H(i);
            bool ok = i == 9 ? (got & 0x7c00) == 0x7c00 && (got & 0x3ff) != 0 : got == want[i];
            Check(ok, "silu fp16 dy/2 #" + std::to_string(i) + ": got " + std::to_string(got) + ", want " + std::to_string(want[i]));
        }
    }
    {   // bfloat16 output: the same among bfloat16 subnormals
        std::vector<uint16_t> dy = {0x0001, 0x0003, 0x8003, 0x3f81, 0x7f7f};
        std::vector<uint16_t> want = {0x0000, 0x0002, 0x8002, 0x3f01, 0x7eff};
        int64_t m = static_cast<int64_t>(dy.size());
        Tensor tdy(ACL_BF16, U16(dy), {m}), tx(ACL_BF16, U16(std::vector<uint16_t>(dy.size(), 0)), {m});
        Tensor out(ACL_BF16, U16(std::vector<uint16_t>(dy.size(), 0)), {m});
        CheckEq(LogSigmoid(tdy, tx, tx, out), ACLNN_SUCCESS, "log_sigmoid bf16 status");
        for (size_t i = 0; i < dy.size(); ++i) CheckEq(out.H(i), want[i], "log_sigmoid bf16 dy/2 #" + std::to_string(i));
    }
    {   // hardsigmoid: bf16 compute rounds ties away from zero; a promoted float32 result is cast to nearest even.
        // dy = 3 * 2^-133 (bf16 0x0003): dy/6 = 2^-134 exactly, halfway between bf16 0x0000 and 0x0001.
        Tensor dy(ACL_BF16, U16({0x0003, 0x8003}), {2}), xb(ACL_BF16, U16({0, 0}), {2}), xh(ACL_FLOAT16, U16({0, 0}), {2});
        Tensor ob(ACL_BF16, U16({0, 0}), {2}), of(ACL_FLOAT, F32({0, 0}), {2});
        CheckEq(Hardsigmoid(dy, xb, ob), ACLNN_SUCCESS, "hardsigmoid bf16 status");
        CheckEq(ob.H(0), uint16_t{0x0001}, "hardsigmoid bf16 tie rounds away");
        CheckEq(ob.H(1), uint16_t{0x8001}, "hardsigmoid bf16 negative tie rounds away");
        CheckEq(Hardsigmoid(dy, xb, of), ACLNN_SUCCESS, "hardsigmoid bf16 -> fp32 status");
        CheckEq(Bits(of.F(0)), uint32_t{0x00010000}, "hardsigmoid bf16 compute then fp32 out");
        CheckEq(Hardsigmoid(dy, xh, ob), ACLNN_SUCCESS, "hardsigmoid bf16+fp16 status");
        CheckEq(ob.H(0), uint16_t{0x0000}, "hardsigmoid promoted fp32 then bf16 to nearest even");
        // float16 inputs, float32 out: 1/6 is rounded to float16 (0x3155) before the exact widening.
        Tensor dh(ACL_FLOAT16, U16({0x3c00}), {1}), x0(ACL_FLOAT16, U16({0}), {1}), o1(ACL_FLOAT, F32({0}), {1});
        CheckEq(Hardsigmoid(dh, x0, o1), ACLNN_SUCCESS, "hardsigmoid fp16 -> fp32 status");
        Check(o1.F(0) == static_cast<float>((1 + 341 / 1024.0) / 8), "hardsigmoid fp16 compute: 1/6 as float16");
        // float32 in, float16 out: overflow to inf.
        Tensor big(ACL_FLOAT, F32({6e5f, -6e5f}), {2}), z(ACL_FLOAT, F32({0, 0}), {2}), oh(ACL_FLOAT16, U16({0, 0}), {2});
        CheckEq(Hardsigmoid(big, z, oh), ACLNN_SUCCESS, "hardsigmoid fp32 -> fp16 status");
        Check(oh.H(0) == 0x7c00 && oh.H(1) == 0xfc00, "hardsigmoid fp16 out overflows to inf");
    }
}

void Strided() {
    // Output: a (2,3) view with strides (1,2) at offset 1 of an 8-element storage (a transposed
    // slice); untouched positions keep their sentinel. Input self: (2,3) strides (4,1) offset 2 of 12.
    std::vector<float> xs(12), ds(6);
    for (int i = 0; i < 12; ++i) xs[i] = 0.25f * static_cast<float>(i) - 1.0f;
    for (int i = 0; i < 6; ++i) ds[i] = 1.0f + static_cast<float>(i);
    Tensor dy(ACL_FLOAT, F32(ds), {2, 3}), x(ACL_FLOAT, F32(xs), {2, 3}, {4, 1}, 2);
    Tensor out(ACL_FLOAT, F32(std::vector<float>(8, -7.0f)), {2, 3}, {1, 2}, 1);
    CheckEq(Silu(dy, x, out), ACLNN_SUCCESS, "strided silu status");
    std::vector<bool> written(8, false);
    for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 3; ++j) {
            size_t o = 1 + i + 2 * j;
            written[o] = true;
            CheckNear(out.F(o), SiluRef(ds[3 * i + j], xs[2 + 4 * i + j]), 1e-6, "strided silu (" + std::to_string(i) + "," + std::to_string(j) + ")");
        }
    }
    for (size_t o = 0; o < 8; ++o) {
        if (!written[o]) Check(out.F(o) == -7.0f, "strided silu left storage element " + std::to_string(o) + " untouched");
    }
    // A 0-dim tensor (FastGelu takes 0-8 dims) and an empty one (no workspace, nothing written).
    Tensor d0(ACL_FLOAT, F32({2.0f}), {}), x0(ACL_FLOAT, F32({0.0f}), {}), o0(ACL_FLOAT, F32({9.0f}), {});
    CheckEq(FastGelu(d0, x0, o0), ACLNN_SUCCESS, "0-dim fast_gelu status");
    Check(o0.F(0) == 1.0f, "0-dim fast_gelu at x=0 is dy/2");
    Tensor de(ACL_FLOAT, {}, {0, 3}), xe(ACL_FLOAT, {}, {0, 3}), oe(ACL_FLOAT, {}, {0, 3});
    uint64_t ws = 99;
    aclOpExecutor* exec = nullptr;
    CheckEq(aclnnSiluBackwardGetWorkspaceSize(de.get(), xe.get(), oe.get(), &ws, &exec), ACLNN_SUCCESS, "empty silu status");
    CheckEq(ws, uint64_t{0}, "empty silu asks no workspace");
    CheckEq(aclnnSiluBackward(nullptr, 0, exec, stream), ACLNN_SUCCESS, "empty silu runs");
    // A non-empty call asks for a workspace.
    Tensor d1(ACL_FLOAT, F32({1.0f}), {1});
    CheckEq(aclnnSiluBackwardGetWorkspaceSize(d1.get(), d1.get(), d1.get(), &ws, &exec), ACLNN_SUCCESS, "silu status");
    Check(ws > 0, "a non-empty call asks for a workspace");
    CheckEq(aclnnSiluBackward(nullptr, ws, exec, stream), ACLNN_ERR_PARAM_NULLPTR, "phase two refuses a null workspace");
}

void Broadcast() {  // run with ACLNN_STUB_SOC=Ascend950...: broadcast and mixed precision
    std::vector<float> ds = {1, 2, 3, -1, -2, -3}, xs = {-2.0f, -0.5f, 0.5f, 3.0f};
    Tensor dy(ACL_FLOAT, F32(ds), {2, 1, 3}), x(ACL_FLOAT, F32(xs), {4, 1});
    Tensor out(ACL_FLOAT, F32(std::vector<float>(24, 0)), {2, 4, 3});
    CheckEq(Silu(dy, x, out), ACLNN_SUCCESS, "broadcast silu status");
    for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 4; ++j) {
            for (int k = 0; k < 3; ++k) {
                CheckNear(out.F(12 * i + 3 * j + k), SiluRef(ds[3 * i + k], xs[j]), 1e-6, "broadcast silu");
            }
        }
    }
    Tensor wrong(ACL_FLOAT, F32(std::vector<float>(24, 0)), {4, 2, 3});
    CheckEq(Silu(dy, x, wrong), ACLNN_ERR_PARAM_INVALID, "gradInput must have the broadcast shape");
    Tensor dh(ACL_FLOAT16, U16({0x3c00, 0xc000}), {2}), xb(ACL_BF16, U16({0, 0}), {2});
    Tensor of(ACL_FLOAT, F32({0, 0}), {2}), oh(ACL_FLOAT16, U16({0, 0}), {2});
    CheckEq(Silu(dh, xb, of), ACLNN_SUCCESS, "mixed silu with float32 gradInput");
    Check(of.F(0) == 0.5f && of.F(1) == -1.0f, "mixed silu at x=0 is dy/2");
    CheckEq(Silu(dh, xb, oh), ACLNN_ERR_PARAM_INVALID, "mixed silu needs a float32 gradInput");
}

void Status() {  // phase one only; the expectations depend on the product of ACLNN_STUB_SOC
    const std::string p = Product();
    const bool a2a3 = p == "A2" || p == "A3";
    const int S = ACLNN_SUCCESS, NUL = ACLNN_ERR_PARAM_NULLPTR, BAD = ACLNN_ERR_PARAM_INVALID;
    auto f32 = [](std::vector<int64_t> shape) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return std::make_unique<Tensor>(ACL_FLOAT, F32(std::vector<float>(static_cast<size_t>(n), 0.5f)), shape);
    };
    auto of = [](aclDataType dt, std::vector<int64_t> shape, aclFormat fmt = ACL_FORMAT_ND) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return std::make_unique<Tensor>(dt, std::vector<uint8_t>(static_cast<size_t>(n) * Size(dt), 0), shape,
                                        std::vector<int64_t>{}, 0, fmt);
    };
    auto t23 = f32({2, 3}), t32 = f32({3, 2}), t0 = f32({}), t9 = f32({1, 1, 1, 1, 1, 1, 1, 1, 2});
    auto h23 = of(ACL_FLOAT16, {2, 3}), b23 = of(ACL_BF16, {2, 3}), d23 = of(ACL_DOUBLE, {2, 3});
    auto nchw = of(ACL_FLOAT, {2, 3}, ACL_FORMAT_NCHW);
    using T = const aclTensor*;
    uint64_t ws;
    aclOpExecutor* e;
    std::vector<aclOpExecutor*> made;  // phase-one successes, run at the end
    auto silu = [&](T a, T b, T c) {
        e = nullptr;
        aclnnStatus s = aclnnSiluBackwardGetWorkspaceSize(a, b, const_cast<aclTensor*>(c), &ws, &e);
        if (s == S) made.push_back(e);
        return s;
    };
    auto gelu = [&](T a, T b, T c) {
        aclnnStatus s = aclnnFastGeluBackwardGetWorkspaceSize(a, b, const_cast<aclTensor*>(c), &ws, &e);
        if (s == S) made.push_back(e);
        return s;
    };
    auto logsig = [&](T a, T b, T f, T c) {
        aclnnStatus s = aclnnLogSigmoidBackwardGetWorkspaceSize(a, b, f, const_cast<aclTensor*>(c), &ws, &e);
        if (s == S) made.push_back(e);
        return s;
    };
    auto hard = [&](T a, T b, T c) {
        aclnnStatus s = aclnnHardsigmoidBackwardGetWorkspaceSize(a, b, const_cast<aclTensor*>(c), &ws, &e);
        if (s == S) made.push_back(e);
        return s;
    };
    T f = t23->get(), h = h23->get(), b = b23->get(), d = d23->get();
    const bool silu_ok = a2a3 || p == "950" || p == "910", gelu_ok = a2a3 || p == "950";
    const std::string on = " on " + p;
    // SiluBackward
    CheckEq(silu(f, f, f), silu_ok ? S : BAD, "silu fp32" + on);
    CheckEq(silu(h, h, h), silu_ok ? S : BAD, "silu fp16" + on);
    CheckEq(silu(b, b, b), silu_ok && p != "910" ? S : BAD, "silu bf16" + on);
    CheckEq(silu(nullptr, f, f), NUL, "silu null gradOutput");
    CheckEq(silu(f, nullptr, f), NUL, "silu null self");
    CheckEq(silu(f, f, nullptr), NUL, "silu null gradInput");
    CheckEq(silu(d, d, d), BAD, "silu float64");
    CheckEq(silu(f, f, h), BAD, "silu gradInput dtype differs");
    CheckEq(silu(h, f, f), p == "950" ? S : BAD, "silu mixed inputs, float32 gradInput" + on);
    CheckEq(silu(h, b, h), BAD, "silu mixed inputs, float16 gradInput");
    CheckEq(silu(t9->get(), t9->get(), t9->get()), BAD, "silu 9 dims");
    CheckEq(silu(t0->get(), t0->get(), t0->get()), BAD, "silu 0 dims");
    CheckEq(silu(f, t32->get(), f), BAD, "silu shapes differ");
    // FastGeluBackward
    CheckEq(gelu(f, f, f), gelu_ok ? S : BAD, "fast_gelu fp32" + on);
    CheckEq(gelu(b, b, b), gelu_ok ? S : BAD, "fast_gelu bf16" + on);
    CheckEq(gelu(t0->get(), t0->get(), t0->get()), gelu_ok ? S : BAD, "fast_gelu 0 dims" + on);
    CheckEq(gelu(f, f, nullptr), NUL, "fast_gelu null gradInput");
    CheckEq(gelu(d, d, d), BAD, "fast_gelu float64");
    CheckEq(gelu(h, f, f), BAD, "fast_gelu dtypes differ");
    CheckEq(gelu(t9->get(), t9->get(), t9->get()), BAD, "fast_gelu 9 dims");
    CheckEq(gelu(f, f, t32->get()), BAD, "fast_gelu shapes differ");
    CheckEq(gelu(f, f, nchw->get()), BAD, "fast_gelu formats differ");
    // LogSigmoidBackward
    CheckEq(logsig(f, f, f, f), a2a3 ? S : BAD, "log_sigmoid fp32" + on);
    CheckEq(logsig(b, b, b, b), a2a3 ? S : BAD, "log_sigmoid bf16" + on);
    CheckEq(logsig(f, f, nullptr, f), NUL, "log_sigmoid null buffer");
    CheckEq(logsig(f, f, h, f), BAD, "log_sigmoid buffer dtype differs");
    CheckEq(logsig(f, f, t32->get(), f), BAD, "log_sigmoid buffer shape differs");
    CheckEq(logsig(t0->get(), t0->get(), t0->get(), t0->get()), BAD, "log_sigmoid 0 dims");
    CheckEq(logsig(d, d, d, d), BAD, "log_sigmoid float64");
    // HardsigmoidBackward
    CheckEq(hard(f, f, f), a2a3 ? S : BAD, "hardsigmoid fp32" + on);
    CheckEq(hard(h, b, b), a2a3 ? S : BAD, "hardsigmoid promoted inputs, any float out" + on);
    CheckEq(hard(t0->get(), t0->get(), t0->get()), a2a3 ? S : BAD, "hardsigmoid 0 dims" + on);
    CheckEq(hard(nullptr, f, f), NUL, "hardsigmoid null gradOutput");
    CheckEq(hard(f, f, d), BAD, "hardsigmoid float64 out");
    CheckEq(hard(f, t32->get(), f), BAD, "hardsigmoid shapes differ");
    CheckEq(hard(t9->get(), t9->get(), t9->get()), BAD, "hardsigmoid 9 dims");
    // Null workspaceSize / executor pointers.
    CheckEq(aclnnSiluBackwardGetWorkspaceSize(f, f, const_cast<aclTensor*>(f), nullptr, &e), NUL, "null workspaceSize");
    RunAll(made, aclnnSiluBackward);
}

void Runtime() {
    const char* soc = aclrtGetSocName();
    Check(soc != nullptr && std::string(soc) == "Ascend910B1", "default SoC is Ascend910B1");
    Check(aclGetRecentErrMsg() == nullptr, "no error message before any error");
    void* p = nullptr;
    Check(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_ERROR_INVALID_PARAM, "aclrtMalloc(0) is refused");
    const char* msg = aclGetRecentErrMsg();
    Check(msg != nullptr && std::strstr(msg, "aclrtMalloc") != nullptr, "the error message names the call");
    Check(aclGetRecentErrMsg() == nullptr, "reading the message clears it");
    Check(aclrtMalloc(&p, 16, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, "aclrtMalloc(16)");
    char host[32] = {};
    Check(aclrtMemcpy(p, 16, host, 17, ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS, "memcpy count > destMax fails");
    Check(aclrtMemcpy(p, 32, host, 32, ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS, "memcpy past the allocation fails");
    Check(aclrtMemcpy(static_cast<char*>(p) + 8, 16, host, 16, ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS,
          "memcpy from an offset past the allocation fails");
    Check(aclrtMemcpy(host, 32, p, 32, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS, "memcpy reading past the allocation fails");
    Check(aclrtMemcpy(host, 32, host + 1, 8, ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS, "memcpy to host memory as device fails");
    Check(aclrtMemcpy(p, 16, host, 0, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS, "memcpy of 0 bytes succeeds");
    Check(aclrtMemcpy(p, 16, host, 16, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS, "memcpy in bounds");
    Check(aclrtFree(host) != ACL_SUCCESS, "aclrtFree of a host pointer fails");
    Check(aclrtFree(p) == ACL_SUCCESS, "aclrtFree");
    Check(aclrtFree(p) != ACL_SUCCESS, "aclrtFree twice fails");
    aclGetRecentErrMsg();

    int64_t dims[] = {2, 3}, strides[] = {3, 1}, storage6 = 6, storage5 = 5;
    float data[6] = {};
    Check(aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, &storage5, 1, data) == nullptr,
          "aclCreateTensor refuses a view past its storage");
    Check(aclCreateTensor(dims, 2, ACL_FLOAT, strides, 1, ACL_FORMAT_ND, &storage6, 1, data) == nullptr,
          "aclCreateTensor refuses an offset view past its storage");
    Check(aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, &storage6, 1, nullptr) == nullptr,
          "aclCreateTensor refuses null data for a non-empty storage");
    Check(aclGetRecentErrMsg() != nullptr, "aclCreateTensor explains");
    float v = 1.5f;
    aclScalar* s = aclCreateScalar(&v, ACL_FLOAT);
    Check(s != nullptr && aclDestroyScalar(s) == ACLNN_SUCCESS, "aclCreateScalar / aclDestroyScalar");
    Check(aclDestroyScalar(s) == ACLNN_ERR_PARAM_INVALID, "aclDestroyScalar twice fails");
    int64_t values[] = {2, 3};
    aclIntArray* arr = aclCreateIntArray(values, 2);
    Check(arr != nullptr && aclDestroyIntArray(arr) == ACLNN_SUCCESS, "aclCreateIntArray / aclDestroyIntArray");
    Check(aclDestroyIntArray(arr) == ACLNN_ERR_PARAM_INVALID, "aclDestroyIntArray twice fails");
    Check(aclCreateIntArray(nullptr, 2) == nullptr, "aclCreateIntArray refuses null values");
    aclGetRecentErrMsg();

    // Phase two: a tensor on host memory, an undersized workspace, an executor run twice.
    aclTensor* onhost = aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, &storage6, 1, data);
    uint64_t ws;
    aclOpExecutor* e;
    CheckEq(aclnnSiluBackwardGetWorkspaceSize(onhost, onhost, onhost, &ws, &e), ACLNN_SUCCESS, "phase one on host data");
    void* w = nullptr;
    aclrtMalloc(&w, ws, ACL_MEM_MALLOC_HUGE_FIRST);
    CheckEq(aclnnSiluBackward(w, ws, e, stream), ACLNN_ERR_RUNTIME_ERROR, "phase two refuses host data");
    CheckEq(aclnnSiluBackward(w, ws, e, stream), ACLNN_ERR_PARAM_INVALID, "an executor runs once");
    aclDestroyTensor(onhost);
    {
        Tensor t(ACL_FLOAT, F32({1, 2, 3, 4, 5, 6}), {2, 3});
        CheckEq(aclnnSiluBackwardGetWorkspaceSize(t.get(), t.get(), t.get(), &ws, &e), ACLNN_SUCCESS, "phase one");
        CheckEq(aclnnSiluBackward(w, ws - 1, e, stream), ACLNN_ERR_PARAM_INVALID, "phase two refuses a small workspace");
    }
    {   // The executor holds the call: the caller may destroy its tensors before phase two.
        void* dev = nullptr;
        Check(aclrtMalloc(&dev, sizeof data, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, "aclrtMalloc");
        Check(aclrtMemcpy(dev, sizeof data, data, sizeof data, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS, "upload");
        aclTensor* a = aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, &storage6, 1, dev);
        CheckEq(aclnnSiluBackwardGetWorkspaceSize(a, a, a, &ws, &e), ACLNN_SUCCESS, "phase one in place");
        CheckEq(aclDestroyTensor(a), ACLNN_SUCCESS, "aclDestroyTensor");
        CheckEq(aclDestroyTensor(a), ACLNN_ERR_PARAM_INVALID, "aclDestroyTensor twice fails");
        CheckEq(aclnnSiluBackward(w, ws, e, stream), ACLNN_SUCCESS, "phase two after the tensors are destroyed");
        aclrtFree(dev);
    }
    aclrtFree(w);
}

void Defect() {
    // Two SiluBackward calls (dy=1, x=1): views of 4 and 3 elements at the start of 6-element
    // storages filled with 7.0. Prints each storage, "%a" per element.
    for (int64_t n : {4, 3}) {
        Tensor dy(ACL_FLOAT, F32(std::vector<float>(6, 1.0f)), {n}), x(ACL_FLOAT, F32(std::vector<float>(6, 1.0f)), {n});
        Tensor out(ACL_FLOAT, F32(std::vector<float>(6, 7.0f)), {n});
        aclnnStatus st = Silu(dy, x, out);
        std::printf("call%lld status=%d", static_cast<long long>(n), st);
        for (size_t i = 0; i < 6; ++i) std::printf(" %a", out.F(i));
        std::printf("\n");
        std::fflush(stdout);
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string what = argc > 1 ? argv[1] : "";
    const std::vector<std::pair<std::string, std::function<void()>>> scenarios = {
        {"values", Values}, {"strided", Strided}, {"broadcast", Broadcast}, {"status", Status},
        {"runtime", Runtime}, {"defect", Defect}, {"lifecycle", [] {}},
        {"next-values", NextValues}, {"next-views", NextViews}, {"next-status", NextStatus}, {"next-defect", NextDefect},
    };
    if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS || aclrtCreateStream(&stream) != ACL_SUCCESS) {
        const char* m = aclGetRecentErrMsg();
        std::printf("FAIL init: %s\n", m ? m : "(no message)");
        return 1;
    }
    bool found = false;
    for (const auto& [name, run] : scenarios) {
        if (name == what) {
            run();
            found = true;
        }
    }
    if (!found) {
        std::printf("usage: selftest values|strided|broadcast|status|runtime|defect|lifecycle|next-values|next-views|"
                    "next-status|next-defect\n");
        return 2;
    }
    aclrtDestroyStream(stream);
    aclrtResetDevice(0);
    aclFinalize();
    if (what != "defect" && what != "next-defect") std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
