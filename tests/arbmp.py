"""The textbooks on arb balls (python-flint): an mpmath-like namespace, and their products rounded to 16 bits.

The ops' textbook(x, attrs, mp) formulas are written for mpmath; evaluated once per 16-bit input at 200 bits they
made the tests' oracles their slowest part. Here `mp` is ARB, a namespace over flint.arb offering what the
textbooks call (mpf, exp, sqrt, pi, log1p, tanh, sech, ..., mp.prec, workprec): the same formula, about four times
cheaper, and rigorous: each result is a ball [mid - rad, mid + rad] that holds the exact value.

Where arb cannot vouch for a result the caller falls back to mpmath, as before this module:
  - an element: a comparison or a truth test the balls leave open (they overlap), a ball whose radius is not tiny
    next to its midpoint (or that holds zero while the value may not be zero), a rounding the ball leaves open
    (it straddles a midpoint of the 16-bit grid);
  - an op: its textbook calls anything the namespace lacks, float()s a ball or mixes in a foreign number.
(Undecided and Fallback, raised inside the textbook.) round_products rounds with exact integers (tests/oracle.py's fraction_bits) wherever the
float64 of the midpoint is not clearly off the grid's midpoints, and checks itself against mpmath on a random
sample of every sweep, so a shim bug cannot pass silently.

Nothing here comes from aclnn_cli (tests/oracle.py's independence is kept).
"""

from __future__ import annotations

import contextlib
import math

import flint
import mpmath
import numpy as np

from exactq import Fraction
from oracle import _FORMATS, D_NP, PREC, Rounder, fraction_bits

# A result is used only if its radius is at most 2^-60 of its midpoint (a 200-bit evaluation keeps ~2^-190).
TIGHT = 2.0**-60
# float(ball) is the midpoint rounded to float64 (to nearest; 2^-52 allowed for any direction); with the radius,
# the value is within 2^-51 of it. A float64 further than 2^-48 from every midpoint of the 16-bit grid rounds as the value does.
CLEAR = 2.0**-48
_TIGHT = flint.arb(TIGHT)
RETRY = 4 * PREC  # the precision of a second try where PREC leaves a ball wide


class Fallback(Exception):
    """arb cannot evaluate this textbook (a name the namespace lacks, a foreign number, float() of a ball): the op's
    sweep goes to mpmath."""


class Undecided(Fallback):
    """A comparison or truth test the balls leave open: this element goes to mpmath."""


class _Prec(int):
    """The namespace's mp.prec: an int that is not equal to (nor hashes like) the same mpmath precision, so that a
    textbook's constants cached by precision (gelu's, selu's) keep their balls apart from their mpf values."""

    def __eq__(self, other):
        return type(other) is _Prec and int(self) == int(other)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(("arb", int(self)))


def _arb(v) -> flint.arb:
    """An exact operand as arb (the namespace's own balls, Python ints and floats); anything else is foreign."""
    if type(v) is Ball:
        return v.b
    if type(v) in (int, bool) or type(v) is float and math.isfinite(v):
        return flint.arb(v)
    raise Fallback(f"a {type(v).__name__} operand")


def _decided(yes: bool, no: bool) -> bool:
    if yes:
        return True
    if no:
        return False
    raise Undecided("a comparison the balls leave open")


class Ball:
    """An arb ball that behaves as an mpf in a textbook: arithmetic on balls, comparisons only where decided."""

    __slots__ = ("b",)
    __hash__ = None

    def __init__(self, b: flint.arb):
        self.b = b

    def __add__(self, o):
        return Ball(self.b + (o.b if type(o) is Ball else _arb(o)))

    def __radd__(self, o):
        return Ball(_arb(o) + self.b)

    def __sub__(self, o):
        return Ball(self.b - (o.b if type(o) is Ball else _arb(o)))

    def __rsub__(self, o):
        return Ball(_arb(o) - self.b)

    def __mul__(self, o):
        return Ball(self.b * (o.b if type(o) is Ball else _arb(o)))

    def __rmul__(self, o):
        return Ball(_arb(o) * self.b)

    def __truediv__(self, o):
        return Ball(self.b / (o.b if type(o) is Ball else _arb(o)))

    def __rtruediv__(self, o):
        return Ball(_arb(o) / self.b)

    def __pow__(self, o):
        return Ball(self.b ** (o if type(o) is int else _arb(o)))

    def __rpow__(self, o):
        return Ball(_arb(o) ** self.b)

    def __neg__(self):
        return Ball(-self.b)

    def __pos__(self):
        return self

    def __abs__(self):
        return Ball(abs(self.b))

    def __lt__(self, o):
        o = _arb(o)
        return _decided(self.b < o, self.b >= o)

    def __le__(self, o):
        o = _arb(o)
        return _decided(self.b <= o, self.b > o)

    def __gt__(self, o):
        o = _arb(o)
        return _decided(self.b > o, self.b <= o)

    def __ge__(self, o):
        o = _arb(o)
        return _decided(self.b >= o, self.b < o)

    def __eq__(self, o):
        o = _arb(o)
        return _decided(self.b == o, self.b != o)

    def __ne__(self, o):
        return not self == o

    def __bool__(self):
        return _decided(not self.b.contains(0), self.b.is_zero())

    def __float__(self):
        raise Fallback("float() of a ball")

    def __int__(self):
        raise Fallback("int() of a ball")

    __index__ = __int__

    def __repr__(self):
        return f"Ball({self.b})"


def _unary(name):
    method = getattr(flint.arb, name)

    def f(x):
        return Ball(method(x.b if type(x) is Ball else _arb(x)))
    f.__name__ = name
    return staticmethod(f)


_CONSTANTS: dict = {}  # mpf(v) of a textbook's constants: a number's ball (exact) once, a decimal's once per precision


class _Context:
    """mp.mp: the working precision (the namespace's own, as _Prec)."""

    __slots__ = ()

    @property
    def prec(self):
        return _Prec(flint.ctx.prec)

    def __getattr__(self, name):
        raise Fallback(f"mp.mp.{name}")


class _Namespace:
    """What a textbook's `mp` offers: mpmath's names over arb. Any other name raises Fallback."""

    mp = _Context()
    exp, sqrt, log, log1p, expm1 = (_unary(n) for n in ("exp", "sqrt", "log", "log1p", "expm1"))
    tanh, sech, cosh, sinh, erf = (_unary(n) for n in ("tanh", "sech", "cosh", "sinh", "erf"))

    @staticmethod
    def mpf(v=0):
        if type(v) is Ball:
            return v
        key = (v, flint.ctx.prec) if type(v) is str else (type(v), v)
        ball = _CONSTANTS.get(key)
        if ball is None:  # (a decimal: the ball that holds it, at the working precision)
            ball = _CONSTANTS[key] = Ball(flint.arb(v) if type(v) is str else _arb(v))
        return ball

    @property
    def pi(self):
        return Ball(flint.arb.pi())

    @staticmethod
    def fabs(x):
        return abs(Ball(_arb(x)))

    @staticmethod
    @contextlib.contextmanager
    def workprec(n):
        with precision(int(n)):
            yield

    def __getattr__(self, name):
        raise Fallback(f"mp.{name}")


ARB = _Namespace()


@contextlib.contextmanager
def precision(bits: int = PREC):
    """flint's working precision (a global) set to bits, restored after."""
    old = flint.ctx.prec
    flint.ctx.prec = bits
    try:
        yield
    finally:
        flint.ctx.prec = old


# ------------------------------------------------------------------ the textbook over a sweep

def textbook_sweep(textbook, xs: np.ndarray, attrs: dict) -> tuple[list, int]:
    """(entries, how many fell back): textbook(x) at 200 bits for each finite float64 x, None where x is not finite.
    An entry is an arb ball where the shim vouches for it, else the mpf of mpmath's own evaluation."""
    out, fallen = [], 0
    in_arb = True
    with precision(PREC):
        for x in xs.tolist():
            if not math.isfinite(x):
                out.append(None)
                continue
            v = None
            if in_arb:
                try:
                    v = _ball(textbook, x, attrs)
                except Fallback:
                    in_arb = False
            if v is None:
                fallen += 1
                with mpmath.workprec(PREC):
                    v = textbook(mpmath.mpf(x), attrs, mpmath)
            out.append(v)
    return out, fallen


def _ball(textbook, x: float, attrs: dict) -> flint.arb | None:
    """textbook(x) as a tight ball at PREC bits (the sweep's precision), else at RETRY bits (an exponential of a huge
    argument needs more than 200 bits to be reduced), else None (Undecided there too, or still wide)."""
    try:
        v = _result(textbook(Ball(flint.arb(x)), attrs, ARB))
        if _tight(v):
            return v
    except Undecided:
        pass
    with precision(RETRY):
        try:
            v = _result(textbook(Ball(flint.arb(x)), attrs, ARB))
        except Undecided:
            return None
        return v if _tight(v) else None


def _result(v) -> flint.arb:
    if type(v) is Ball:
        return v.b
    return _arb(v)


def _tight(b: flint.arb) -> bool:
    """The ball is exact, or it excludes zero and its radius is at most TIGHT of its midpoint (compared in arb:
    exact values, and no float64 underflow for a value like e^-65504)."""
    if b.is_exact():
        return True
    return b.is_finite() and not b.contains(0) and b.rad() <= abs(b.mid()) * _TIGHT


# ------------------------------------------------------------------ rounding the products

def fraction(b: flint.arb) -> Fraction:
    """An exact ball (a midpoint, a radius) as the Fraction of the same value."""
    man, exp = (int(v) for v in b.man_exp())
    return Fraction(man << exp) if exp >= 0 else Fraction(man, 1 << -exp)


def as_mpf(b: flint.arb) -> mpmath.mpf:
    """An exact ball (a midpoint, a radius) as the mpf of the same value."""
    man, exp = (int(v) for v in b.man_exp())
    with mpmath.workprec(max(man.bit_length(), 53)):
        return mpmath.mpf((man, exp))


def mpf_fraction(v: mpmath.mpf) -> Fraction:
    """A finite mpf as the Fraction of the same value."""
    sign, man, exp, _ = v._mpf_
    assert man or not exp, f"not finite: {v}"  # (mpmath's zero is (0, 0, 0, 0); inf and nan have man 0, exp != 0)
    man = -int(man) if sign else int(man)
    return Fraction(man << exp) if exp >= 0 else Fraction(man, 1 << -exp)


_TINY, _HUGE = 2 ** -1000, 2 ** 1000  # (exact as arb and mpf operands)


def ball_bits(b: flint.arb, name: str) -> int | None:
    """The 16-bit pattern every value in the ball rounds to (ties to even; a nonzero value under half the smallest
    subnormal keeps its sign), or None where the ball's ends round apart. In integers (fraction_bits)."""
    if b.is_zero():
        return 0
    if b.contains(0) or not b.is_finite():
        return None
    if b.abs_upper() < flint.arb(_TINY):  # (a zero of its sign: far under half the smallest 16-bit subnormal)
        return 0x8000 if b < 0 else 0
    if b.abs_lower() > flint.arb(_HUGE):  # (far beyond the largest finite 16-bit value: an infinity of its sign)
        return fraction_bits(Fraction(-(2**1000) if b < 0 else 2**1000), name)
    if b.is_exact():
        return fraction_bits(fraction(b.mid()), name)
    mid, rad = fraction(b.mid()), fraction(b.rad())
    lo, hi = fraction_bits(mid - rad, name), fraction_bits(mid + rad, name)
    return lo if lo == hi else None


def ball_float(b: flint.arb, name: str) -> float | None:
    """The value every number in the ball rounds to in float32, float16 or bfloat16 (named), or None (ball_bits).
    A tight ball whose float64 is clearly off the rounding boundaries (by CLEAR) is rounded in float64."""
    quick = _quick(b, name)
    if quick is not None:
        return quick
    bits = ball_bits(b, name)
    if bits is None:
        return None
    if name == "float32":
        return float(np.array(bits, np.uint32).view(np.float32))
    return float(np.array(bits, np.uint16).view(D_NP[name]).astype(np.float64))


def _quick(b: flint.arb, name: str) -> float | None:
    f = float(b)
    if float(b.rad()) > TIGHT * abs(f):
        return None
    return quick_round(f, name)


def quick_round(f: float, name: str) -> float | None:
    """f (within 2^-51 of a value, relative) rounded to float32, float16 or bfloat16 (named) as the value rounds,
    where f is clearly off the rounding boundaries (by CLEAR); else None. In float64: a power-of-two scaling, a
    floor."""
    a = abs(f)
    if not 2.0**-1000 < a < 2.0**1000:
        return None
    p, emin, emax = _FORMATS[name]
    e = max(math.frexp(a)[1] - 1, emin)  # (2^e <= a < 2^(e+1) for a normal a)
    t = math.ldexp(a, p - 1 - e)  # a in quanta (exact: a power-of-two scaling)
    whole = math.floor(t)
    if abs(t - whole - 0.5) <= CLEAR * t:
        return None
    v = math.ldexp(whole + (t - whole > 0.5), e - p + 1)
    if v > math.ldexp(2 - 2.0 ** (1 - p), emax):
        v = math.inf
    return math.copysign(v, f)


def round_products(dy: float, entries: list, r: Rounder, exact_in_mpmath, sample: int = 300,
                   seed: int = 0) -> tuple[np.ndarray, int]:
    """(bits, how many went to mpmath): dy * entry rounded once to r's dtype for every entry of textbook_sweep.

    Balls: the float64 of the product's midpoint decides where it is clearly off every midpoint of the 16-bit grid
    (the ball being tight); else the ball's ends in integers; where those round apart (a product on or next to a
    tie of the grid), and for mpf entries, exact_in_mpmath(k) (dy times the textbook in mpmath at 200 bits) rounded
    by Rounder, as the oracle did before. On `sample` random entries the bits are checked against that mpmath
    value rounded by Rounder, and every ball against the mpmath value: the ball holds it to 2^-180 (where it is
    neither under 2^-1000 nor over 2^1000)."""
    name = np.dtype(r.np_dtype).name
    g = flint.arb(dy)
    with precision(PREC):
        balls = [e if type(e) is not flint.arb else (e if dy == 1 else g * e) for e in entries]
    n = len(balls)
    is_ball, f, rad = np.zeros(n, bool), np.zeros(n), np.zeros(n)
    for k, b in enumerate(balls):
        if type(b) is flint.arb:
            is_ball[k], f[k], rad[k] = True, float(b), float(b.rad())
    a = np.abs(f)
    keep = r.values >= 0
    inf_bits = int(np.array(np.inf).astype(r.np_dtype).view(np.uint16))
    grid = np.append(r.values[keep], r.overflow)
    gbits = np.append(r.bits[keep].astype(np.int64), inf_bits)
    i = np.clip(np.searchsorted(grid, a), 1, grid.size - 1)
    mid = (grid[i - 1] + grid[i]) / 2
    bits = gbits[np.where(a < mid, i - 1, i)] | np.where(f < 0, 0x8000, 0)
    with np.errstate(invalid="ignore"):
        sure = is_ball & (np.abs(a - mid) > CLEAR * a) & (a >= 2.0**-1000) & np.isfinite(a) & (rad <= TIGHT * a)
    fallen = 0
    for k in np.flatnonzero(~sure):
        got = ball_bits(balls[k], name) if is_ball[k] else None
        if got is None:
            with mpmath.workprec(PREC):
                got = r(exact_in_mpmath(k))
            fallen += 1
        bits[k] = got
    rng = np.random.default_rng(seed)
    for k in rng.choice(len(balls), min(sample, len(balls)), replace=False):
        with mpmath.workprec(PREC):
            v = exact_in_mpmath(k)
            assert bits[k] == r(v), (k, str(balls[k]), v)
            if is_ball[k] and _TINY < abs(v) < _HUGE:  # (beyond, both are a zero or an infinity; and mpmath's
                m, rd = as_mpf(balls[k].mid()), as_mpf(balls[k].rad())  # e^-2u of a u near 1e90 has not one bit right)
                assert abs(v - m) <= rd + abs(v) * mpmath.mpf(2) ** -180, (k, str(balls[k]), v)
    return bits, fallen
