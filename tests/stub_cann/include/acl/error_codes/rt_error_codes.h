// aclnn-cli stub CANN toolkit (a test double, see tests/stub_cann/README.md).
// The subset of runtime error codes the stub returns; same names and values
// as the public CANN header of the same path.
#ifndef __INC_EXTERNEL_RT_ERROR_CODES_H__
#define __INC_EXTERNEL_RT_ERROR_CODES_H__

#define ACL_RT_SUCCESS 0
#define ACL_ERROR_RT_PARAM_INVALID 107000
#define ACL_ERROR_RT_INVALID_DEVICEID 107001
#define ACL_ERROR_RT_CONTEXT_NULL 107002
#define ACL_ERROR_RT_AICORE_EXCEPTION 507015

#endif  // __INC_EXTERNEL_RT_ERROR_CODES_H__
