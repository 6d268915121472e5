// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// gradInput = ((gradOut - sumDy / count) - (input - mean) * invstd^2 * sumDyXmu / count) * invstd * weight, the
// per-channel tensors read along axis 1, count the sum of counter's elements.
#ifndef OP_API_INC_BATCH_NORM_ELEMT_BACKWARD_H_
#define OP_API_INC_BATCH_NORM_ELEMT_BACKWARD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnBatchNormElemtBackwardGetWorkspaceSize(const aclTensor* gradOut, const aclTensor* input,
                                                                  const aclTensor* mean, const aclTensor* invstd,
                                                                  const aclTensor* weight, const aclTensor* sumDy,
                                                                  const aclTensor* sumDyXmu, aclTensor* counter,
                                                                  aclTensor* gradInput, uint64_t* workspaceSize,
                                                                  aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnBatchNormElemtBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                  const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // OP_API_INC_BATCH_NORM_ELEMT_BACKWARD_H_
