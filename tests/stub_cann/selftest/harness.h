// Helpers shared by the selftest programs: checks, device tensors and scalars, running both phases.
// Everything goes through the public API (built like a harness against the installed toolkit).
#pragma once

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "opdev/op_errno.h"

namespace selftest {

inline int failures = 0;

inline void Check(bool ok, const std::string& what) {
    if (!ok) {
        ++failures;
        std::printf("FAIL %s\n", what.c_str());
    }
}

template <class T>
void CheckEq(T got, T want, const std::string& what) {
    Check(got == want, what + ": got " + std::to_string(got) + ", want " + std::to_string(want));
}

inline uint32_t Bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float FromBits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// `want` within `rel` relative error (or both NaN, or equal).
inline void CheckNear(float got, double want, double rel, const std::string& what) {
    bool ok = (std::isnan(got) && std::isnan(want)) || got == want || std::fabs(got - want) <= rel * std::fabs(want);
    char buf[160];
    std::snprintf(buf, sizeof buf, ": got %.9g (0x%08x), want %.9g", got, Bits(got), want);
    Check(ok, what + buf);
}

// Host bytes of a vector of any element type.
template <class T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
    std::vector<uint8_t> b(v.size() * sizeof(T));
    if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
    return b;
}
inline std::vector<uint8_t> F32(const std::vector<float>& v) { return Bytes(v); }
inline std::vector<uint8_t> U16(const std::vector<uint16_t>& v) { return Bytes(v); }
inline std::vector<uint8_t> F64(const std::vector<double>& v) { return Bytes(v); }

inline uint64_t Size(aclDataType t) {
    switch (t) {
        case ACL_INT8: case ACL_UINT8: case ACL_BOOL: return 1;
        case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: case ACL_UINT16: return 2;
        case ACL_FLOAT: case ACL_INT32: return 4;
        default: return 8;  // DOUBLE, INT64, COMPLEX64
    }
}

inline std::vector<int64_t> Packed(const std::vector<int64_t>& view) {
    std::vector<int64_t> s(view.size(), 1);
    for (size_t i = view.size(); i-- > 1;) s[i - 1] = s[i] * view[i];
    return s;
}

// A device tensor: its storage uploaded from `host`, seen through a view.
class Tensor {
 public:
    Tensor(aclDataType dt, const std::vector<uint8_t>& host, std::vector<int64_t> view,
           std::vector<int64_t> strides = {}, int64_t offset = 0, aclFormat format = ACL_FORMAT_ND)
        : dt_(dt), bytes_(host.size()) {
        if (strides.empty()) strides = Packed(view);
        if (bytes_ > 0) {
            Check(aclrtMalloc(&dev_, bytes_, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, "aclrtMalloc");
            Check(aclrtMemcpy(dev_, bytes_, host.data(), bytes_, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS, "upload");
        }
        int64_t storage = static_cast<int64_t>(bytes_ / Size(dt));
        t_ = aclCreateTensor(view.data(), view.size(), dt, strides.data(), offset, format, &storage, 1, dev_);
        Check(t_ != nullptr, "aclCreateTensor");
    }
    ~Tensor() {
        aclDestroyTensor(t_);
        if (dev_ != nullptr) aclrtFree(dev_);
    }
    Tensor(const Tensor&) = delete;
    Tensor& operator=(const Tensor&) = delete;

    aclTensor* get() const { return t_; }
    std::vector<uint8_t> Download() const {
        std::vector<uint8_t> host(bytes_);
        if (bytes_ > 0) {
            Check(aclrtMemcpy(host.data(), bytes_, dev_, bytes_, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS, "download");
        }
        return host;
    }
    template <class T>
    T At(size_t i) const { T v; std::memcpy(&v, Download().data() + sizeof(T) * i, sizeof(T)); return v; }
    float F(size_t i) const { return At<float>(i); }
    uint16_t H(size_t i) const { return At<uint16_t>(i); }
    double D(size_t i) const { return At<double>(i); }

 private:
    aclDataType dt_;
    size_t bytes_;
    void* dev_ = nullptr;
    aclTensor* t_ = nullptr;
};

inline aclrtStream stream = nullptr;

using PhaseOne = std::function<aclnnStatus(uint64_t*, aclOpExecutor**)>;
using PhaseTwo = aclnnStatus (*)(void*, uint64_t, aclOpExecutor*, aclrtStream);

// Both phases as a harness runs them; the first non-zero status.
inline aclnnStatus Run(const PhaseOne& one, PhaseTwo two) {
    uint64_t ws = 0;
    aclOpExecutor* exec = nullptr;
    aclnnStatus st = one(&ws, &exec);
    if (st != ACLNN_SUCCESS) return st;
    void* w = nullptr;
    if (ws > 0 && aclrtMalloc(&w, ws, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return -1;
    st = two(w, ws, exec, stream);
    if (st == ACLNN_SUCCESS) st = aclrtSynchronizeStream(stream);
    if (w != nullptr) aclrtFree(w);
    return st;
}

// Consumes executors from phase-one successes with `two` (executors are freed by phase two).
inline void RunAll(const std::vector<aclOpExecutor*>& executors, PhaseTwo two) {
    void* w = nullptr;
    if (aclrtMalloc(&w, 4096, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return;
    for (aclOpExecutor* e : executors) CheckEq(two(w, 4096, e, stream), ACLNN_SUCCESS, "phase two of a phase-one success");
    aclrtFree(w);
}

// An aclScalar holding a copy of `value` as `dt`.
class Scalar {
 public:
    template <class T>
    Scalar(T value, aclDataType dt) : s_(aclCreateScalar(&value, dt)) { Check(s_ != nullptr, "aclCreateScalar"); }
    ~Scalar() { aclDestroyScalar(s_); }
    Scalar(const Scalar&) = delete;
    Scalar& operator=(const Scalar&) = delete;
    aclScalar* get() const { return s_; }

 private:
    aclScalar* s_;
};

// This test's own reading of the documented SoC -> product mapping (README.md).
inline std::string Product() {
    std::string soc = aclrtGetSocName();
    if (soc.rfind("Ascend950", 0) == 0) return "950";
    if (soc.rfind("Ascend910_93", 0) == 0) return "A3";
    if (soc.rfind("Ascend910B", 0) == 0) return "A2";
    if (soc.rfind("Ascend910", 0) == 0) return "910";
    if (soc.rfind("Ascend310P", 0) == 0) return "310P";
    return "other";
}

// Scenarios of the next six operators (selftest_next.cpp).
void NextValues();
void NextViews();
void NextStatus();
void NextDefect();

}  // namespace selftest
