// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// Umbrella runtime header. The real toolkit's acl.h also pulls in the model
// and single-op headers; the stub provides only the runtime part.
#ifndef INC_EXTERNAL_ACL_ACL_H_
#define INC_EXTERNAL_ACL_ACL_H_

#include "acl_rt.h"

#endif  // INC_EXTERNAL_ACL_ACL_H_
