"""What a tensor is: dtypes, view layouts, its storage in device layout, the aclnn status codes."""
