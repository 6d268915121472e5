// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// out[i, target[i]] = -gradOutput * weight[target[i]] (/ totalWeight for mean), else 0.
#ifndef OP_API_INC_NLL_LOSS_BACKWARD_H_
#define OP_API_INC_NLL_LOSS_BACKWARD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnNLLLossBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                           const aclTensor* target, const aclTensor* weight,
                                                           int64_t reduction, int64_t ignoreIndex,
                                                           const aclTensor* totalWeight, aclTensor* out,
                                                           uint64_t* workspaceSize, aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnNLLLossBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                           aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // OP_API_INC_NLL_LOSS_BACKWARD_H_
