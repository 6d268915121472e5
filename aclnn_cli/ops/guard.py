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
import numbers
from typing import Callable, Mapping

from ..errors import UserError
import numpy as np

from .base import COMPLEXES, OpSpec, Reference
from .declcheck import MESSAGE_LIMIT, describe

FUNCTIONS = ("reference", "golden_reference", "exact", "exact_at", "kernel", "ieee", "edge", "textbook")
SHAPED = ("reference", "golden_reference", "exact", "kernel", "ieee")  # (and the variants): what they return is shaped as the pieces
REFERENCES = ("reference", "golden_reference")  # (a Reference per output; the others return numbers)


def _guard(fn: Callable, what: str, file: str, check: Callable | None = None) -> Callable:
    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        try:
            result = fn(*args, **kwargs)
        except (UserError, KeyboardInterrupt):
            raise
        except BaseException as exc:  # SystemExit included: a user function never ends the run
            raise UserError(f"{what} failed: {describe(exc, MESSAGE_LIMIT)}", where=file) from None
        problem = check(args[0], result) if check is not None and args else None
        if problem:
            raise UserError(f"{what} {problem}", where=file)
        if check is None:
            return result
        if isinstance(result, Mapping) and len(result) == 1:  # (one output, by name: as bare, as the golden reads it)
            result = next(iter(result.values()))
        return _as_arrays(result)

    return guarded


def _as_arrays(result):
    """A Reference's fields as arrays (a list the checks accepted is read with .reshape downstream), per output."""
    if isinstance(result, Reference):
        return dataclasses.replace(result, **{f.name: np.asarray(getattr(result, f.name))
                                              for f in dataclasses.fields(result) if getattr(result, f.name) is not None})
    if isinstance(result, dict):
        return {k: _as_arrays(v) for k, v in result.items()}
    return result


def _shape_check(spec: OpSpec) -> Callable:
    """A check of a function's result against the pieces it was given (docs/families.md): an elementwise op's
    outputs have the pieces' shape; a Rows op's row outputs (k, R, A0), its across-rows outputs (1, R, A0).
    A result of another shape would be written as a golden or dump of the wrong elements."""
    across = set(spec.family.across_rows)
    per_block = set(spec.family.per_row)  # (outputs among them: one value per block, (k, 1, 1))
    own = set(spec.family.own)  # (cut from their own shape: k blocks of the family's own_geometry)
    local = spec.family.element_local
    driver = getattr(spec.family, "driver", None)
    attributes = {a.name for a in spec.attributes}

    def check(t, result) -> str | None:
        if not isinstance(t, dict):
            return None
        shapes = [np.shape(v) for k, v in t.items() if isinstance(v, np.ndarray) and k not in attributes]
        if not shapes or (not local and driver not in t):
            return None
        try:
            piece = np.broadcast_shapes(*shapes) if local else np.shape(t[driver])
            outputs = spec.by_output(result)
        except (ValueError, TypeError):
            return None
        for name, got in outputs.items():
            if isinstance(got, Reference):
                problem = _reference_problem(got)
                if problem:
                    return f"returned {name} with {problem}"
            arrays = [got.value, got.bound, got.scale] if isinstance(got, Reference) else [got]
            arrays += [a for a in (got.allowance, got.shared, got.lean) if a is not None] if isinstance(got, Reference) else []
            want = spec.family.partial_shape(t, piece) if name in across else (piece[0], 1, 1) if name in per_block else piece
            for a in arrays:
                s = np.shape(a)
                if name in own and len(s) == 3 and s[0] == piece[0]:  # (its own blocks: the family's shapes)
                    continue
                if s != tuple(want) and not (name in across and s == tuple(piece)):
                    return (f"returned {name} of shape {list(s)} for pieces of shape {list(piece)} (it must be "
                            f"{list(want)}: docs/families.md)")
        return None

    return check


def _result_check(spec: OpSpec, field: str) -> Callable:
    """A check that a function returned what its field promises: a Reference per output from a reference, numbers
    from the others (complex ones only from an op with a complex dtype: a real golden would drop the imaginary
    part), then the shape check. Text, None or a Reference where numbers belong ended in a traceback further on."""
    shape = _shape_check(spec)
    complex_ok = any(d in COMPLEXES for d in spec.dtypes)

    names = [t.name for t in spec.outputs]

    def check(t, result) -> str | None:
        if isinstance(result, Mapping) and sorted(result) != sorted(names):
            return (f"returned the outputs {sorted(map(str, result))}; the op's outputs are {names} (a dict holds each "
                    "of them by name, or, with one output, return it bare)")
        for name, got in spec.by_output(result).items():
            if field not in REFERENCES:
                arrays = [got]
            elif not isinstance(got, Reference):
                return f"returned {name} as {_kind(got)}, not a Reference(value, bound, scale) (docs/adding-an-op.md)"
            else:  # (its optional fields may be None; `tighter` is a function)
                arrays = [v for f in dataclasses.fields(got)
                          if (v := getattr(got, f.name)) is not None and not callable(v)]
            for a in arrays:
                problem = _numbers_problem(a, complex_ok)
                if problem:
                    return f"returned {name} {problem}"
        return shape(t, result)

    return check


def _kind(x) -> str:
    return f"an array of dtype {x.dtype}" if isinstance(x, np.ndarray) else f"a {type(x).__name__}"


def _numbers_problem(a, complex_ok: bool) -> str | None:
    """Why `a` is not numbers (a Python or NumPy number, an array of them, Fractions or Decimals), or None."""
    if isinstance(a, Reference):
        return "as a Reference where numbers belong"
    try:
        arr = np.asarray(a)
    except (TypeError, ValueError) as exc:  # (ragged lists)
        return f"that is not an array of numbers ({describe(exc, MESSAGE_LIMIT)})"
    kind = arr.dtype.kind
    if kind == "O":  # (an exact pass: Fractions, Decimals, ints; a non-finite float where IEEE says so)
        odd = [x for x in arr.reshape(-1) if not isinstance(x, numbers.Number)
               or (not complex_ok and isinstance(x, (complex, np.complexfloating)))][:1]
        return f"holding {_kind(odd[0])} ({odd[0]!r:.40}; numbers expected)" if odd else None
    if kind == "c" and not complex_ok:
        return f"of complex dtype {arr.dtype} for an op whose outputs are real"
    return None if kind in "biufc" else f"of dtype {arr.dtype} (numbers expected)"


def guarded(spec: OpSpec, file: str) -> OpSpec:
    """`spec` with each of its functions (variants and the contract's attribute rule too) guarded."""

    def wrap(field: str, fn):
        shaped = field in SHAPED or field.startswith("variant ")
        return None if fn is None else _guard(fn, f"op {spec.name}: {field}", file,
                                              _result_check(spec, field) if shaped else None)

    rule = spec.contract.attribute_rule
    return dataclasses.replace(
        spec, **{f: wrap(f, getattr(spec, f)) for f in FUNCTIONS},
        variants={name: wrap(f"variant {name}", fn) for name, fn in spec.variants.items()},
        derived={name: wrap(f"derived {name}", fn) for name, fn in spec.derived.items()},
        contract=dataclasses.replace(spec.contract, attribute_rule=wrap("contract.attribute_rule", rule)))


SCALE_MAX = 2.0**128 * 2.0**32  # float32 terms (each below 2^128, or the kernel overflows) of at most 2^32
# A literal's lean (Reference.lean): a float32 constant's rounding, at most half an ulp of it (2^-24 of it), times what
# it multiplies, which the terms (the scale) hold. A larger lean would excuse a biased kernel's balance.
LEAN_SHARE = 2.0**-24


def _reference_problem(r: Reference) -> str | None:
    """Why a Reference would mislead the gate, or None. Its bound and scale are finite and not negative where
    its value is finite (an infinite or NaN scale made every error relative 0: a broken kernel passed), and the
    scale no larger than float32 terms can make: relief judges an element against max(|golden|, scale)."""
    with np.errstate(all="ignore"):
        try:
            value, bound, scale = (np.asarray(a, dtype=np.float64) for a in (r.value, r.bound, r.scale))
            allowance, shared = (np.asarray(0.0 if a is None else a, dtype=np.float64) for a in (r.allowance, r.shared))
            finite = np.isfinite(np.broadcast_to(value, np.broadcast_shapes(value.shape, bound.shape, scale.shape,
                                                                            allowance.shape, shared.shape)))
            bound, scale, allowance, shared = (np.broadcast_to(a, finite.shape) for a in (bound, scale, allowance, shared))
        except (TypeError, ValueError):
            fields = [np.asarray(a) for a in (r.value, r.bound, r.scale, r.allowance, r.shared, r.lean) if a is not None]
            odd = next((a for a in fields if a.dtype.kind not in "biufcO"), None)
            if odd is not None:  # (text or bytes: no arithmetic reads it; an object array is an exact pass's Fractions)
                return f"a field of dtype {odd.dtype} (numbers expected)"
            return None
        for what, a in (("bound", bound), ("scale", scale), ("allowance", allowance), ("shared error", shared)):
            bad = finite & ~((a >= 0) & np.isfinite(a))
            if bad.any():
                i = int(np.flatnonzero(bad.reshape(-1))[0])
                return f"a {what} of {float(a.reshape(-1)[i])!r} at element {i} (it must be finite and not negative)"
        if r.lean is not None:
            try:
                lean = np.broadcast_to(np.asarray(r.lean, dtype=np.float64), finite.shape)
            except (TypeError, ValueError):
                return f"a lean of shape {list(np.shape(r.lean))} for results of shape {list(finite.shape)}"
            bad = finite & ~(np.abs(lean) <= LEAN_SHARE * scale)  # (NaN or inf: not <=)
            if bad.any():
                i = int(np.flatnonzero(bad.reshape(-1))[0])
                return (f"a lean of {float(lean.reshape(-1)[i])!r} at element {i} (it must be finite and at most "
                        f"2^-24 of the scale, {float(scale.reshape(-1)[i])!r}: a float32 literal's rounding)")
        big = finite & (np.maximum(np.maximum(scale, allowance), shared) > SCALE_MAX)
        if big.any():
            i = int(np.flatnonzero(big.reshape(-1))[0])
            return (f"a scale of {np.maximum(np.maximum(scale, allowance), shared).reshape(-1)[i]:.3g} at element {i}, more than float32 terms can make "
                    f"({SCALE_MAX:.3g})")
    return None
