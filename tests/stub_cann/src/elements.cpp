// libopapi of the stub: tensor elements through their views (elements.h).
#include "elements.h"
#include <cstring>
#include <limits>

namespace stub {

std::string ShapeStr(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
    return r + "]";
}

int64_t Numel(const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
}

uint64_t StorageBytes(const aclTensor& t) { return static_cast<uint64_t>(Numel(t.storage)) * ElementSize(t.dtype); }

uint8_t* ElementPtr(const aclTensor& t, int64_t index) {
    return static_cast<uint8_t*>(t.data) + index * static_cast<int64_t>(ElementSize(t.dtype));
}

// An element as a double: exact, except INT64 beyond 2^53 (nearest).
double LoadDouble(const aclTensor& t, int64_t index) {
    const uint8_t* p = ElementPtr(t, index);
    switch (t.dtype) {
        case ACL_DOUBLE: return Raw<double>(p);
        case ACL_FLOAT: return Raw<float>(p);
        case ACL_FLOAT16: return HalfToFloat(Raw<uint16_t>(p));
        case ACL_BF16: return Bf16ToFloat(Raw<uint16_t>(p));
        case ACL_INT8: return Raw<int8_t>(p);
        case ACL_INT16: return Raw<int16_t>(p);
        case ACL_INT32: return Raw<int32_t>(p);
        case ACL_INT64: return static_cast<double>(Raw<int64_t>(p));
        case ACL_UINT8: return Raw<uint8_t>(p);
        case ACL_BOOL: return Raw<uint8_t>(p) != 0 ? 1.0 : 0.0;
        default: return 0.0;  // phase one admits no other dtype
    }
}

// An element cast to float32 in one rounding to nearest even (16-bit floats: exact).
float LoadFloat(const aclTensor& t, int64_t index) {
    const uint8_t* p = ElementPtr(t, index);
    switch (t.dtype) {
        case ACL_FLOAT: return Raw<float>(p);
        case ACL_FLOAT16: return HalfToFloat(Raw<uint16_t>(p));
        case ACL_BF16: return Bf16ToFloat(Raw<uint16_t>(p));
        case ACL_INT64: return static_cast<float>(Raw<int64_t>(p));
        default: return static_cast<float>(LoadDouble(t, index));
    }
}

// Rounds to nearest even (bf16: ties away from zero if asked); a DOUBLE output is exact.
void StoreFloat(const aclTensor& t, int64_t index, float v, bool ties_away) {
    uint8_t* p = ElementPtr(t, index);
    if (t.dtype == ACL_FLOAT) {
        std::memcpy(p, &v, 4);
    } else if (t.dtype == ACL_DOUBLE) {
        double d = v;
        std::memcpy(p, &d, 8);
    } else {
        uint16_t h = t.dtype == ACL_FLOAT16 ? FloatToHalf(v) : FloatToBf16(v, ties_away);
        std::memcpy(p, &h, 2);
    }
}

// v rounded to `type` (and back to float).
float RoundTo(float v, aclDataType type, bool ties_away) {
    if (type == ACL_FLOAT16) return HalfToFloat(FloatToHalf(v));
    if (type == ACL_BF16) return Bf16ToFloat(FloatToBf16(v, ties_away));
    return v;
}

int64_t LoadInt(const aclTensor& t, int64_t index) {
    const uint8_t* p = ElementPtr(t, index);
    switch (t.dtype) {
        case ACL_INT8: return Raw<int8_t>(p);
        case ACL_INT16: return Raw<int16_t>(p);
        case ACL_INT32: return Raw<int32_t>(p);
        case ACL_INT64: return Raw<int64_t>(p);
        case ACL_UINT8: return Raw<uint8_t>(p);
        case ACL_BOOL: return Raw<uint8_t>(p) != 0 ? 1 : 0;
        default: return 0;  // phase one admits no other dtype
    }
}

namespace {
template <class T>
void Saturated(uint8_t* p, int64_t v) {
    const int64_t lo = static_cast<int64_t>(std::numeric_limits<T>::min());
    const int64_t hi = static_cast<int64_t>(std::numeric_limits<T>::max());
    T x = static_cast<T>(v < lo ? lo : v > hi ? hi : v);
    std::memcpy(p, &x, sizeof(T));
}
}  // namespace

void StoreInt(const aclTensor& t, int64_t index, int64_t v) {
    uint8_t* p = ElementPtr(t, index);
    switch (t.dtype) {
        case ACL_INT8: return Saturated<int8_t>(p, v);
        case ACL_INT16: return Saturated<int16_t>(p, v);
        case ACL_INT32: return Saturated<int32_t>(p, v);
        case ACL_INT64: return Saturated<int64_t>(p, v);
        case ACL_UINT8: return Saturated<uint8_t>(p, v);
        default: return;  // phase one admits no other dtype
    }
}

// A storage element of t outside its view (-1 if the view covers the storage):
// the one after the view's last element, else the one before its first, else a gap.
int64_t OutsideView(const aclTensor& t) {
    int64_t storage = Numel(t.storage), last = t.offset;
    for (size_t i = 0; i < t.view.size(); ++i) last += (t.view[i] - 1) * t.strides[i];
    if (last + 1 < storage) return last + 1;
    if (t.offset > 0) return t.offset - 1;
    if (storage > (int64_t{1} << 26)) return -1;
    std::vector<bool> covered(static_cast<size_t>(storage), false);
    Walker w(t.view, {&t});
    for (int64_t i = Numel(t.view); i > 0; --i, w.Next()) covered[static_cast<size_t>(w.At(0))] = true;
    for (int64_t i = 0; i < storage; ++i) {
        if (!covered[static_cast<size_t>(i)]) return i;
    }
    return -1;
}

void CorruptOutside(const aclTensor& out, int64_t n) {
    int64_t at = n == 0 ? 0 : OutsideView(out);
    if (at < 0) {  // the view covers the whole storage: corrupt its last element instead
        at = out.offset;
        for (size_t i = 0; i < out.view.size(); ++i) at += (out.view[i] - 1) * out.strides[i];
    }
    uint8_t* p = ElementPtr(out, at);
    for (uint64_t b = 0; b < ElementSize(out.dtype); ++b) p[b] = static_cast<uint8_t>(~p[b]);
}

std::vector<float> ReadFloats(const aclTensor& t, const std::vector<int64_t>& shape) {
    int64_t n = Numel(shape);
    std::vector<float> v(static_cast<size_t>(n));
    Walker w(shape, {&t});
    for (int64_t i = 0; i < n; ++i, w.Next()) v[static_cast<size_t>(i)] = LoadFloat(t, w.At(0));
    return v;
}

std::vector<int64_t> ReadInts(const aclTensor& t) {
    int64_t n = Numel(t.view);
    std::vector<int64_t> v(static_cast<size_t>(n));
    Walker w(t.view, {&t});
    for (int64_t i = 0; i < n; ++i, w.Next()) v[static_cast<size_t>(i)] = LoadInt(t, w.At(0));
    return v;
}

void WriteFloats(const aclTensor& t, const std::vector<float>& v, aclDataType compute, bool negate) {
    int64_t n = Numel(t.view);
    Walker w(t.view, {&t});
    for (int64_t i = 0; i < n; ++i, w.Next()) {
        float x = v[static_cast<size_t>(i)];
        if (negate) x = -x;
        StoreFloat(t, w.At(0), compute == t.dtype ? x : RoundTo(x, compute, false), false);
    }
}

float PairwiseSum(const float* v, int64_t n, int64_t stride) {
    if (n <= 0) return 0.0f;
    if (n == 1) return v[0];
    int64_t half = n / 2;
    return PairwiseSum(v, half, stride) + PairwiseSum(v + half * stride, n - half, stride);
}

float TreeSum(const float* v, int64_t n, int64_t stride) {
    constexpr int64_t kLanes = 64;
    int64_t count = n > 0 ? (n + kLanes - 1) / kLanes : 1;
    std::vector<float> b(static_cast<size_t>(count * kLanes), 0.0f);
    for (int64_t i = 0; i < n; ++i) b[static_cast<size_t>(i)] = v[i * stride];
    auto fold = [&](int64_t into, int64_t from) {  // block `into` += block `from`, lane by lane
        for (int64_t l = 0; l < kLanes; ++l) {
            b[static_cast<size_t>(into * kLanes + l)] += b[static_cast<size_t>(from * kLanes + l)];
        }
    };
    if (count > 1 && (count & (count - 1)) != 0) {
        int64_t p = 1;
        while (p * 2 < count) p *= 2;
        for (int64_t j = 0; j < count - p; ++j) fold(j, p + j);
        count = p;
    }
    while (count > 1) {
        count /= 2;
        for (int64_t j = 0; j < count; ++j) fold(j, j + count);
    }
    for (int64_t width = kLanes / 2; width >= 1; width /= 2) {
        for (int64_t l = 0; l < width; ++l) b[static_cast<size_t>(l)] += b[static_cast<size_t>(l + width)];
    }
    return b[0];
}

Rows::Rows(const std::vector<int64_t>& shape, size_t lo, size_t hi) {
    for (size_t i = 0; i < shape.size(); ++i) (i < lo ? a1 : i < hi ? r : a0) *= shape[i];
}

}  // namespace stub
