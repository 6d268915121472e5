// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// out[n, target[n, h, w], h, w] = -gradOutput * weight[target[n, h, w]] (/ totalWeight for mean), else 0.
#ifndef OP_API_INC_NLL_LOSS2D_BACKWARD_H_
#define OP_API_INC_NLL_LOSS2D_BACKWARD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnNLLLoss2dBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                             const aclTensor* target, const aclTensor* weight,
                                                             int64_t reduction, int64_t ignoreIndex,
                                                             aclTensor* totalWeight, aclTensor* out,
                                                             uint64_t* workspaceSize, aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnNLLLoss2dBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                             aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // OP_API_INC_NLL_LOSS2D_BACKWARD_H_
