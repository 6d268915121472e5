// aclnn-runner: what the generated op table (ops.cpp) and the hand-written core (runner.cpp) share.
// Only public CANN declarations are used: acl/acl.h and aclnn/acl_meta.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"

namespace runner {

// The arguments of one call, in the API's order (nullptr for a null tensor).
struct CallArgs {
    std::vector<aclTensor*> tensors;
    aclTensor* tensor(size_t i) const { return tensors.at(i); }
};

// Phase one of an aclnn API (aclnnXxxGetWorkspaceSize), adapted to CallArgs by generated code.
using PhaseOne = aclnnStatus (*)(const CallArgs& args, uint64_t* workspaceSize, aclOpExecutor** executor);
// Phase two is the API's own function: aclnnXxx(workspace, workspaceSize, executor, stream).
using PhaseTwo = aclnnStatus (*)(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream);

struct OpEntry {
    const char* name;     // the aclnn API name, as in case.json's "op"
    size_t tensor_count;  // how many tensors the API takes
    PhaseOne phase_one;
    PhaseTwo phase_two;
};

// Defined in the generated ops.cpp: one entry per registered operator.
extern const OpEntry kOps[];
extern const size_t kOpCount;

}  // namespace runner
