"""Operator declarations, one module per operator, discovered automatically."""

from __future__ import annotations

import importlib
import pkgutil

from .base import OpSpec
from .registry import OPS

_SUPPORT = {"base", "registry", "exact", "swish", "contract", "user"}  # shared modules, not operators

for _mod in pkgutil.iter_modules(__path__):
    if _mod.name not in _SUPPORT:
        importlib.import_module(f"{__name__}.{_mod.name}")


def find_op(name: str) -> OpSpec:
    """Look an op up by API name ('aclnnSiluBackward'), bare name ('SiluBackward') or key ('silu_backward')."""
    from .user import load_configured

    load_configured()  # user ops (ACLNN_CLI_OPS, entry points), once
    wanted = str(name).strip()
    for spec in OPS.values():
        if wanted in (spec.name, spec.name.removeprefix("aclnn"), spec.key) or wanted.lower() == spec.name.lower():
            return spec
    raise KeyError(f"unknown op '{name}' (known: {', '.join(sorted(OPS))})")


from .base import AttrSpec, Contract, Reference, TensorSpec  # noqa: E402  (for user op modules)
from .registry import register  # noqa: E402

__all__ = ["OPS", "AttrSpec", "Contract", "OpSpec", "Reference", "TensorSpec", "find_op", "register"]
