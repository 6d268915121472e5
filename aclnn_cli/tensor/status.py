"""The aclnn status codes the tool knows (aclnn_base.h in opbase): one table for case files,
manifests, the contract's phase one, the runner's answers and verify's messages."""

SUCCESS = 0
NULLPTR = 161001
INVALID = 161002

BY_NAME = {"ACLNN_SUCCESS": SUCCESS, "ACLNN_ERR_PARAM_NULLPTR": NULLPTR, "ACLNN_ERR_PARAM_INVALID": INVALID}
NAMES = {code: name for name, code in BY_NAME.items()}
