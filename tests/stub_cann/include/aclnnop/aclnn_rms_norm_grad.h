// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// dxOut, dgammaOut of RmsNorm (rstd given). The public header is generated from the OpDef
// (norm/rms_norm_grad/op_host/rms_norm_grad_def.cpp): this prototype is its doc's (outputs const).
#ifndef ACLNN_RMS_NORM_GRAD_H_
#define ACLNN_RMS_NORM_GRAD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnRmsNormGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* x, const aclTensor* rstd,
                                                       const aclTensor* gamma, const aclTensor* dxOut,
                                                       const aclTensor* dgammaOut, uint64_t* workspaceSize,
                                                       aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnRmsNormGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNN_RMS_NORM_GRAD_H_
