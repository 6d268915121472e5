// Unit test of the stub's float16/bfloat16 conversions (src/stub.h), against
// expectations derived independently: every 16-bit value, the float midway to
// its successor (a tie), and the floats one step either side of that midpoint.
//
// Build: g++ -std=c++17 -I<stub>/src -I<stub>/include -I<stub>/include/aclnn convert_test.cpp
#include <cmath>
#include <cstdio>

#include "stub.h"

namespace {

int failures = 0;

void Expect(bool ok, const char* what, unsigned in, unsigned got, unsigned want) {
    if (!ok && ++failures <= 20) std::printf("FAIL %s: input 0x%08x gave 0x%04x, want 0x%04x\n", what, in, got, want);
}

// float16 bits -> value, by the format's definition (not by bit shuffling).
double HalfValue(unsigned h) {
    unsigned e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, static_cast<int>(e) - 25);
    return (h & 0x8000) ? -v : v;
}

void HalfTests() {
    for (unsigned h = 0; h < 0x7c00; ++h) {  // every finite non-negative float16, and its negation
        for (unsigned sign : {0u, 0x8000u}) {
            unsigned a = h | sign;
            double v = HalfValue(a);
            float f = static_cast<float>(v);
            Expect(stub::FloatToHalf(f) == a, "FloatToHalf(exact)", stub::Bits(f), stub::FloatToHalf(f), a);
            Expect(stub::HalfToFloat(static_cast<uint16_t>(a)) == f, "HalfToFloat", a,
                   stub::FloatToHalf(stub::HalfToFloat(static_cast<uint16_t>(a))), a);
            // Midway to the next float16 away from zero (65520 past the largest, which rounds to inf).
            double next = h + 1 == 0x7c00 ? 65536.0 : std::fabs(HalfValue(h + 1));
            double mid = (std::fabs(v) + next) / 2;
            unsigned up = (h + 1) | sign, down = a;
            float fm = static_cast<float>(sign ? -mid : mid);  // exact: 12 significant bits
            unsigned even = (h & 1) ? up : down;
            Expect(stub::FloatToHalf(fm) == even, "FloatToHalf(tie)", stub::Bits(fm), stub::FloatToHalf(fm), even);
            float below = std::nextafter(fm, 0.0f), above = std::nextafter(fm, sign ? -INFINITY : INFINITY);
            Expect(stub::FloatToHalf(below) == down, "FloatToHalf(below tie)", stub::Bits(below),
                   stub::FloatToHalf(below), down);
            Expect(stub::FloatToHalf(above) == up, "FloatToHalf(above tie)", stub::Bits(above),
                   stub::FloatToHalf(above), up);
        }
    }
    struct Case { float in; unsigned want; } cases[] = {
        {INFINITY, 0x7c00}, {-INFINITY, 0xfc00}, {1e10f, 0x7c00}, {-1e10f, 0xfc00}, {65504.0f, 0x7bff},
        {1e-10f, 0x0000}, {-1e-10f, 0x8000}, {std::ldexp(1.0f, -25), 0x0000}, {std::ldexp(1.5f, -25), 0x0001},
        {std::ldexp(1.0f, -24), 0x0001}, {std::ldexp(1.0f, -14), 0x0400}, {1.0f / 3.0f, 0x3555}, {0.1f, 0x2e66},
    };
    for (const Case& c : cases) {
        Expect(stub::FloatToHalf(c.in) == c.want, "FloatToHalf(case)", stub::Bits(c.in), stub::FloatToHalf(c.in), c.want);
    }
    unsigned n = stub::FloatToHalf(NAN);
    Expect((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0, "FloatToHalf(NaN)", stub::Bits(NAN), n, 0x7e00);
    Expect(std::isnan(stub::HalfToFloat(0x7e00)) && std::isinf(stub::HalfToFloat(0xfc00)), "HalfToFloat(special)", 0, 0, 0);
}

void Bf16Tests() {
    for (unsigned b = 0; b < 0x7f80; ++b) {  // every finite non-negative bfloat16, and its negation
        for (unsigned sign : {0u, 0x8000u}) {
            unsigned a = b | sign, up = (b + 1) | sign;
            uint32_t bits = a << 16;
            float exact = stub::FromBits(bits), tie = stub::FromBits(bits | 0x8000u);
            float below = stub::FromBits(bits | 0x7fffu), above = stub::FromBits(bits | 0x8001u);
            unsigned even = (b & 1) ? up : a;
            for (bool away : {false, true}) {
                const char* what = away ? "FloatToBf16(away)" : "FloatToBf16(even)";
                Expect(stub::FloatToBf16(exact, away) == a, what, bits, stub::FloatToBf16(exact, away), a);
                Expect(stub::FloatToBf16(tie, away) == (away ? up : even), what, bits | 0x8000u,
                       stub::FloatToBf16(tie, away), away ? up : even);
                Expect(stub::FloatToBf16(below, away) == a, what, bits | 0x7fffu, stub::FloatToBf16(below, away), a);
                Expect(stub::FloatToBf16(above, away) == up, what, bits | 0x8001u, stub::FloatToBf16(above, away), up);
            }
            Expect(stub::Bf16ToFloat(static_cast<uint16_t>(a)) == exact, "Bf16ToFloat", a, a, a);
        }
    }
    unsigned n = stub::FloatToBf16(NAN);
    Expect((n & 0x7f80) == 0x7f80 && (n & 0x7f) != 0, "FloatToBf16(NaN)", stub::Bits(NAN), n, 0x7fc0);
    Expect(stub::FloatToBf16(INFINITY) == 0x7f80 && stub::FloatToBf16(-INFINITY, true) == 0xff80, "FloatToBf16(inf)",
           0, 0, 0);
}

}  // namespace

int main() {
    HalfTests();
    Bf16Tests();
    std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
