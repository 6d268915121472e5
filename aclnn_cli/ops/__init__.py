"""Operator declarations, one module per operator, discovered automatically."""

from __future__ import annotations

import importlib
import pkgutil

from .base import OpSpec
from .registry import OPS

_SUPPORT = {"base", "registry", "exact", "swish", "contract"}  # shared modules, not operators

for _mod in pkgutil.iter_modules(__path__):
    if _mod.name not in _SUPPORT:
        importlib.import_module(f"{__name__}.{_mod.name}")

from ..defects import add_op_variants  # noqa: E402  (after every op is registered)

add_op_variants(OPS.values())


def find_op(name: str) -> OpSpec:
    """Look an op up by API name ('aclnnSiluBackward'), bare name ('SiluBackward') or key ('silu_backward')."""
    wanted = str(name).strip()
    for spec in OPS.values():
        if wanted in (spec.name, spec.name.removeprefix("aclnn"), spec.key) or wanted.lower() == spec.name.lower():
            return spec
    raise KeyError(f"unknown op '{name}' (known: {', '.join(sorted(OPS))})")


__all__ = ["OPS", "OpSpec", "find_op"]
