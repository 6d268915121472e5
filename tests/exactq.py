"""The tests' one import point for exact rationals: `Fraction` is quicktions.Fraction, a Cython drop-in for the
standard library's fractions.Fraction (the same API, values, hashing and rounding, several times faster).

Why: the oracles' Fractions (tests/oracle.py, the per-file `oracle()` helpers, ...) were about a fifth of the op
tests' time. The package itself stays on the standard library (its runtime dependencies are fixed), so two
types meet in a test:
- values the package makes, and values a test hands the package in its place (an op's `exact` receives object
  arrays of fractions.Fraction from golden/rows.py): `PackageFraction`, so the product runs on what it runs on;
- `isinstance` on a value that may come from either side: `RATIONAL` (both types; numbers.Rational would also
  take bool and int subclasses);
- equality, ordering and hashing across the two types are exact (both compare by numerator and denominator), but
  mixed arithmetic falls back to fractions.Fraction's slow path: convert a package value once (Fraction(v)) before
  an oracle computes with it.
"""

from __future__ import annotations

from fractions import Fraction as PackageFraction

from quicktions import Fraction

RATIONAL = (Fraction, PackageFraction)

__all__ = ["Fraction", "PackageFraction", "RATIONAL"]
