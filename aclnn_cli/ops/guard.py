"""A user op's functions run inside gen, emulate and verify: whatever they raise is one line.

Without this, a `reference` that calls sys.exit(0) ends a verify run with exit 0 and no results
(a failing kernel passes CI), and an ordinary exception is a traceback from a worker process.
register wraps the functions of ops declared outside aclnn_cli (bundled ops are not wrapped:
their errors are the tool's bugs, and they run unwrapped at full speed). KeyboardInterrupt
passes through: a real Ctrl-C stops the run as it always does (exit 1, never a pass).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

from ..errors import UserError
from .base import OpSpec
from .declcheck import MESSAGE_LIMIT, describe

FUNCTIONS = ("reference", "exact", "kernel", "ieee", "edge", "textbook")


def _guard(fn: Callable, what: str, file: str) -> Callable:
    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (UserError, KeyboardInterrupt):
            raise
        except BaseException as exc:  # SystemExit included: a user function never ends the run
            raise UserError(f"{what} failed: {describe(exc, MESSAGE_LIMIT)}", where=file) from None

    return guarded


def guarded(spec: OpSpec, file: str) -> OpSpec:
    """`spec` with each of its functions (variants and the contract's attribute rule too) guarded."""
    def wrap(field: str, fn):
        return None if fn is None else _guard(fn, f"op {spec.name}: {field}", file)

    rule = spec.contract.attribute_rule
    return dataclasses.replace(
        spec, **{f: wrap(f, getattr(spec, f)) for f in FUNCTIONS},
        variants={name: wrap(f"variant {name}", fn) for name, fn in spec.variants.items()},
        contract=dataclasses.replace(spec.contract, attribute_rule=wrap("contract.attribute_rule", rule)))
