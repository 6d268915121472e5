"""The aclnn-cli command."""
