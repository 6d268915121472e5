"""The precision standards, as data: per-dtype parameters, a per-element rule and a verdict with its rows.

Below cases/ (a case file names its standard and tolerances) and judge/ (which measures the Metrics
these judge): each judge function builds a Verdict's rows (metric, value, limit, within) and the
reason from them; the reports render those rows and restate none of these numbers.

Each is a published Ascend / PyTorch standard (docs/standards.md: its source and numbers) except the
default's additions (floor, relief, error balance), documented in docs/verify.md.

Each standard also says which tolerance values it accepts (`ranges`, and `joints` for keys that
combine, e.g. mere-mare's mare*T <= 1/2): only values with which a sign-flipped and an all-zero
result of ordinary magnitude still FAIL, for every op and dtype, and none that no result could meet
(thousandth's share >= 1, a benchmark ratio under 1). tolerances.py holds the numbers and the
meaning of "ordinary"; docs/decisions.md derives each range; tests/test_gate_edges.py proves them.
"""

from __future__ import annotations

import math
from functools import lru_cache
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, NamedTuple

import numpy as np

from .tolerances import (ABSOLUTE_MAX, MARE_T_MAX, MAX_FACTOR, ORDINARY_MAGNITUDE, ORDINARY_SHARE, SMALL_MAX,
                         Joint, Range, check_joints, check_value, factor, mean_ulps_max, ratio_max, relative,
                         ulps_max)
from ..files.text import clip
from ..tensor.dtypes import DType

if TYPE_CHECKING:  # (what the judge measures: the judge package sits above the standards)
    from ..judge.compare import Metrics, Rule

MERE_T = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-13, "float64": 2.0**-13}
ALLCLOSE = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1.3e-6, 1e-5)}
ABS_THRESHOLD = {  # rtol, small_value, atol (msprobe)
    "float16": (2.0**-10, 2.0**-10, 2.0**-16), "bfloat16": (2.0**-8, 2.0**-10, 2.0**-16),
    "float32": (2.0**-20, 2.0**-20, 2.0**-30), "float64": (2.0**-20, 2.0**-20, 2.0**-30),
}
# Default gate's bound on the error balance (mean signed relative error, toward zero < 0):
# BALANCE_T * T, plus BALANCE_NOISE ulps / sqrt(n) because a correct kernel's mean of n
# independent rounding errors is itself ~ ulp / sqrt(12 n). Chosen from the spread of
# correct kernels on the bundled suite (docs/verify.md, "The default gate, and why its numbers").
BALANCE_T = 1 / 16
BALANCE_NOISE = 4.0


@dataclass(frozen=True)
class Standard:
    """A precision standard: its rule per element, its metrics' limits and the tolerances a user may set."""

    name: str
    summary: str  # the rule, in words, with its numbers
    source: str
    defaults: Callable[[DType], dict[str, float]]
    rule: Callable[[Mapping[str, float]], Rule]  # which elements break the per-element bound
    judge: Callable[[Metrics, Mapping[str, float], DType, Metrics | None], Verdict]
    ranges: Mapping[str, Range] = field(default_factory=dict)  # accepted values per key (tolerances.py)
    joints: tuple[Joint, ...] = ()  # bounds on keys that combine (mere-mare's mare*T, allclose's atol + rtol/8)
    relief: bool = False  # re-judge flagged elements with the op's term scale and edge results
    against: str = "golden"  # or "emulator": compare with the emulated kernel's output
    benchmark: bool = False  # also measure the emulated kernel against the golden
    flush_ok: bool = True  # a zero where the golden is subnormal counts as exact
    aliases: Mapping[str, str] = None  # --rtol / --atol -> parameter name
    element_limit: str | None = None  # the parameter an element's relative error is held to (the plots draw it)
    reads_ulps: bool = False  # its rule or judge reads the ulp errors (else a console-only verify does not measure them)

    def params(self, dtype: DType, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
        """Default parameters for dtype with overrides applied, each in its range and jointly valid.

        KeyError names the valid keys; ToleranceError (a ValueError) the key, this standard and the
        accepted range of a value that would let a sign-flipped or zero result pass, or that no
        result could meet.
        """
        p = self.defaults(dtype)
        names: dict[str, str] = {}
        for key, value in (overrides or {}).items():
            canonical = self.canonical(key, dtype, p)
            p[canonical] = check_value(self.name, canonical, key, self.ranges[canonical], value, dtype)
            names[canonical] = key
        check_joints(self.name, self.ranges, self.joints, p, names, dtype)
        return p

    def check_key(self, key: str, value, dtype: DType) -> float:
        """One override alone against its own range (joint bounds need every key: `params`)."""
        canonical = self.canonical(key, dtype, self.defaults(dtype))
        return check_value(self.name, canonical, key, self.ranges[canonical], value, dtype)

    def canonical(self, key: str, dtype: DType, p: Mapping[str, float]) -> str:
        """The parameter a key (or its alias) sets; KeyError naming the valid ones if none."""
        canonical = (self.aliases or {}).get(key, key)
        if canonical not in p:
            valid = sorted(set(p) | set(self.aliases or {}))
            raise KeyError(f"standard '{self.name}' has no tolerance '{clip(canonical)}' (valid: {', '.join(valid)})")
        return canonical


class Row(NamedTuple):
    """One bound a standard judged: `metric` of output `output` was `value`, to be `comparison` `limit`.

    The verdict's reason, and every report (console, JSON, JUnit, HTML), is made from these rows: no
    renderer restates a standard's numbers. `output` is "" until verify names it (Verdict.named, results.rows_of).
    """

    output: str
    metric: str
    value: float
    limit: float
    comparison: str  # "<", "<=" or ">": how value must stand to limit
    within: bool
    note: str = ""  # where or why: "at element 7", "either passes", "biased toward zero (truncation?)"

    def text(self) -> str:
        """The row in words: 'MERE 0.0207 (limit < 0.000122, 170x) at element 7'."""
        head = f"{self.output}: " if self.output else ""
        if self.within:
            body = f"{self.metric} {_g(self.value)} {self.comparison} {_g(self.limit)}"
        else:
            times = f", {self.value / self.limit:.2f}x" if self.comparison != ">" and self.limit > 0 else ""
            body = f"{self.metric} {_g(self.value)} (limit {self.comparison} {_g(self.limit)}{times})"
        return head + body + (f" {self.note}" if self.note else "")

    def to_json(self) -> dict:
        return {"output": self.output, "metric": self.metric, "value": self.value, "limit": self.limit,
                "comparison": self.comparison, "within": self.within, "note": self.note}


def _g(x: float) -> str:
    return f"{x:.3g}" if isinstance(x, float) else str(x)


@dataclass(frozen=True)
class Verdict:
    """A standard's judgement of one output: whether it passed, why in words, and the rows it judged."""

    passed: bool
    reason: str  # which rule decided, with the numbers (made from the rows)
    rows: tuple[Row, ...] = ()

    def named(self, output: str) -> "Verdict":
        """The verdict with its rows naming `output` (a case with several outputs concatenates these)."""
        return Verdict(self.passed, self.reason, tuple(Row(output, *_fields(r)[1:]) for r in self.rows))


def _fields(r: Row) -> tuple:
    return tuple(r)


def _row(metric: str, value, limit: float, comparison: str, note: str = "", over=None) -> Row:
    """A row; `over` (where, why: a function giving the words, made only when needed) is said only when the
    value is over its limit (a pass repeats its notes)."""
    value = float(value)
    within = value < limit if comparison == "<" else value <= limit if comparison == "<=" else value > limit
    return Row("", metric, value, float(limit), comparison, bool(within), note if within or over is None else over())


def _verdict(rows: list[Row], passed: bool | None = None) -> Verdict:
    """passed (default: every row within) with its reason: the first row over its limit when it failed;
    else each row, less the empty counts (NaN/Inf mismatches 0 <= 0) when other rows have something to say."""
    passed = all(r.within for r in rows) if passed is None else passed
    if not passed:
        return Verdict(False, next(r for r in rows if not r.within).text(), tuple(rows))
    rows = tuple(rows)
    cached = not any(r.value == 0 and math.copysign(1.0, r.value) < 0 for r in rows)  # (-0.0 == 0.0, but reads "-0")
    return Verdict(True, (_passed_reason if cached else _passed_reason.__wrapped__)(rows), rows)


@lru_cache(maxsize=1024)
def _passed_reason(rows: tuple[Row, ...]) -> str:
    """A pass's reason: each row, less the empty counts (NaN/Inf mismatches 0 <= 0) when other rows have something
    to say. (Made once for rows that repeat: the many small cases identical to their golden.)"""
    said = [r for r in rows if r.value or r.limit] or rows
    return ", ".join(r.text() for r in said)


def _at(m: Metrics):
    return lambda: f"at element {m.max_rel_at}"


def _specials(m: Metrics) -> Row:
    return _row("NaN/Inf mismatches", m.special_mismatches, 0, "<=", over=lambda: f"(first at element {m.first_special})")


def _mere_mare(m: Metrics, p, dtype: DType, bench) -> Verdict:
    t, balance = p["T"], m.error_balance
    side = "toward zero (truncation?)" if balance < 0 else "away from zero"
    return _verdict([_specials(m), _row("MERE", m.mere, t, "<"),
                     _row("MARE", m.max_rel, p["mare"] * t, "<", over=_at(m)),
                     _row("|error balance|", abs(balance), balance_limit(p, dtype, m.balanced_elements), "<=",
                          over=lambda: f"(results biased {side})")])


def balance_limit(p, dtype: DType, n: int) -> float:
    return p["balance"] + p["balance_noise"] * 2.0 ** -dtype.precision / math.sqrt(max(n, 1))


def _no_violations(label: str):
    def judge(m: Metrics, p, dtype, bench) -> Verdict:
        return _verdict([_specials(m), _row(f"elements over the {label} bound", m.violations, 0, "<=",
                                            over=lambda: f"(of {m.compared}; first at element {m.first_violation})")])
    return judge


def _exact(m: Metrics, p, dtype, bench) -> Verdict:
    """Equality, and nothing else: an integer has no NaN or Inf to match (a float output a case judges `exact`
    keeps the NaN/Inf row, since non-finite elements carry no error)."""
    rows = [] if dtype.is_integer else [_specials(m)]
    return _verdict(rows + [_row("elements differing from the golden", m.violations, 0, "<=",
                                 over=lambda: f"(of {m.compared}; first at element {m.first_violation})")])


def _share(m: Metrics) -> float:
    return m.violations / m.compared if m.compared else 0.0


def _ulp(m: Metrics, p, dtype, bench) -> Verdict:
    rows = [_specials(m), _row(f"share over {p['ulps']:g} ulp", _share(m), p["share"], "<",
                               over=lambda: f"(first at element {m.first_violation})")]
    if "mean_ulps" in p:
        rows.append(_row("mean ulp error", m.mean_ulp, p["mean_ulps"], "<", "(either passes)"))
    passed = rows[0].within and any(r.within for r in rows[1:])
    if passed and not rows[1].within:  # (the reason names the bound that let it pass)
        return Verdict(True, rows[2].text(), tuple(rows))
    return _verdict(rows, passed)


def _thousandth(m: Metrics, p, dtype, bench) -> Verdict:
    return _verdict([_specials(m), _row(f"share within relative error {p['rel']:g}", 1 - _share(m), p["share"], ">",
                                        over=lambda: f"(first outside at element {m.first_violation})")])


def _msopst(m: Metrics, p, dtype, bench) -> Verdict:
    return _verdict([_specials(m), _row(f"share with relative diff > {p['rel']:g}", _share(m), p["share"], "<="),
                     _row("max relative diff", m.max_rel, p["max_rel"], "<", over=_at(m))])


def benchmark_ratios(dev: Metrics, bench: Metrics, dtype: DType) -> dict[str, float]:
    """Device metric / benchmark metric, each floored at what is negligible for the dtype."""
    u = 2.0 ** -dtype.precision
    rms_golden = math.sqrt(bench.sum_sq_golden / bench.compared) if bench.compared else 0.0
    floors = {"small_error_rate": 1e-3, "rmse": u * rms_golden + 1e-300, "max_rel_error": u, "mere": u,
              "error_balance": u}
    values = {"small_error_rate": (dev.small_error_rate, bench.small_error_rate), "rmse": (dev.rmse, bench.rmse),
              "max_rel_error": (dev.max_rel, bench.max_rel), "mere": (dev.mere, bench.mere),
              "error_balance": (abs(dev.error_balance), abs(bench.error_balance))}
    floors = {k: f if math.isfinite(f) and f > 0 else 1e-300 for k, f in floors.items()}
    return {k: max(d, floors[k]) / max(b, floors[k]) for k, (d, b) in values.items()}


def _benchmark(m: Metrics, p, dtype, bench: Metrics | None) -> Verdict:
    ratios = benchmark_ratios(m, bench, dtype)
    rows = [_specials(m)] + [_row(f"{k} device/benchmark", r, p["max_rel_ratio" if k == "max_rel_error" else "ratio"],
                                  "<=", "(floored)") for k, r in ratios.items()]
    if rows[0].within and not all(r.within for r in rows):
        over = [r for r in rows if not r.within]
        return Verdict(False, "device/benchmark over the limit: " + ", ".join(
            f"{r.metric.split()[0]} {r.value:.2f}x (limit {r.limit:g}x)" for r in over), tuple(rows))
    return _verdict(rows)


STANDARDS: dict[str, Standard] = {}


def _register(s: Standard) -> None:
    STANDARDS[s.name] = s


_register(Standard(
    "mere-mare", "MERE < T and MARE < 10T with T = 2^-10 fp16, 2^-7 bf16, 2^-13 fp32; relative error floored at the "
    "smallest normal, re-judged against the op's term scale where it exceeds T; |error balance| <= T/16 + 4 ulp/sqrt(n)",
    "CANN ops precision standard + aclnn-cli floor, condition-aware relief and bias bound",
    defaults=lambda d: {"T": MERE_T[d.name], "mare": 10.0, "balance": MERE_T[d.name] * BALANCE_T,
                        "balance_noise": BALANCE_NOISE},
    rule=lambda p: (lambda e: e.rel >= p["T"]), judge=_mere_mare, relief=True, aliases={"rtol": "T"},
    element_limit="T",
    ranges={"T": relative(), "mare": factor(), "balance": Range("a mean relative error", 0.0, 1.0),
            "balance_noise": factor()},
    joints=(Joint(("mare", "T"), MARE_T_MAX, "a zero result's error, relieved, is at least 1/2 where the golden "
                                             "is at least half its term scale"),),
))
_register(Standard(
    "absolute-threshold", "every element: |a-g|/|g| <= rtol (fp16 2^-10, bf16 2^-8, fp32 2^-20), or |a-g| <= atol "
    "(2^-16, 2^-16, 2^-30) where |g| <= small value (2^-10, 2^-10, 2^-20)", "msprobe API accuracy checker",
    defaults=lambda d: dict(zip(("rtol", "small", "atol"), ABS_THRESHOLD[d.name])),
    rule=lambda p: (lambda e: np.where(e.golden_abs > p["small"], e.abs > p["rtol"] * e.golden_abs, e.abs > p["atol"])),
    judge=_no_violations("absolute-threshold"), element_limit="rtol",
    ranges={"rtol": relative(), "small": Range("a magnitude", 0.0, SMALL_MAX),
            "atol": Range("an absolute error", 0.0, ABSOLUTE_MAX)},
))
_register(Standard(
    "ulp", "ulp error in the output dtype at the golden's exponent; fp16/bf16: share over 1 ulp < 0.001; "
    "fp32: share over 32 ulp < 0.05, or mean ulp < 64", "msprobe",
    defaults=lambda d: {"ulps": 1.0, "share": 0.001} if d.itemsize == 2 else {"ulps": 32.0, "share": 0.05, "mean_ulps": 64.0},
    rule=lambda p: (lambda e: e.ulp > p["ulps"]), judge=_ulp, reads_ulps=True,
    ranges={"ulps": Range("a count of ulps", 0.0, ulps_max),
            "share": Range("a fraction of elements", 0.0, ORDINARY_SHARE),
            "mean_ulps": Range("a mean count of ulps", 0.0, mean_ulps_max)},
))
_register(Standard(
    "thousandth", "share of elements with relative error < 0.001 must be > 0.999 (fp32 variant: 1e-4 and 0.9999)",
    "msprobe / CANN double thousandths",
    defaults=lambda d: {"rel": 1e-3, "share": 0.999} if d.itemsize == 2 else {"rel": 1e-4, "share": 0.9999},
    rule=lambda p: (lambda e: e.rel >= p["rel"]), judge=_thousandth, aliases={"rtol": "rel"}, element_limit="rel",
    ranges={"rel": relative(), "share": Range("a fraction of elements", 1 - ORDINARY_SHARE, 1.0, closed_lo=True,
                                                            open_hi=True)},
))
_register(Standard(
    "benchmark", "device metrics / metrics of the benchmark (the emulated fp32-compute kernel), both against the "
    "golden: small-value error rate, RMSE, MERE, error balance <= 2x; max relative error <= 10x", "msprobe",
    defaults=lambda d: {"ratio": 2.0, "max_rel_ratio": 10.0},
    rule=lambda p: (lambda e: np.zeros(e.abs.shape, bool)), judge=_benchmark, benchmark=True,
    ranges={"ratio": Range("a ratio", 1.0, ratio_max, closed_lo=True),
            "max_rel_ratio": Range("a ratio", 1.0, MAX_FACTOR, closed_lo=True)},
))
_register(Standard(
    "msopst", "an element errs if its relative diff > 0.01; pass if <= 5% err and max relative diff < 0.1",
    "CANN msOpST", defaults=lambda d: {"rel": 0.01, "share": 0.05, "max_rel": 0.1},
    rule=lambda p: (lambda e: e.rel > p["rel"]), judge=_msopst, aliases={"rtol": "rel"}, element_limit="rel",
    ranges={"rel": relative(), "share": Range("a fraction of elements", 0.0, 1.0), "max_rel": relative()},
))
_register(Standard(
    "allclose", "every element: |a - g| <= atol + rtol |g|; fp16 rtol 1e-3, bf16 1.6e-2, fp32 1.3e-6; atol 1e-5",
    "PyTorch assert_close defaults",
    defaults=lambda d: dict(zip(("rtol", "atol"), ALLCLOSE[d.name])),
    rule=lambda p: (lambda e: e.abs > p["atol"] + p["rtol"] * e.golden_abs), judge=_no_violations("allclose"),
    ranges={"rtol": relative(), "atol": Range("an absolute error", 0.0, ABSOLUTE_MAX)},
    joints=(Joint(("atol", "rtol"), ABSOLUTE_MAX, f"the bound at |golden| = {ORDINARY_MAGNITUDE:g} stays under "
                                                  f"3/4 of it, so a zero result there fails",
                  weights=(1.0, ORDINARY_MAGNITUDE)),),
))
_register(Standard(
    "bitwise", "bit-identical to the emulated kernel (NaN matches any NaN; -0 and +0 differ)", "aclnn-cli",
    defaults=lambda d: {}, rule=lambda p: (lambda e: (e.abs > 0) | e.zero_sign), judge=_no_violations("bitwise"),
    against="emulator", flush_ok=False,
))

# An integer output has no rounding to allow for: its golden is the exact result, and any other value is wrong. No
# tolerance applies (defaults {}: any key is refused), and the run's --standard judges float outputs only.
_register(Standard(
    "exact", "every element equal to the golden (integer outputs: no rounding, no tolerance)", "aclnn-cli",
    defaults=lambda d: {}, rule=lambda p: (lambda e: e.abs > 0), judge=_exact, flush_ok=False,
))



def _complex(m: Metrics, p, dtype, bench) -> Verdict:
    """NaN/Inf agreement and every element's |error| within its allowance (judge/complexerr.py)."""
    return _verdict([_specials(m), _row("max |error| / allowance", m.max_rel, 1.0, "<=",
                                        over=lambda: f"at element {m.max_rel_at} ({m.violations} of {m.compared} over)")])


# A complex output's error is judged in modulus against an allowance derived from the kernel's computation (its
# roundings, the golden's own): judge/complexerr.py, docs/allowances.md. The published rules are per component and
# relative, which a cancelling component breaks legitimately; no tolerance applies (defaults {}). Not in STANDARDS:
# it judges every complex output and nothing else (on a float output its "relative error <= 1" would pass anything),
# so neither a run nor a case file can name it.
FIXED: dict[str, Standard] = {}
COMPLEX = FIXED.setdefault("complex", Standard(
    "complex", "every element: |a - g| (complex, in modulus) <= gamma |g| + (1 + gamma) h, the kernel's rounding "
    "errors (gamma) and the golden's half ulp per component (h)", "aclnn-cli (docs/allowances.md)",
    defaults=lambda d: {}, rule=lambda p: (lambda e: ~(e.rel <= 1.0)), judge=_complex, flush_ok=False,
))

DEFAULT_STANDARD = "mere-mare"
INTEGER_STANDARD = "exact"  # what every integer output is judged by, whatever the case or the run names
COMPLEX_STANDARD = "complex"  # and every complex output


def fixed_standard(dtype: DType) -> str | None:
    """The one standard an output of `dtype` is judged by whatever the case or the run names (integers: exact,
    complexes: complex), or None (a float output: the case's or the run's)."""
    return INTEGER_STANDARD if dtype.is_integer else COMPLEX_STANDARD if dtype.is_complex else None


def integer_refusal(dtype: DType, standard: str | None, tolerance) -> str | None:
    """Why a case's own standard or tolerance cannot judge an output of `dtype`, or None (a float output, or an
    integer or complex one asking nothing of them)."""
    fixed = fixed_standard(dtype)
    if fixed is None:
        return None
    how = "exactly" if fixed == INTEGER_STANDARD else "against its derived allowance"
    if standard not in (None, fixed):
        return (f"a {dtype.name} output is judged {how} (standard {fixed}): standard "
                f"'{clip(str(standard))}' has no {'integer' if dtype.is_integer else 'complex'} rule; drop it")
    if tolerance:
        return f"a {dtype.name} output is judged {how} (standard {fixed}): it takes no tolerance; drop it"
    return None


def find_standard(name: str, fixed: bool = False) -> Standard:
    """A standard a run or a case may name; fixed: also the one judging complex outputs (judging._standard)."""
    if fixed and name in FIXED:
        return FIXED[name]
    if name in FIXED:
        raise KeyError(f"standard '{name}' judges every complex output, whatever is named, and only them: it cannot "
                       f"be named (valid: {', '.join(STANDARDS)})")
    if name not in STANDARDS:
        raise KeyError(f"unknown standard '{name}' (valid: {', '.join(STANDARDS)})")
    return STANDARDS[name]
