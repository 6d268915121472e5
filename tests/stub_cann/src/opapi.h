// Internals of libopapi (not installed): what the operator files (ops_*.cpp) share.
//
// An operator is an OpDef (its aclnn name and host kernels) plus a phase-one check
// function. The elementwise ones, (gradOutput, x) -> out, share one executor and phase two:
//
//   phase one  PhaseOne(def, ..., dy, x, out, check): the null workspaceSize/executor and
//              device checks, then `check` (the op's rules, on a Checker, which may set the
//              compute dtype and the attributes), then an executor holding copies of the calls.
//   phase two  PhaseTwo(def, ...): the runtime checks, defects, then for each output view
//              position: load dy and x (broadcast) converted to the compute type, the kernel,
//              the rounding to the compute dtype, the cast to the output dtype.
//
// The others (softmax, losses, norms) go through PhaseOneJob: their check, then a Job (copies of
// their tensors and a float32 computation) that the same PhaseTwo runs after the runtime checks.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "aclnn/aclnn_base.h"
#include "opdev/op_errno.h"
#include "stub.h"

namespace stub {

// Attribute values an operator's kernel reads, as the kernel receives them (scalars as float32).
struct Attrs {
    float beta = 1.0f;
    float threshold = 0.0f;
    float slope = 0.0f;
    bool tanh = false;
    float alpha = 1.0f, scale = 1.0f, input_scale = 1.0f;  // EluBackward (alpha: negcoef = alpha * scale)
    bool is_result = false;
    float lo = -1.0f, hi = 1.0f;  // HardtanhBackward's min, max
    float lambd = 0.5f;           // SoftshrinkBackward's lambda
    bool relu = false;            // ThresholdBackward: |threshold| <= FLT_EPSILON runs ReluGrad (lo holds threshold)
    float outside = 0.0f;         // LogitGrad's value outside its window [lo, hi] (lo, hi as Hardtanh's)
};

// The device kernel in float32 (inputs widened exactly, result rounded by the caller), and where
// the op_api sends DOUBLE to an AI CPU kernel, that kernel in double (else nullptr).
using Kernel32 = float (*)(float dy, float x, const Attrs& a);
using Kernel64 = double (*)(double dy, double x, const Attrs& a);
// The kernel of an integer output (ThresholdBackward's INT8/INT32/...): the integer inputs exactly (LoadInt), the
// result stored saturated to the output's dtype (StoreInt); its own casts, if the device makes any, are its to model.
using KernelInt = int64_t (*)(int64_t dy, int64_t x, const Attrs& a);

struct OpDef {
    const char* api;  // "aclnnSiluBackward"
    Kernel32 kernel;
    Kernel64 kernel64;
    KernelInt kernel_int = nullptr;  // (an op whose outputs are floats only: none)
};

using DTypes = std::vector<aclDataType>;

struct Arg {
    const char* name;
    const aclTensor* t;
};

// Phase one of one call: the checks, and what the executor will need besides the tensors.
class Checker {
 public:
    explicit Checker(const OpDef& def) : def_(def), product_(stub::Product()) {}

    const std::string& product() const { return product_; }

    aclnnStatus Invalid(const std::string& why) const;  // 161002, with a message
    aclnnStatus Unsupported() const;                    // 161002: the op does not exist on this product
    aclnnStatus Null(const char* name) const;           // 161001, with a message

    aclnnStatus NotNull(std::initializer_list<Arg> args) const;
    // Each dtype is in `ok`; an empty `ok` means the op is not supported on this product.
    aclnnStatus DtypesIn(const DTypes& ok, std::initializer_list<Arg> args) const;
    aclnnStatus SameDtype(std::initializer_list<Arg> args) const;
    aclnnStatus Dims(size_t lo, size_t hi, std::initializer_list<Arg> args) const;
    aclnnStatus SameShape(std::initializer_list<Arg> args) const;
    aclnnStatus SameFormat(std::initializer_list<Arg> args) const;
    // a and b broadcast (NumPy rules) and out has the broadcast shape.
    aclnnStatus Broadcast(Arg a, Arg b, Arg out) const;
    // The scalar converts to float (aclScalar::ToFloat); the stub refuses dtypes it cannot convert.
    aclnnStatus ScalarToFloat(const char* name, const aclScalar* s, float* v) const;

    // Set by the op's check when not the defaults: the kernel's dtype (default: the output's; its
    // result is rounded to it, then cast to the output's if that differs), bf16 rounding ties away
    // from zero (CAST_ROUND), attributes.
    aclDataType compute = ACL_DT_UNDEFINED;
    bool ties_away = false;
    Attrs attrs;

 private:
    const OpDef& def_;
    std::string product_;
};

using Check = std::function<aclnnStatus(Checker&)>;

// The whole phase one: argument and device checks, `check`, an executor for (dy, x, out).
aclnnStatus PhaseOne(const OpDef& def, uint64_t* workspaceSize, aclOpExecutor** executor, const aclTensor* dy,
                     const aclTensor* x, const aclTensor* out, const Check& check);

// A call of an operator that is not elementwise (ops_softmax.cpp, ops_loss.cpp, ops_norm.cpp): copies of
// the non-null tensors it touches (the caller may destroy its own between the phases), which of them it
// writes, and its computation, run by phase two after the runtime checks (negate: the wrong-values defect).
struct Job {
    std::vector<aclTensor> tensors;
    std::vector<size_t> outputs;  // indices into tensors, in the op's order; the first is what defects corrupt
    std::function<void(const Job&, bool negate)> run;  // empty: nothing is launched (e.g. outputMask all false)

    int Add(const aclTensor* t, bool output = false);  // its index, or -1 for nullptr
    const aclTensor& T(int i) const { return tensors[static_cast<size_t>(i)]; }
    const aclTensor& First() const { return tensors[outputs.at(0)]; }
    int64_t Work() const;  // elements the outputs hold
    // Writes v (row-major over the view) into tensors[at] in its own dtype (WriteFloats); nothing for at = -1 (an
    // output the call's outputMask leaves out).
    void Write(int at, const std::vector<float>& v, bool negate) const;
};

// Phase one of such an op: the null workspaceSize/executor and device checks, `check`, then the job
// `make` builds from the checked arguments. A 1 KiB workspace if the outputs hold any element.
aclnnStatus PhaseOneJob(const OpDef& def, uint64_t* workspaceSize, aclOpExecutor** executor, const Check& check,
                        const std::function<Job(const Checker&)>& make);

aclnnStatus PhaseTwo(const OpDef& def, void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                     aclrtStream stream);

// ---- dtypes ----

inline bool IsFloating(aclDataType t) { return t == ACL_FLOAT || t == ACL_FLOAT16 || t == ACL_BF16 || t == ACL_DOUBLE; }
inline bool IsIntegral(aclDataType t) {  // bool included
    return t == ACL_INT8 || t == ACL_INT16 || t == ACL_INT32 || t == ACL_INT64 || t == ACL_UINT8 || t == ACL_BOOL;
}
inline bool In(aclDataType t, const DTypes& list) {
    for (aclDataType d : list) {
        if (d == t) return true;
    }
    return false;
}

// op::PromoteType for the real types the stub loads (floats, integers, bool); ACL_DT_UNDEFINED
// for anything else (complex included). Two different integer types give ACL_INT64, standing for
// "some integer type": no operator here accepts one.
aclDataType Promote(aclDataType a, aclDataType b);
// op::CanCast (PyTorch's canCast): no complex -> real, floating -> integral, non-bool -> bool.
bool CanCast(aclDataType from, aclDataType to);

// `product` is one of the space-separated names in `list` ("950 A3 A2").
bool OneOf(const std::string& product, const char* list);
// What an op accepts on `product`: `base` plus BF16 on the `bf16` products, `base` alone on the
// `plain` products, nothing elsewhere.
DTypes ForProduct(const std::string& product, const char* bf16, const char* plain, DTypes base);

extern const DTypes kFloats;       // FLOAT, FLOAT16, BF16
extern const DTypes kFp32Fp16;     // FLOAT, FLOAT16
extern const DTypes kSmallInts;    // INT32, INT8, UINT8
extern const DTypes kOutputTypes;  // what phase two can store: FLOAT, FLOAT16, BF16, DOUBLE

}  // namespace stub

#define RETURN_IF_FAILED(expr)                         \
    do {                                               \
        aclnnStatus status_ = (expr);                  \
        if (status_ != ACLNN_SUCCESS) return status_;  \
    } while (0)

// Defines the phase-two API function of an operator (all have the same parameters).
#define STUB_PHASE_TWO(name, def)                                                                   \
    aclnnStatus name(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream) { \
        return stub::PhaseTwo(def, workspace, workspaceSize, executor, stream);                     \
    }
