// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// y = (grad * x1 - sum(grad * x1, axes) * x1) * x2. The API CANN generates from the OpDef of the graph-only op
// SoftmaxGradExt (ops-nn activation/softmax_grad_ext/op_host/softmax_grad_ext_def.cpp: inputs grad, x1, x2;
// attributes axes (Int), keep_dims (Bool); output y): ops-nn publishes no header or doc of it.
#ifndef ACLNN_SOFTMAX_GRAD_EXT_H_
#define ACLNN_SOFTMAX_GRAD_EXT_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnSoftmaxGradExtGetWorkspaceSize(const aclTensor* grad, const aclTensor* x1,
                                                          const aclTensor* x2, int64_t axes, bool keepDims,
                                                          const aclTensor* y, uint64_t* workspaceSize,
                                                          aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnSoftmaxGradExt(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                          const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNN_SOFTMAX_GRAD_EXT_H_
