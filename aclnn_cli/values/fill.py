"""Input generators ("fills"): how a case file says what values an input holds.

Random fills are drawn in fixed blocks of BLOCK elements, each seeded from
(seed, tensor slot, block number). Any chunk of a tensor can therefore be
produced on its own, and the bytes never depend on chunk size, worker count
or machine. Values are drawn in float64 and rounded once into the dtype; `randint` draws integers
(an integer tensor's fill; float fills on one must give integers of its range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..tensor.dtypes import DType, round_from_f64
from ..files.text import show

BLOCK = 1 << 16
MAX_SEED = 2**63 - 1  # a case's seed, what every fill of it draws from: a non-negative int64


@dataclass(frozen=True)
class Fill:
    """A generator: parsed from its case-file argument, checked against a dtype, described in the
    manifest (and fingerprint), and drawn for any range of logical elements. One subclass each."""

    params: tuple
    kind: ClassVar[str] = ""

    @classmethod
    def parse(cls, arg) -> "Fill":
        raise NotImplementedError

    def check(self, dtype: DType) -> str | None:
        """Why these values cannot be represented in dtype, or None."""
        if dtype.is_integer:
            return _integers(self.params, dtype, self.kind)
        for v in self.params:
            if math.isfinite(v) and abs(v) > dtype.max_finite:
                return f"value {v:g} overflows {dtype.name} (max {dtype.max_finite:g})"
        return None

    def describe(self) -> dict:
        return {self.kind: [_json_float(v) for v in self.params]}

    def generate(self, dtype: DType, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
        raise NotImplementedError


@dataclass(frozen=True)
class _Random(Fill):
    """Drawn in float64 in blocks of BLOCK elements seeded from (seed, slot, block), rounded once."""

    @classmethod
    def parse(cls, arg) -> Fill:
        if not isinstance(arg, (list, tuple)) or len(arg) != 2:
            raise ValueError(f"'{cls.kind}' takes two numbers, got {show(arg)}")
        a, b = (parse_number(v) for v in arg)
        if not (math.isfinite(a) and math.isfinite(b)):
            raise ValueError(f"'{cls.kind}' bounds must be finite, got {show(arg)}")
        cls._check_args(a, b, arg)
        return cls((a, b))

    @classmethod
    def _check_args(cls, a: float, b: float, arg) -> None:
        pass

    def check(self, dtype: DType) -> str | None:
        if dtype.is_integer:
            return f"'{self.kind}' draws non-integers; {dtype.name} tensors take randint, constant or values"
        return super().check(dtype)

    def generate(self, dtype: DType, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
        return round_from_f64(self._scale(_draws(self._draw, seed, slot, start, stop)), dtype)

    @staticmethod
    def _draw(rng: np.random.Generator, n: int) -> np.ndarray:
        raise NotImplementedError

    def _scale(self, raw: np.ndarray) -> np.ndarray:
        raise NotImplementedError


@dataclass(frozen=True)
class Uniform(_Random):
    """{uniform: [lo, hi]}"""

    kind: ClassVar[str] = "uniform"

    @classmethod
    def _check_args(cls, a: float, b: float, arg) -> None:
        if a > b:
            raise ValueError(f"'uniform' needs lo <= hi, got {show(arg)}")

    @staticmethod
    def _draw(rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.random(n)

    def _scale(self, raw: np.ndarray) -> np.ndarray:
        a, b = self.params
        return a + (b - a) * raw


@dataclass(frozen=True)
class Normal(_Random):
    """{normal: [mean, std]}"""

    kind: ClassVar[str] = "normal"

    @classmethod
    def _check_args(cls, a: float, b: float, arg) -> None:
        if b < 0:
            raise ValueError(f"'normal' needs std >= 0, got {show(arg)}")

    def check(self, dtype: DType) -> str | None:
        if dtype.is_integer:  # (ATK's nd on an integer tensor: the draws cast, see generate)
            return None
        mean, std = self.params
        span = abs(mean) + 6 * std
        return None if span <= dtype.max_finite else \
            f"normal {list(self.params)} overflows {dtype.name} (max {dtype.max_finite:g})"

    def generate(self, dtype: DType, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
        """An integer tensor's draws rounded toward zero (a C cast of the float draws, as ATK's integer inputs
        given an nd distribution are) and held at the dtype's range; a float tensor's rounded once."""
        if not dtype.is_integer:
            return super().generate(dtype, seed, slot, start, stop)
        lo, hi = dtype.int_range
        return np.clip(np.trunc(self._scale(_draws(self._draw, seed, slot, start, stop))), lo, hi).astype(dtype.np_dtype)

    @staticmethod
    def _draw(rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.standard_normal(n)

    def _scale(self, raw: np.ndarray) -> np.ndarray:
        a, b = self.params
        return a + b * raw


@dataclass(frozen=True)
class Constant(Fill):
    """{constant: v}"""

    kind: ClassVar[str] = "constant"

    @classmethod
    def parse(cls, arg) -> Fill:
        return cls((parse_number(arg),))

    def describe(self) -> dict:
        return {"constant": _json_float(self.params[0])}

    def generate(self, dtype: DType, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
        return round_from_f64(np.full(stop - start, self.params[0]), dtype)


@dataclass(frozen=True)
class Values(Fill):
    """{values: [v0, v1, ...]}: repeated in logical order."""

    kind: ClassVar[str] = "values"

    @classmethod
    def parse(cls, arg) -> Fill:
        if not isinstance(arg, (list, tuple)) or not arg:
            raise ValueError(f"'values' takes a non-empty list, got {show(arg)}")
        return cls(tuple(v if _is_int(v) and _beyond_float64(v) else parse_number(v) for v in arg))

    def generate(self, dtype: DType, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
        """Integers as integers (an int64 past 2^53 kept exact; `check` has made sure each fits the dtype)."""
        at = np.arange(start, stop) % len(self.params)
        if dtype.is_integer:
            return np.array([int(v) for v in self.params], dtype=np.int64)[at].astype(dtype.np_dtype)
        return round_from_f64(np.array(self.params, dtype=np.float64)[at], dtype)


def _beyond_float64(v: int) -> bool:
    """An integer float64 does not hold exactly (int64's past 2^53): kept as int, so an int64 tensor gets it exact.
    Every other value is a float, as before (a case's fingerprint is made from them)."""
    try:
        return float(v) != v
    except OverflowError:
        return False  # (parse_number says it is beyond float64)


@dataclass(frozen=True)
class _Flag(Fill):
    """A generator whose one argument is `true` ({all_values: true}, {derived: true})."""

    @classmethod
    def parse(cls, arg) -> Fill:
        if arg is not True:
            raise ValueError(f"'{cls.kind}' takes true, got {show(arg)}")
        return cls(())

    def describe(self) -> dict:
        return {self.kind: True}


@dataclass(frozen=True)
class AllValues(_Flag):
    """{all_values: true}: every bit pattern of a 16-bit dtype, in order."""

    kind: ClassVar[str] = "all_values"

    def check(self, dtype: DType) -> str | None:
        return None if dtype.is16bit else f"'all_values' needs a 16-bit dtype, not {dtype.name}"

    def generate(self, dtype: DType, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
        return np.arange(start, stop, dtype=np.int64).astype(dtype.uint_dtype).view(dtype.np_dtype)


@dataclass(frozen=True)
class RandInt(Fill):
    """{randint: [lo, hi]} (inclusive), optionally with sprinkle: {value: v, share: p} (a share p of the
    elements set to v: NLL's ignoreIndex among class indices). Params: (lo, hi) or (lo, hi, v, p).

    Integers come from the same per-block streams as the float fills (chunk-independent); the sprinkle
    from a second stream per block, so the drawn integers are the same with or without it."""

    kind: ClassVar[str] = "randint"

    @classmethod
    def parse(cls, arg) -> Fill:
        spec = arg if isinstance(arg, dict) else {"randint": arg}
        extra = [k for k in spec if k not in ("randint", "sprinkle")]
        if extra:
            raise ValueError(f"'randint' takes only 'sprinkle' beside it, got {show(extra[0])}")
        bounds = spec["randint"]
        if not isinstance(bounds, (list, tuple)) or len(bounds) != 2 or not all(_is_int(v) for v in bounds):
            raise ValueError(f"'randint' takes two integers [lo, hi], got {show(bounds)}")
        lo, hi = (int(v) for v in bounds)
        if lo > hi:
            raise ValueError(f"'randint' needs lo <= hi, got {show(bounds)}")
        if not (-2**63 <= lo and hi < 2**63):
            raise ValueError(f"'randint' bounds must be int64 integers, got {show(bounds)}")
        if "sprinkle" not in spec:
            return cls((lo, hi))
        sp = spec["sprinkle"]
        if not isinstance(sp, dict) or set(sp) != {"value", "share"}:
            raise ValueError(f"'sprinkle' is {{value: v, share: p}}, got {show(sp)}")
        value, share = sp["value"], sp["share"]
        if not _is_int(value) or not -2**63 <= value < 2**63:
            raise ValueError(f"'sprinkle' value must be an int64 integer, got {show(value)}")
        p = parse_number(share)
        if not 0 <= p <= 1:
            raise ValueError(f"'sprinkle' share must be in [0, 1], got {show(share)}")
        return cls((lo, hi, int(value), p))

    def check(self, dtype: DType) -> str | None:
        return _integers(self.params[:2] + self.params[2:3], dtype, self.kind)

    def describe(self) -> dict:
        out: dict = {"randint": list(self.params[:2])}
        if len(self.params) == 4:
            out["sprinkle"] = {"value": self.params[2], "share": self.params[3]}
        return out

    def generate(self, dtype: DType, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
        lo, hi = self.params[:2]
        ints = _draws(lambda rng, n: rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64),
                      seed, slot, start, stop, np.int64)
        if len(self.params) == 4:
            hit = _draws(lambda rng, n: rng.random(n), seed, slot, start, stop, stream=1) < self.params[3]
            ints[hit] = self.params[2]
        if dtype.is_integer:
            return ints.astype(dtype.np_dtype)  # (check: every value is in the dtype's range)
        return round_from_f64(ints.astype(np.float64), dtype)


@dataclass(frozen=True)
class NonzeroInt(Fill):
    """{nonzero_int: r}: integers drawn uniformly from [-r, -1] and [1, r] (`fill: exact`'s operands: no term of a
    sum is a zero, so no sum's sign of zero depends on the order it is added in, and the magnitudes are bounded)."""

    kind: ClassVar[str] = "nonzero_int"

    @classmethod
    def parse(cls, arg) -> Fill:
        if not _is_int(arg) or not 1 <= arg <= 1 << 24:
            raise ValueError(f"'nonzero_int' takes an integer r in [1, 2^24] (values in [-r, -1] and [1, r]), "
                             f"got {show(arg)}")
        return cls((int(arg),))

    def check(self, dtype: DType) -> str | None:
        return _integers((-self.params[0], self.params[0]), dtype, self.kind)

    def describe(self) -> dict:
        return {self.kind: self.params[0]}

    def generate(self, dtype: DType, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
        r = self.params[0]
        k = _draws(lambda rng, n: rng.integers(-r, r, size=n, dtype=np.int64), seed, slot, start, stop, np.int64)
        ints = np.where(k >= 0, k + 1, k)  # ([-r, r) uniform, the zero moved to r)
        if dtype.is_integer:
            return ints.astype(dtype.np_dtype)
        return round_from_f64(ints.astype(np.float64), dtype)


@dataclass(frozen=True)
class Derived(_Flag):
    """{derived: true}: the op computes this input from its other inputs (OpSpec.derived: MaxPool's indices, the
    forward's argmax of self). It cannot be drawn on its own: gen writes it block by block after the inputs it is
    made from (golden/derived.py). A case that gives the tensor another fill (explicit values) replaces it."""

    kind: ClassVar[str] = "derived"

    def check(self, dtype: DType) -> str | None:
        return None

    def generate(self, dtype: DType, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
        raise ValueError("a derived input is computed from the op's other inputs (golden/derived.py), not drawn")


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _integers(values: tuple, dtype: DType, kind: str) -> str | None:
    """Why a fill's values are not all integers dtype holds exactly (an integer tensor; randint on a float one)."""
    lo, hi = dtype.int_range
    for v in values:
        if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
            return f"'{kind}' value {v:g} is not an integer, as {dtype.name} needs"
        if not lo <= v <= hi:
            held = "holds" if dtype.is_integer else "holds exactly"
            return f"'{kind}' value {int(v)} is outside what {dtype.name} {held}, [{lo}, {hi}]"
    return None


from .complexfill import Complex, on_complex  # noqa: E402 (it builds on the fills above)

GENERATORS: dict[str, type[Fill]] = {g.kind: g for g in (Uniform, Normal, Constant, Values, AllValues, RandInt,
                                                         NonzeroInt, Derived, Complex)}
KINDS = tuple(GENERATORS)


def _json_float(v: float) -> float | str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0 and math.copysign(1, v) < 0:
        return "-0.0"
    return v


def parse_number(value) -> float:
    """A YAML scalar as a float; accepts nan, inf, -inf and -0.0 spelled as strings too."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {show(value)}")
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an int beyond float64: no dtype holds it
            raise ValueError(f"number {show(value)} is beyond float64's range") from None
    if isinstance(value, str):
        text = value.strip().lower().lstrip("+")
        named = {"nan": math.nan, ".nan": math.nan, "inf": math.inf, ".inf": math.inf,
                 "-inf": -math.inf, "-.inf": -math.inf, "infinity": math.inf, "-infinity": -math.inf}
        if text in named:
            return named[text]
        try:
            return float(text)
        except ValueError:
            pass
    raise ValueError(f"expected a number, got {show(value)}")


def parse_fill(spec) -> Fill:
    """Parse `{uniform: [lo, hi]}` and friends; ValueError says what is wrong."""
    if isinstance(spec, dict) and "randint" in spec:  # (the one generator with an option beside it: sprinkle)
        return RandInt.parse(spec)
    if not isinstance(spec, dict) or len(spec) != 1:
        raise ValueError(f"a generator is one of {{{', '.join(KINDS)}}} with its argument, got {show(spec)}")
    (kind, arg), = spec.items()
    if kind not in GENERATORS:
        raise ValueError(f"unknown generator {show(kind)} (valid: {', '.join(KINDS)})")
    return GENERATORS[kind].parse(arg)


def check_fits(fill: Fill, dtype: DType) -> str | None:
    """Why this fill cannot be represented in dtype, or None (on a complex tensor: in its component dtype)."""
    if dtype.is_complex and not isinstance(fill, Complex):
        if isinstance(fill, AllValues):
            return f"'{fill.kind}' does not fill a complex tensor; give each part its fill: {{complex: [REAL, IMAG]}}"
        return fill.check(dtype.component)
    return fill.check(dtype)


def all_values_count(dtype: DType) -> int:
    return 1 << (8 * dtype.itemsize)


def generate(fill: Fill, dtype: DType, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
    """Logical elements [start, stop) of a tensor filled by `fill`, in `dtype`."""
    if dtype.is_complex and not isinstance(fill, Complex):
        return on_complex(fill, dtype, seed, slot, start, stop)
    return fill.generate(dtype, seed, slot, start, stop)


def _draws(draw, seed: int, slot: int, start: int, stop: int, dtype=np.float64, stream: int = 0) -> np.ndarray:
    """Raw draws for logical elements [start, stop): block by block, each from its own seeded stream
    (stream > 0: another stream of the same blocks, e.g. randint's sprinkle)."""
    out = np.empty(stop - start, dtype=dtype)
    first, last = start // BLOCK, (stop - 1) // BLOCK if stop > start else start // BLOCK - 1
    for block in range(first, last + 1):
        key = [seed, slot, block] + ([stream] if stream else [])
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(key)))
        lo, hi = max(start, block * BLOCK), min(stop, (block + 1) * BLOCK)
        # Draws are sequential: the first k of a block are the same however many are drawn, so a small
        # tensor draws only what it needs (pinned across the block boundary by tests).
        raw = draw(rng, hi - block * BLOCK)
        out[lo - start:hi - start] = raw[lo - block * BLOCK:hi - block * BLOCK]
    return out
