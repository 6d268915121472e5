// Internals shared by the three stub libraries (not installed: no consumer sees this).
//
//   libascendcl  runtime.cpp  init/device/stream/memory on host memory, error messages, env config
//   libnnopbase  meta.cpp     aclTensor / aclScalar / aclIntArray / aclBoolArray
//   libopapi     opapi.cpp    phase one helpers, executors, phase two, defects (opapi.h)
//                ops_*.cpp    the operators by family: checks, float32 kernels, the API
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"

// The libraries build with -fvisibility=hidden; these are their only non-API exports.
#define STUB_INTERNAL __attribute__((visibility("default")))

// What aclCreateTensor records. Dims, strides and offset count elements.
struct aclTensor {
    std::vector<int64_t> view;
    std::vector<int64_t> strides;
    int64_t offset = 0;
    aclFormat format = ACL_FORMAT_ND;
    std::vector<int64_t> storage;
    aclDataType dtype = ACL_FLOAT;
    void* data = nullptr;
};

// A copy of the value aclCreateScalar was given, in its dtype.
struct aclScalar {
    aclDataType dtype = ACL_FLOAT;
    std::vector<uint8_t> bytes;
};

struct aclIntArray {
    std::vector<int64_t> values;
};

struct aclBoolArray {
    std::vector<bool> values;
};

namespace stub {

// ---- runtime state (libascendcl) ----

// Appends a message to this thread's pending errors (read by aclGetRecentErrMsg).
STUB_INTERNAL void ReportError(const std::string& msg);
// aclInit was called (and not finalized) and a device is set.
STUB_INTERNAL bool DeviceReady();
// [p, p + bytes) lies inside one live aclrtMalloc allocation.
STUB_INTERNAL bool IsDeviceRange(const void* p, uint64_t bytes);
// A live stream from aclrtCreateStream, or nullptr (the default stream).
STUB_INTERNAL bool IsStream(aclrtStream stream);
// Makes the next aclrtSynchronizeStream on `stream` block forever (the "hang" defect).
STUB_INTERNAL void HangStream(aclrtStream stream);
// Makes every later aclrtSynchronizeStream on `stream` fail with an AI Core exception (the "sync-error" defect).
STUB_INTERNAL void FaultStream(aclrtStream stream);

// "950", "A3", "A2", "910", "310P" or "other", from aclrtGetSocName() (see README.md).
STUB_INTERNAL std::string Product();

enum class DefectKind { kNone, kWrongValues, kWriteOutside, kCrash, kHang, kSyncError };
struct Defect {
    DefectKind kind = DefectKind::kNone;
    std::string op;      // ACLNN_STUB_DEFECT_OP: only this aclnn API ("" = all)
    int64_t numel = -1;  // ACLNN_STUB_DEFECT_NUMEL: only calls whose output view has this many elements
    std::string error;   // why the env vars are invalid ("" = valid)
};
// The defect configuration from the environment (read once per process).
STUB_INTERNAL const Defect& DefectConfig();

// ---- dtypes ----

inline uint64_t ElementSize(aclDataType t) {
    switch (t) {
        case ACL_INT8: case ACL_UINT8: case ACL_BOOL: case ACL_HIFLOAT8:
        case ACL_FLOAT8_E5M2: case ACL_FLOAT8_E4M3FN: case ACL_FLOAT8_E8M0:
            return 1;
        case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: case ACL_UINT16:
            return 2;
        case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: case ACL_COMPLEX32:
            return 4;
        case ACL_INT64: case ACL_UINT64: case ACL_DOUBLE: case ACL_COMPLEX64:
            return 8;
        case ACL_COMPLEX128:
            return 16;
        default:
            return 0;  // not a whole number of bytes, or not a tensor type: the stub refuses it
    }
}

inline std::string DTypeName(aclDataType t) {
    switch (t) {
        case ACL_FLOAT: return "FLOAT";
        case ACL_FLOAT16: return "FLOAT16";
        case ACL_BF16: return "BFLOAT16";
        case ACL_DOUBLE: return "DOUBLE";
        case ACL_INT8: return "INT8";
        case ACL_INT16: return "INT16";
        case ACL_INT32: return "INT32";
        case ACL_INT64: return "INT64";
        case ACL_UINT8: return "UINT8";
        case ACL_BOOL: return "BOOL";
        case ACL_COMPLEX64: return "COMPLEX64";
        case ACL_COMPLEX128: return "COMPLEX128";
        default: return "dtype " + std::to_string(static_cast<int>(t));
    }
}

// ---- float16 / bfloat16 <-> float32 ----

inline uint32_t Bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float FromBits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline float HalfToFloat(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return FromBits(sign | 0x7f800000u | (man << 13));  // inf, NaN
    if (exp != 0) return FromBits(sign | ((exp + 112) << 23) | (man << 13));
    // zero or subnormal: man * 2^-24, exact in float
    float v = static_cast<float>(man) * FromBits(0x33800000u);
    return sign ? -v : v;
}

// Round to nearest, ties to even; subnormal results, overflow to inf, NaN stays NaN (quiet).
inline uint16_t FloatToHalf(float f) {
    uint32_t x = Bits(f);
    uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((ax >> 13) & 0x3ffu);
    if (ax >= 0x47800000u) return sign | 0x7c00u;  // >= 65536 (inf included)
    if (ax < 0x38800000u) {                          // below 2^-14: a float16 subnormal (or zero)
        uint32_t e = ax >> 23;
        if (e < 102) return sign;                    // below 2^-25
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;                    // value = m * 2^(e-150) = (m >> shift) units of 2^-24
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) ++q;
        return sign | static_cast<uint16_t>(q);
    }
    uint32_t r = ax - 0x38000000u;                   // rebias the exponent 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);                  // ties to even (carries into exp / inf as needed)
    return sign | static_cast<uint16_t>(r >> 13);
}

inline float Bf16ToFloat(uint16_t b) { return FromBits(static_cast<uint32_t>(b) << 16); }

// Round to nearest, ties to even (the default cast) or ties away from zero (CAST_ROUND).
inline uint16_t FloatToBf16(float f, bool ties_away = false) {
    uint32_t x = Bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    uint32_t add = ties_away ? 0x8000u : 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>((x + add) >> 16);
}

}  // namespace stub

namespace stub {

// ---- scalars ----

template <class R>
R Raw(const void* p) {
    R v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// aclScalar::ToFloat / ToDouble: the value converted to T in one step (round to nearest even);
// false for a dtype the stub has no conversion for (complex, 8-bit floats, strings).
template <class T>
bool ScalarAs(const aclScalar& s, T* v) {
    const void* p = s.bytes.data();
    switch (s.dtype) {
        case ACL_FLOAT: *v = static_cast<T>(Raw<float>(p)); return true;
        case ACL_DOUBLE: *v = static_cast<T>(Raw<double>(p)); return true;
        case ACL_FLOAT16: *v = static_cast<T>(HalfToFloat(Raw<uint16_t>(p))); return true;
        case ACL_BF16: *v = static_cast<T>(Bf16ToFloat(Raw<uint16_t>(p))); return true;
        case ACL_INT8: *v = static_cast<T>(Raw<int8_t>(p)); return true;
        case ACL_INT16: *v = static_cast<T>(Raw<int16_t>(p)); return true;
        case ACL_INT32: *v = static_cast<T>(Raw<int32_t>(p)); return true;
        case ACL_INT64: *v = static_cast<T>(Raw<int64_t>(p)); return true;
        case ACL_UINT8: *v = static_cast<T>(Raw<uint8_t>(p)); return true;
        case ACL_UINT16: *v = static_cast<T>(Raw<uint16_t>(p)); return true;
        case ACL_UINT32: *v = static_cast<T>(Raw<uint32_t>(p)); return true;
        case ACL_UINT64: *v = static_cast<T>(Raw<uint64_t>(p)); return true;
        case ACL_BOOL: *v = Raw<uint8_t>(p) != 0 ? T(1) : T(0); return true;
        default: return false;
    }
}

}  // namespace stub
