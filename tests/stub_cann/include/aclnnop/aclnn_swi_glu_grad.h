// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// out of SwiGlu's backward: x = [A, B] split in halves along dim, out = [out_A, out_B]. The public header is
// generated from the OpDef (activation/swi_glu_grad/op_host/swi_glu_grad_def.cpp): this prototype is its
// doc's (activation/swi_glu_grad/docs/aclnnSwiGluGrad.md, out const), included as its call example does.
#ifndef ACLNN_SWI_GLU_GRAD_H_
#define ACLNN_SWI_GLU_GRAD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnSwiGluGradGetWorkspaceSize(const aclTensor* yGrad, const aclTensor* x, int64_t dim,
                                                      const aclTensor* out, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnSwiGluGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                      aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNN_SWI_GLU_GRAD_H_
