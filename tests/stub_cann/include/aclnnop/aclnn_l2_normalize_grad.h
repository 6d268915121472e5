// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// dx = (dy - y * sum(y * dy, dim)) / max(sqrt(sum(x^2, dim)), eps). The API CANN generates from the OpDef of the
// graph-only op L2NormalizeGrad (ops-nn norm/l2_normalize_grad/op_host/l2_normalize_grad_def.cpp: inputs x, y, dy;
// attributes dim (ListInt, optional), eps (Float); output dx): ops-nn publishes no header or doc of it.
#ifndef ACLNN_L2_NORMALIZE_GRAD_H_
#define ACLNN_L2_NORMALIZE_GRAD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnL2NormalizeGradGetWorkspaceSize(const aclTensor* x, const aclTensor* y,
                                                           const aclTensor* dy, const aclIntArray* dimOptional,
                                                           double eps, const aclTensor* dx, uint64_t* workspaceSize,
                                                           aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnL2NormalizeGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                           const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNN_L2_NORMALIZE_GRAD_H_
