// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
#ifndef OPBASE_COMMON_ACLNN_UTIL_H
#define OPBASE_COMMON_ACLNN_UTIL_H

#define ACLNN_API __attribute__((visibility("default")))

#endif  // OPBASE_COMMON_ACLNN_UTIL_H
