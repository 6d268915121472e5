// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// out = dy / (x (1 - x)) where eps <= x <= 1 - eps; else 0 (eps >= 0), NaN outside [0, 1] (eps < 0).
#ifndef OP_API_INC_LOGIT_GRAD_H_
#define OP_API_INC_LOGIT_GRAD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnLogitGradGetWorkspaceSize(const aclTensor* x, const aclTensor* dy, double eps,
                                                     const aclTensor* out, uint64_t* workspaceSize,
                                                     aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnLogitGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                     const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // OP_API_INC_LOGIT_GRAD_H_
