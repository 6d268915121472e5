"""How a case's outputs are judged, worked out once per case and passed down (verify, the small-case pass, the
chunked comparison and the worst elements' descriptions all read the same value).

Per output: the standard and its parameters (the run's --standard and --tolerance over the case's own), the rule
they make, the dtype whose thresholds apply and the relative-error floor (judgeddtype.py). Cases that agree on the
standard, dtype and overrides share one parameters dict and one rule (read them, never change them): a run of
thousands of small cases makes a few.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..casedir import manifest as M
from ..errors import UserError
from ..standards.rules import DEFAULT_STANDARD, Standard, find_standard, fixed_standard
from ..tensor.dtypes import DType
from .judgeddtype import tolerance_dtype


@dataclass(frozen=True)
class OutputJudging:
    """How one output is judged."""

    out: M.TensorEntry
    std: Standard
    params: dict
    dtype: DType  # whose thresholds apply (a compute dtype coarser than the output's: its)
    floor: float  # the relative-error floor
    complex_gamma: float | None = None  # a complex output's relative error bound, from its op's formula

    @property
    def rule(self):
        return standard_rule(self.std, self.params)


def output_judging(m: M.CaseManifest, opts, out: M.TensorEntry | None = None) -> OutputJudging:
    """How output `out` (default the first) of a case is judged under the run's options (judge.Options).
    UserError: the case's or the run's standard or tolerance cannot judge it."""
    out = out or m.output
    dtype, floor = tolerance_dtype(m, out)
    std, params = _standard(m, opts, dtype)
    return OutputJudging(out, std, params, dtype, floor, complex_gamma(m, out) if out.dtype.is_complex else None)


def complex_gamma(m: M.CaseManifest, out: M.TensorEntry) -> float:
    """The relative error bound of the op's complex_formula in the output's dtype, with the case's attributes
    (ops/complexparts.py). UserError: the formula has none (register refuses such an op; a case may still reach
    one through its attributes)."""
    from ..ops.complexparts import formula_gamma

    names = [t.name for t in m.inputs if not t.null]
    try:
        return formula_gamma(m.op.complex_formula, names, m.attribute_values, out.dtype.component.precision)
    except Exception as exc:  # (the op's own code: whatever it raises, the case cannot be judged)
        raise UserError(f"{m.op.name}'s complex_formula gives no error bound for {out.name}: {exc}",
                        where=str(m.dir)) from None


def case_judging(m: M.CaseManifest, opts) -> tuple[OutputJudging, ...]:
    """Every judged output's OutputJudging, in the case's order."""
    return tuple(output_judging(m, opts, out) for out in (m.judged or (m.output,)))


def _standard(m: M.CaseManifest, opts, dtype: DType) -> tuple[Standard, dict]:
    """The run's standard over the case's, with their overrides; an integer output's is always `exact` (gen refuses
    a case's own standard or tolerance for it; the run's --standard and tolerances judge the float outputs)."""
    name = opts.standard or m.standard or DEFAULT_STANDARD
    overrides = {**(m.raw.get("tolerance") or {}), **opts.tolerance} if not opts.standard or opts.standard == m.standard \
        else dict(opts.tolerance)
    if fixed_standard(dtype):  # (integers exactly, complexes against their allowance: rules.fixed_standard)
        name, overrides = fixed_standard(dtype), {}
    key = (name, dtype.name, tuple(overrides.items()))
    known = _STANDARDS.get(key)
    if known is not None:
        return known
    try:
        std = find_standard(name, fixed=bool(fixed_standard(dtype)))
        params = std.params(dtype, overrides)
    except (KeyError, ValueError) as exc:
        raise UserError(exc.args[0], where=str(m.dir)) from None
    if len(_STANDARDS) > 1024:
        _STANDARDS.clear()
        _RULES.clear()
    _STANDARDS[key] = std, params
    _RULES[id(params)] = params, std.rule(params)
    return std, params


_STANDARDS: dict[tuple, tuple[Standard, dict]] = {}
_RULES: dict[int, tuple[dict, object]] = {}  # id(params) -> (params, the standard's rule with them)


def standard_rule(std: Standard, params: dict):
    """std.rule(params), made once for the parameters this module shares, and once for parameters of the same values
    made elsewhere (a caller building its judging per case): what is memoised by the rule (identical.py's probe of
    it) then finds it."""
    known = _RULES.get(id(params))
    if known is not None and known[0] is params:
        return known[1]
    try:
        key = (id(std), tuple(sorted(params.items())))
        same = _RULES_BY_VALUE.get(key)
    except TypeError:  # (a parameter's value that cannot be a key)
        return std.rule(params)
    if same is not None and same[0] is std:
        return same[1]
    if len(_RULES_BY_VALUE) > 1024:
        _RULES_BY_VALUE.clear()
    _RULES_BY_VALUE[key] = std, std.rule(params)
    return _RULES_BY_VALUE[key][1]


_RULES_BY_VALUE: dict[tuple, tuple[Standard, object]] = {}  # (id(std), parameters' items) -> (std, its rule)
