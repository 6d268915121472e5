// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// aclnn status codes: the subset the stub returns, same names and values as
// the public CANN header.
#ifndef OP_API_OP_API_COMMON_INC_OPDEV_OP_ERRNO_H
#define OP_API_OP_API_COMMON_INC_OPDEV_OP_ERRNO_H

#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001
#define ACLNN_ERR_PARAM_INVALID 161002
#define ACLNN_ERR_RUNTIME_ERROR 361001
#define ACLNN_ERR_INNER 561000
#define ACLNN_ERR_INNER_CREATE_EXECUTOR 561101
#define ACLNN_ERR_INNER_NULLPTR 561103

#endif  // OP_API_OP_API_COMMON_INC_OPDEV_OP_ERRNO_H
