"""What a user op's functions return is held to what their fields promise, one line (exit 2) where it is not:

- a `reference` returns a Reference per output (a bare array, the likeliest slip, was a traceback in gen);
- `reference`, `exact`, `kernel` and the variants return numbers (None, text or an object array of text was a
  traceback in gen or emulate; a complex reference of a real op lost its imaginary part with a warning);
- `exact` gives a number within the reference's own bound of its value: an exact 1000x the reference, or NaN for
  finite inputs, was written as the golden (gen exit 0, "certified");
- an undeclared variant's error names the module to change.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from test_user_modules import cli, one_line

OP = """\
import numpy as np
from aclnn_cli.ops import OpSpec, Reference, TensorSpec, register

def product(t):
    return t["gradOutput"] * t["self"]

{body}

register(OpSpec(name="aclnnMyMulBackward", key="my_mul_backward", summary="dy * x", formula="dy * x",
    tensors=(TensorSpec("gradOutput", "input", {{"normal": [0, 1]}}), TensorSpec("self", "input", {{"uniform": [-5, 5]}}),
             TensorSpec("out", "output", {{"constant": 0}})),
    products={{"A2": ("float32",)}}, dims=(0, 8), empty_ok=True, {fields}))
"""
CASES = "op: aclnnMyMulBackward\ncases:\n  - {name: c, dtype: float32, shape: [5, 4], seed: 3}\n"
EXACT = "reference=loose, exact=exact"  # (a loose bound: every element goes through exact)
LOOSE = """
def loose(t):
    v = product(t)
    return Reference(v, 1e-3 * np.abs(v) + 1e-30, np.abs(v))
"""


def run(tmp_path, body: str, fields: str, *commands: list[str]):
    op = tmp_path / "my_op.py"
    op.write_text(OP.format(body=textwrap.dedent(body), fields=fields))
    (tmp_path / "c.yaml").write_text(CASES)
    out = tmp_path / "out"
    done = None
    for command in commands or (["gen", "c.yaml", "-o", "out", "-j", "1"],):
        done = cli("--ops", op, *command, cwd=tmp_path)
        if done.returncode:
            break
    return done, out


@pytest.mark.parametrize("returned, shown", [
    ("product(t)", "returned out as an array of dtype float64, not a Reference(value, bound, scale)"),
    ("None", "returned out as a NoneType, not a Reference"),
    ("[Reference(product(t), 0 * product(t), abs(product(t)))]", "returned out as a list, not a Reference"),
    ("Reference(np.array(['a'] * product(t).size, dtype=object), 0 * product(t), abs(product(t)))",
     "returned out holding a str ('a'; numbers expected)"),
    ("Reference(product(t) * (1 + 1j), 0 * abs(product(t)), abs(product(t)))",
     "returned out of complex dtype complex128 for an op whose outputs are real"),
])
def test_a_reference_that_does_not_return_references_of_numbers_is_one_line(tmp_path, returned, shown):
    done, out = run(tmp_path, f"def reference(t):\n    return {returned}\n", "reference=reference")
    line = one_line(done)
    assert line.startswith(f"{tmp_path / 'my_op.py'}: op aclnnMyMulBackward: reference {shown}"), line


def test_a_reference_naming_outputs_the_op_lacks_is_one_line(tmp_path):
    body = "def reference(t):\n    v = product(t)\n    return {'gradInput': Reference(v, 0 * v, np.abs(v))}\n"
    done, out = run(tmp_path, body, "reference=reference")
    assert "reference returned the outputs ['gradInput']; the op's outputs are ['out']" in one_line(done)


def test_a_reference_returning_its_output_by_name_still_works(tmp_path):
    body = "def reference(t):\n    v = product(t)\n    return {'out': Reference(v, 0 * v, np.abs(v))}\n"
    done, out = run(tmp_path, body, "reference=reference", ["gen", "c.yaml", "-o", "out", "-j", "1"],
                    ["emulate", "out", "-j", "1"], ["verify", "out", "-j", "1"])
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("returned, shown", [
    ("None", "exact returned out holding a NoneType (None; numbers expected)"),
    ("'q'", "exact returned out of dtype <U1 (numbers expected)"),
    ("Reference(product(t), 0, 0)", "exact returned out as a Reference where numbers belong"),
    ("product(t) * 1000", "exact gives out element "),
    ("product(t) * float('nan')", "exact gives out element "),
])
def test_an_exact_that_is_not_the_references_number_is_one_line(tmp_path, returned, shown):
    """`exact` is asked only where the bound leaves the rounding open; what it gives must be a number within that
    bound of the reference's value, or the declaration contradicts itself and nothing it certified is proven."""
    done, out = run(tmp_path, LOOSE + f"def exact(t):\n    return {returned}\n", EXACT)
    line = one_line(done)
    assert f"op aclnnMyMulBackward: {shown}" in line, line
    if "1000" in returned:
        assert "outside its reference's" in line and "the exact function or the bound is wrong" in line, line
    if "nan" in returned:
        assert " nan where its reference gives the finite " in line, line
    assert str(tmp_path / "my_op.py") in line


def test_an_exact_within_the_bound_is_the_golden(tmp_path):
    """The check refuses nothing correct: the exact product (Fractions) within the loose bound, rounded once."""
    done, out = run(tmp_path, LOOSE + "def exact(t):\n    return product(t)\n", EXACT,
                    ["gen", "c.yaml", "-o", "out", "-j", "1"], ["emulate", "out", "-j", "1"], ["verify", "out", "-j", "1"])
    assert done.returncode == 0, done.stderr
    case = out / "my_mul_backward-c"
    x, dy = (np.fromfile(case / f, np.float32).astype(np.float64) for f in ("self.bin", "gradOutput.bin"))
    assert np.array_equal(np.fromfile(case / "out.golden.bin", np.float32), (x * dy).astype(np.float32))


@pytest.mark.parametrize("returned, shown", [
    ("np.array(['x'] * t['self'].size)", "returned out of dtype <U1 (numbers expected)"),
    ("np.array([None] * t['self'].size)", "returned out holding a NoneType (None; numbers expected)"),
    ("Reference(product(t), 0 * product(t), abs(product(t)))", "returned out as a Reference where numbers belong"),
])
def test_a_kernel_that_does_not_return_numbers_is_one_line(tmp_path, returned, shown):
    body = "def reference(t):\n    v = product(t)\n    return Reference(v, 0 * v, np.abs(v))\n" \
           f"def kernel(t):\n    return {returned}\n"
    done, out = run(tmp_path, body, "reference=reference, kernel=kernel", ["gen", "c.yaml", "-o", "out", "-j", "1"],
                    ["emulate", "out", "-j", "1"])
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr  # (emulate names the case, then this)
    assert f"{tmp_path / 'my_op.py'}: op aclnnMyMulBackward: kernel {shown}\n" in done.stderr, done.stderr


def test_an_undeclared_variant_names_its_module(tmp_path):
    body = "def reference(t):\n    v = product(t)\n    return Reference(v, 0 * v, np.abs(v))\n"
    done, _ = run(tmp_path, body, "reference=reference, variants={'my-odd': lambda t: t['self']}", ["ops"])
    line = one_line(done)
    assert line.startswith(f"{tmp_path / 'my_op.py'}: aclnnMyMulBackward: variant 'my-odd' needs its kind declared"), line
