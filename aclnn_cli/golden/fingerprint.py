"""A case's fingerprint: what decides its bytes. gen skips a case whose directory has the same one.

It covers the case's definition, the seed, the tool version, the generator scheme and the file that
declares the op, so an edited op declaration regenerates its cases.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .. import __version__
from ..cases.case import Case
from ..casedir.manifest_text import canonical_json
from ..ops import OpSpec
from ..ops.registry import DECLARED_IN


def fingerprint(case: Case) -> str:
    """What decides a case's bytes: its definition, the seed, the tool version and generator scheme."""
    definition = {
        "tool_version": __version__, "scheme": "pcg64-block65536/f64-round-once/v1", "op": case.op.name,
        "product": case.product, "seed": case.seed, "expect_status": case.expect_status,
        "standard": case.standard, "tolerance": list(case.tolerance), "tensors": [t.described for t in case.tensors],
    }
    if case.attributes:  # (only ops with attributes: the other ops' fingerprints stay as they were)
        definition["attributes"] = [[n, list(v) if isinstance(v, tuple) else v] for n, v in case.attributes]
    definition["op_declaration"] = op_declaration_digest(case.op)
    return hashlib.sha256(canonical_json(definition, allow_nan=True).encode()).hexdigest()


def op_declaration_digest(op: OpSpec) -> str:
    """sha256 of the file that declares the op (the one that registered it), or "" if it has none.

    In the fingerprint, so an edited declaration (a contract rule, a formula, a bound: user ops change
    without a version bump) regenerates its cases instead of keeping stale goldens and negative cases.
    """
    known = _DECLARATIONS.get(op.name)
    if known is None:
        path = DECLARED_IN.get(op.name)
        try:
            known = hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else ""
        except OSError:
            known = ""
        _DECLARATIONS[op.name] = known
    return known


_DECLARATIONS: dict[str, str] = {}
