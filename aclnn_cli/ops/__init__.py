"""Operator declarations, one module per operator, imported when first looked up (registry.py)."""

from __future__ import annotations

import importlib

from . import graphops
from .base import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, legitimate
from .registry import OPS, bundled_module, register
from .registry import AFTER_BUNDLED
from .user import load_configured

AFTER_BUNDLED.append(load_configured)  # (a whole read of the registry loads the configured user ops too)


_BUNDLED: dict[str, OpSpec] = {}  # a name asked for -> its bundled op (thousands of manifests name a few ops)


def find_op(name: str) -> OpSpec:
    """Look an op up by API name ('aclnnSiluBackward'), bare name ('SiluBackward') or key ('silu_backward').

    A bundled op imports its own module only; any other name reads the whole registry (every bundled op,
    ACLNN_CLI_OPS and the 'aclnn_cli.ops' entry points), where a user op cannot take a bundled name."""
    found = _BUNDLED.get(name) if type(name) is str else None
    if found is not None:
        return found
    wanted = str(name).strip()
    module = bundled_module(wanted)
    if module is not None:
        spec = importlib.import_module(f"{__name__}.{module}").SPEC
        if type(name) is str:
            _BUNDLED[name] = spec
        return spec
    for spec in OPS.values():
        if wanted in (spec.name, spec.name.removeprefix("aclnn"), spec.key) or wanted.lower() == spec.name.lower():
            return spec
    import difflib  # (here: only an unknown name pays for it)

    near = difflib.get_close_matches(wanted.lower(), {n.lower(): n for n in OPS}, n=2, cutoff=0.75)
    names = {n.lower(): n for n in OPS}
    hint = f"did you mean {' or '.join(names[n] for n in near)}? " if near else ""
    raise KeyError(f"unknown op '{name}' ({hint}`aclnn-cli ops` lists the {len(OPS)} known)")


def find_graph_op(name) -> graphops.GraphOp | None:
    """A graph op by CamelCase or snake_case name (SiluGrad, silu_grad), bundled or a user op's; None if there is
    none. A name the bundled table lacks reads the whole registry first (the user ops register theirs)."""
    found = graphops.find(name)
    if found is None and not OPS.complete:
        OPS.load_all()
        found = graphops.find(name)
    return found


__all__ = ["OPS", "AttrSpec", "Contract", "OpSpec", "Reference", "TensorSpec", "defect", "find_graph_op", "find_op", "legitimate",
           "register"]
