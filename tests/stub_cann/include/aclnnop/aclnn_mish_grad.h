// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// xGrad = grad * (t - (t^2 - 1) x sigmoid(x)), t = tanhxOptional if given, else tanh(softplus(x)) (the graph op
// MishGrad). ops-nn has no header nor doc of it: the real one is generated from the OpDef
// (activation/mish_grad/op_host/mish_grad_def.cpp), the inputs, then the output, in OpDef order (no attributes; the
// optional input takes the suffix Optional).
#ifndef ACLNN_MISH_GRAD_H_
#define ACLNN_MISH_GRAD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnMishGradGetWorkspaceSize(const aclTensor* grad, const aclTensor* x,
                                                    const aclTensor* tanhxOptional, const aclTensor* xGrad,
                                                    uint64_t* workspaceSize, aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnMishGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                    aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNN_MISH_GRAD_H_
