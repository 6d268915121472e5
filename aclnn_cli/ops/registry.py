"""The operator registry: every module in aclnn_cli.ops that calls `register` is an operator."""

from __future__ import annotations

import sys
from pathlib import Path

from .base import OpSpec
from .declcheck import BUNDLED_DIR, check
from .guard import guarded

OPS: dict[str, OpSpec] = {}
DECLARED_IN: dict[str, str] = {}  # op name -> the file that called register (its fingerprint covers it)


def register(spec: OpSpec) -> OpSpec:
    """Add an op, checked whole first (declcheck: one line naming the file and the field, a UserError).
    Its variants join the defect catalogue (device/defects.catalogue checks them). An op declared outside
    aclnn_cli is registered with its functions guarded (guard.py): use the returned spec."""
    file = sys._getframe(1).f_globals.get("__file__") or ""
    check(spec, OPS, DECLARED_IN, str(file))
    if Path(str(file)).resolve().parent != BUNDLED_DIR:
        spec = guarded(spec, str(file))
    OPS[spec.name] = spec
    DECLARED_IN[spec.name] = file
    return spec


def lookup(name: str) -> OpSpec:
    """An op by API name, importing every op module first (used to unpickle OpSpec in workers)."""
    import importlib

    importlib.import_module("aclnn_cli.ops")  # registers every op
    if name not in OPS:
        from .user import load_configured

        load_configured()  # a user op (ACLNN_CLI_OPS, set by --ops for workers too)
    return OPS[name]
