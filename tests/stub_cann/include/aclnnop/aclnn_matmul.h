// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// The matrix product of 1-d to 6-d tensors, torch.matmul's shapes (aclnnMatmulWeightNz is not declared here).
#ifndef OP_API_INC_MATMUL_H_
#define OP_API_INC_MATMUL_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnMatmulGetWorkspaceSize(const aclTensor* self, const aclTensor* mat2, aclTensor* out,
                                                  int8_t cubeMathType, uint64_t* workspaceSize,
                                                  aclOpExecutor** executor);

// for any shape mat multiply
ACLNN_API aclnnStatus aclnnMatmul(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif // OP_API_INC_MATMUL_H_
