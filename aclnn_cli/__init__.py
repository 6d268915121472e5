"""aclnn-cli: golden data and precision gate for Huawei Ascend aclnn operators."""

__version__ = "0.2.0"
