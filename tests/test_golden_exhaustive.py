"""Every fp16 and bf16 value of the op's second input, dy = 1 and one other dy, every attribute set the
op names: golden == the correctly rounded exact result.

Discovered from the op declarations: every op that declares `textbook` (the doc's formula, written
for mpmath) is checked, bundled or loaded as a user op. The oracle is that formula at 200 bits on
arb balls (tests/arbmp.py: rigorous, its rounding decided in integers where the float64 of a ball is
not clearly off the grid's midpoints), in mpmath wherever arb cannot vouch for an element (and on a
random sample of every sweep, which must agree), rounded by tests/oracle.py's nearest-candidate
search: it shares no code with the golden's float64 reference, its certified rounding or its Decimal
exact path.
"""

from __future__ import annotations

import functools

import mpmath
import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops import OPS, OpSpec

import arbmp
from oracle import PREC, rounder

DTYPES = [D.FLOAT16, D.BFLOAT16]
# A gradient with a full significand and a small exponent, so many results land among subnormals.
OTHER_DY = -0.0013
DECLARED = sorted(name for name, op in OPS.items() if op.textbook is not None)
CASES = [(name, i) for name in DECLARED for i in range(len(OPS[name].oracle_attributes))]


def all_values(dtype: D.DType) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype.np_dtype)


def _attributes(op_name: str, index: int) -> dict:
    return dict(OPS[op_name].oracle_attributes[index])


@functools.lru_cache(maxsize=None)
def oracle_factors(op_name: str, dtype_name: str, index: int) -> tuple:
    """textbook(x) at 200 bits for every 16-bit x (None where x is not finite): an arb ball, or mpmath's mpf where
    arb cannot vouch for it (tests/arbmp.py)."""
    op, attrs = OPS[op_name], _attributes(op_name, index)
    xs = all_values(D.lookup(dtype_name)).astype(np.float64)
    return tuple(arbmp.textbook_sweep(op.textbook, xs, attrs)[0])


def _label(case) -> str:
    name, index = case
    attrs = _attributes(name, index)
    return OPS[name].key + ("-" + "-".join(f"{k}{v}" for k, v in attrs.items()) if attrs else "")


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES, ids=_label)
@pytest.mark.parametrize("dy_value", [1.0, OTHER_DY], ids=["dy=1", "dy=other"])
def test_golden_is_correctly_rounded_for_every_16bit_input(case, dtype, dy_value):
    op_name, index = case
    op, attrs = OPS[op_name], _attributes(op_name, index)
    x = all_values(dtype)
    dy = np.full(x.shape, dy_value, dtype=np.float64).astype(np.float32).astype(dtype.np_dtype)
    first, second = op.inputs[0].name, op.inputs[1].name
    inputs = {t.name: np.zeros_like(x) for t in op.inputs} | {first: dy, second: x}
    got, _ = golden(op, inputs, dtype, attrs)
    factors = oracle_factors(op_name, dtype.name, index)
    finite = [i for i, f in enumerate(factors) if f is not None]
    assert len(finite) > 60000
    xs = x.astype(np.float64)

    def in_mpmath(k):  # dy times the textbook in mpmath at 200 bits (the oracle before tests/arbmp.py)
        i = finite[k]
        with mpmath.workprec(PREC):
            f = factors[i] if isinstance(factors[i], mpmath.mpf) else op.textbook(mpmath.mpf(float(xs[i])), attrs, mpmath)
            return mpmath.mpf(float(dy[0])) * f

    want, _ = arbmp.round_products(float(dy[0]), [factors[i] for i in finite], rounder(dtype.np_dtype), in_mpmath)
    have = got.view(np.uint16)[finite].astype(np.int64)
    bad = np.flatnonzero(have != want)
    assert bad.size == 0, f"{bad.size} elements not correctly rounded, first: " + str(
        [(float(x[finite[k]]), hex(have[k]), hex(want[k])) for k in bad[:5]])


def test_every_bundled_op_is_checked_against_an_oracle():
    """A bundled op declares its textbook formula (then the test above covers it) or names the oracle test of its
    own in the conformance table (tests/conformance.py ENTRIES: an op whose oracle needs a faster method than one
    mpmath call per input; test_conformance.py checks that the named test exists). Ops with attributes name at
    least two attribute sets."""
    import importlib
    import pkgutil

    import aclnn_cli.ops as package
    from conformance import ENTRIES, TEXTBOOK

    modules = [importlib.import_module(m.name) for m in pkgutil.walk_packages(package.__path__, "aclnn_cli.ops.")]
    bundled = [m.SPEC for m in modules if isinstance(getattr(m, "SPEC", None), OpSpec)]
    assert len(bundled) >= 10
    for op in bundled:
        oracle = ENTRIES.get(op.key, (None,))[0]
        assert (op.textbook is not None) == (oracle == TEXTBOOK) and oracle is not None, \
            f"{op.name} has no exhaustive oracle test: declare textbook= in its OpSpec, or name its own in ENTRIES"
        if op.textbook is not None and op.attributes:
            assert len(op.oracle_attributes) >= 2, f"{op.name}: oracle_attributes needs two or more sets"


def test_the_oracle_catches_a_golden_one_ulp_off():
    """The comparison above can fail: a golden nudged by one ulp at one input is found."""
    op = OPS["aclnnSiluBackward"]
    x = all_values(D.FLOAT16)[:4096]
    dy = np.ones_like(x)
    got, _ = golden(op, {"gradOutput": dy, "self": x}, D.FLOAT16)
    bits = got.view(np.uint16).copy()
    finite = np.flatnonzero(np.isfinite(x.astype(np.float64)) & (bits & 0x7FFF != 0))
    bits[finite[100]] += 1
    r = rounder(D.FLOAT16.np_dtype)
    with mpmath.workprec(PREC):
        wrong = [i for i in finite[:200]
                 if int(bits[i]) != r(op.textbook(mpmath.mpf(float(x[i])), {}, mpmath))]
    assert wrong == [finite[100]]
