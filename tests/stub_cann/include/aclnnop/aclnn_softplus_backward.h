// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// gradInput = gradOutput * sigmoid(beta self), or gradOutput where beta self > threshold.
#ifndef OP_API_INC_SOFTPLUS_BACKWARD_H_
#define OP_API_INC_SOFTPLUS_BACKWARD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnSoftplusBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                            const aclScalar* beta, const aclScalar* threshold,
                                                            aclTensor* gradInput, uint64_t* workspaceSize,
                                                            aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnSoftplusBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                            aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // OP_API_INC_SOFTPLUS_BACKWARD_H_
