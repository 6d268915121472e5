"""aclnnGeGluV3Backward: aclnnGeGluBackward with activateLeft (activation/ge_glu_grad_v2/docs/aclnnGeGluV3Backward.md).

The same op_api (ExecGeGluBackwardGetWorkspaceSize: the same checks, in the same order) and the same GeGluGradV2
kernel; aclnnGeGluBackward passes activateLeft = false. true gelus the first half A and keeps B linear:
grad_A = gradOutput * B * gelu'(A), grad_B = gradOutput * gelu. Everything else is ge_glu_backward's.
"""

from __future__ import annotations

from ..base import AttrSpec
from .ge_glu_backward import APPROX, DIM, LEFT, spec
from ..registry import register

SPEC = register(spec("aclnnGeGluV3Backward", "ge_glu_v3_backward", "aclnnop/aclnn_geglu_backward.h",
                         (AttrSpec(DIM, "int", default=-1), AttrSpec(APPROX, "int", default=1), AttrSpec(LEFT, "bool", default=False)),
                         "Gradient of GeGluV3 (activateLeft: which half of self, split along dim, is gelu'd)."))
