// The public declaration of aclnnMyHardtanhBackward (same signature as CANN's aclnnop header), for the
// harness-glue test of the user op example: the generated ops.cpp must compile against it.
#ifndef ACLNN_CLI_TEST_MY_HARDTANH_BACKWARD_H_
#define ACLNN_CLI_TEST_MY_HARDTANH_BACKWARD_H_
#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"
#ifdef __cplusplus
extern "C" {
#endif
ACLNN_API aclnnStatus aclnnMyHardtanhBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                            const aclScalar* min, const aclScalar* max, aclTensor* out,
                                                            uint64_t* workspaceSize, aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnMyHardtanhBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                            aclrtStream stream);
#ifdef __cplusplus
}
#endif
#endif
