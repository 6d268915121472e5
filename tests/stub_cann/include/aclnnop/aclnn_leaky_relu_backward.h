// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// out = gradOutput where self > 0, else gradOutput * negativeSlope; selfIsResult only validates.
#ifndef OP_API_INC_LEAKY_RELU_BACKWARD_H_
#define OP_API_INC_LEAKY_RELU_BACKWARD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnLeakyReluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                             const aclScalar* negativeSlope, bool selfIsResult,
                                                             aclTensor* out, uint64_t* workspaceSize,
                                                             aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnLeakyReluBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                             aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // OP_API_INC_LEAKY_RELU_BACKWARD_H_
