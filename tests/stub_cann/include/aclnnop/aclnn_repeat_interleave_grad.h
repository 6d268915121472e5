// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// The gradient of repeat_interleave: each run of yGrad along axis (repeats[j] positions) summed into out. ops-nn
// ships no header for it (index/repeat_interleave_grad has no op_api): the prototypes are the doc's
// (docs/aclnnRepeatInterleaveGrad.md, 函数原型), token for token.
#ifndef ACLNN_REPEAT_INTERLEAVE_GRAD_H_
#define ACLNN_REPEAT_INTERLEAVE_GRAD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnRepeatInterleaveGradGetWorkspaceSize(const aclTensor *yGrad, const aclTensor *repeats,
                                                                int64_t axis, const aclTensor *out,
                                                                uint64_t *workspaceSize, aclOpExecutor **executor);

ACLNN_API aclnnStatus aclnnRepeatInterleaveGrad(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                                aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // ACLNN_REPEAT_INTERLEAVE_GRAD_H_
