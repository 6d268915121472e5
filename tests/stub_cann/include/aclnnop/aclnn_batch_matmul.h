// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// The batched matrix product of 3-d tensors (aclnnBatchMatMulWeightNz is not declared here).
#ifndef OP_API_ACLNN_BATCHMATMUL_H
#define OP_API_ACLNN_BATCHMATMUL_H

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnBatchMatMulGetWorkspaceSize(const aclTensor* self, const aclTensor* mat2, aclTensor* out,
                                                       int8_t cubeMathType, uint64_t* workspaceSize,
                                                       aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnBatchMatMul(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif // OP_API_ACLNN_BATCHMATMUL_H
