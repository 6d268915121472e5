// aclnnKindsEcho, a test op (tests/user_ops/_kinds_echo.py): a C double and a C float argument, declared
// as CANN's aclnnop headers declare aclnnBatchNormBackward's `double eps`.
#ifndef ACLNN_CLI_TEST_KINDS_ECHO_H_
#define ACLNN_CLI_TEST_KINDS_ECHO_H_
#include "aclnn/aclnn_base.h"
#include "aclnnop/aclnn_util.h"
#ifdef __cplusplus
extern "C" {
#endif
ACLNN_API aclnnStatus aclnnKindsEchoGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self, double eps,
                                                     float momentum, aclTensor* out, uint64_t* workspaceSize,
                                                     aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnKindsEcho(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                     aclrtStream stream);
#ifdef __cplusplus
}
#endif
#endif
