// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// pd_x, pd_gamma, pd_beta of instance norm over a channel-last (N, ..., C) x from the forward's per-instance variance
// and mean (the graph op InstanceNormGrad). ops-nn has no header nor doc of it: the real one is generated from the
// OpDef (norm/instance_norm_grad/op_host/instance_norm_grad_def.cpp), the inputs, then the outputs, in OpDef order
// (no attributes).
#ifndef ACLNN_INSTANCE_NORM_GRAD_H_
#define ACLNN_INSTANCE_NORM_GRAD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnInstanceNormGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* x,
                                                            const aclTensor* variance, const aclTensor* mean,
                                                            const aclTensor* gamma, const aclTensor* pd_x,
                                                            const aclTensor* pd_gamma, const aclTensor* pd_beta,
                                                            uint64_t* workspaceSize, aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnInstanceNormGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                            aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNN_INSTANCE_NORM_GRAD_H_
