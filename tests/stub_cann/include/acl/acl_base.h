// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// Base types: everything lives in acl_base_rt.h plus the runtime error codes.
#ifndef INC_EXTERNAL_ACL_ACL_BASE_H_
#define INC_EXTERNAL_ACL_ACL_BASE_H_

#include "acl/acl_base_rt.h"
#include "error_codes/rt_error_codes.h"

#endif  // INC_EXTERNAL_ACL_ACL_BASE_H_
