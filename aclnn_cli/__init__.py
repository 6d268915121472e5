"""aclnn-cli: golden data and precision gate for Huawei Ascend aclnn operators."""

import os as _os

__version__ = "0.2.0"

# One BLAS thread per process, unless the user set it (decision 57). The tool's parallelism is its process
# pool; OpenBLAS's own threads spin after every call and took a core from the other worker (a 64M-element
# verify spent a fifth of its CPU there, and each small command's start-up a third). Set before NumPy loads.
for _name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_name, "1")
