// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// out = -gradOutput * (logTarget ? exp(target) : target) / N: numel(self) (mean), self's first dim (batchmean), else 1.
#ifndef OP_API_INC_KL_DIV_BACKWARD_H_
#define OP_API_INC_KL_DIV_BACKWARD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnKlDivBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                         const aclTensor* target, int64_t reduction, bool logTarget,
                                                         aclTensor* out, uint64_t* workspaceSize,
                                                         aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnKlDivBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                         aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // OP_API_INC_KL_DIV_BACKWARD_H_
