// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// gradInput = gradOutput * sign(self - target) (/ numel(gradInput) for reduction mean).
#ifndef OP_API_INC_L1_LOSS_BACKWARD_H_
#define OP_API_INC_L1_LOSS_BACKWARD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnL1LossBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                          const aclTensor* target, int64_t reduction,
                                                          aclTensor* gradInput, uint64_t* workspaceSize,
                                                          aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnL1LossBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                          aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // OP_API_INC_L1_LOSS_BACKWARD_H_
