// aclnn-runner: what the generated op table (ops.cpp) and the hand-written core (runner.cpp) share.
// Only public CANN declarations are used: acl/acl.h and aclnn/acl_meta.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"

namespace runner {

// One argument of a call: a tensor, an aclScalar, a bool, a string, an int64_t, an aclIntArray, an
// aclBoolArray, a double or a float (null pointers stay nullptr).
struct Arg {
    aclTensor* tensor = nullptr;
    aclScalar* scalar = nullptr;
    bool flag = false;
    std::vector<char> text;  // NUL-terminated; the API takes char*
    int64_t integer = 0;
    aclIntArray* ints = nullptr;
    aclBoolArray* bools = nullptr;
    double f64 = 0.0;
    float f32 = 0.0f;
};

// The arguments of one call, in the API's order. Generated code reads them by position.
struct CallArgs {
    std::vector<Arg> args;
    aclTensor* tensor(size_t i) const { return args.at(i).tensor; }
    aclScalar* scalar(size_t i) const { return args.at(i).scalar; }
    bool flag(size_t i) const { return args.at(i).flag; }
    char* text(size_t i) { return args.at(i).text.empty() ? nullptr : args.at(i).text.data(); }
    int64_t integer(size_t i) const { return args.at(i).integer; }
    aclIntArray* int_array(size_t i) const { return args.at(i).ints; }
    aclBoolArray* bool_array(size_t i) const { return args.at(i).bools; }
    double float64(size_t i) const { return args.at(i).f64; }
    float float32(size_t i) const { return args.at(i).f32; }
};

// Phase one of an aclnn API (aclnnXxxGetWorkspaceSize), adapted to CallArgs by generated code.
using PhaseOne = aclnnStatus (*)(CallArgs& args, uint64_t* workspaceSize, aclOpExecutor** executor);
// Phase two is the API's own function: aclnnXxx(workspace, workspaceSize, executor, stream).
using PhaseTwo = aclnnStatus (*)(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream);

struct OpEntry {
    const char* name;     // the aclnn API name, as in case.json's "op"
    size_t param_count;   // how many arguments the API takes before workspaceSize (tensors and attributes)
    // Their kinds, one letter each: t tensor, s scalar, b bool, c string, i int64_t, l aclIntArray*,
    // m aclBoolArray*, d double, f float. A request's argument must be of that kind, or null where the API
    // takes a pointer.
    const char* kinds;
    PhaseOne phase_one;
    PhaseTwo phase_two;
};

// Defined in the generated ops.cpp: one entry per registered operator.
extern const OpEntry kOps[];
extern const size_t kOpCount;

}  // namespace runner
