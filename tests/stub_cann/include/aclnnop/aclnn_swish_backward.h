// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// gradInput = gradOutput * s * (1 + beta self (1 - s)), s = sigmoid(beta self); betaOptional nullptr: beta = 1.
#ifndef OP_API_INC_LEVEL2_ACLNN_SWISH_BACKWARD_H_
#define OP_API_INC_LEVEL2_ACLNN_SWISH_BACKWARD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnSwishBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                         const aclScalar* betaOptional, aclTensor* gradInput,
                                                         uint64_t* workspaceSize, aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnSwishBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                         aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // OP_API_INC_LEVEL2_ACLNN_SWISH_BACKWARD_H_
