"""The Rows family through gen, emulate and verify, with a user op (tests/user_ops/my_center_backward.py).

Goldens are checked against an oracle written here: exact Fractions of the formula (dy - mean(dy) along
the row; the sum of dy over every row), rounded once with mpmath at the dtype's precision; not the op's
own reference or exact. Rows longer than the pipeline's chunk (65,536) and a reduction over a leading
axis (A0 > 1) are among the cases; one case sits exactly on a rounding tie, so its golden needs the exact
path. Every run is a CLI process, as a user's would be.
"""

from __future__ import annotations

import json
import os
import subprocess
from exactq import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D

from clifork import cli_process
from helpers import logical

DATA = Path(__file__).parent / "user_ops"
OP_FILE = DATA / "my_center_backward.py"
CASES = """\
op: aclnnMyCenterBackward
defaults:
  product: A2
cases:
  - name: last
    dtype: [float32, float16, bfloat16]
    shape: [[4, 300], [2, 3, 7], [1], [3, 70000]]
  - name: first
    dtype: [float32, bfloat16]
    shape: [[6, 5, 3]]
    attributes: {dim: 0}
  - name: middle
    dtype: float16
    shape: [[3, 4, 5]]
    attributes: {dim: -2}
  - name: tie
    dtype: float16
    shape: [[3, 2]]
    inputs: {gradOutput: {values: [1.0009765625, 0.00048828125]}}
"""


def cli(*args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ACLNN_CLI_OPS"}
    return cli_process("--ops", str(OP_FILE), *map(str, args), env=env)


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rows")
    (root / "cases.yaml").write_text(CASES)
    done = cli("gen", root / "cases.yaml", "-o", root / "out")
    assert done.returncode == 0, done.stderr
    return root / "out"


def _round(q: Fraction, dtype: D.DType) -> float:
    """q rounded to nearest even at the dtype's precision (normal range: the values here are), by mpmath."""
    if q == 0:
        return 0.0
    with mpmath.workprec(max(q.numerator.bit_length(), q.denominator.bit_length()) + 8):
        num, den = mpmath.mpf(q.numerator), mpmath.mpf(q.denominator)  # (exact at this precision)
    return float(mpmath.fdiv(num, den, prec=dtype.precision, rounding="n"))


def _oracle(dy: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(gradInput, gradShift) as Fractions, from the formula."""
    q0 = np.vectorize(Fraction, otypes=[object])(dy.astype(np.float64))
    q = np.moveaxis(q0, dim, -1)
    grad = np.moveaxis(q - q.sum(axis=-1, keepdims=True) / q.shape[-1], -1, dim)
    lead = dim % dy.ndim  # the axes before the reduced one are summed over: every row
    shift = q0.reshape(-1, *q0.shape[lead:]).sum(axis=0)
    return grad, shift


def test_goldens_are_the_exact_results_rounded_once(out):
    checked = 0
    for case in sorted(out.iterdir()):
        m = json.loads((case / "case.json").read_text())
        t = {x["name"]: x for x in m["tensors"]}
        dim = next(a["value"] for a in m["attributes"] if a["name"] == "dim")
        dy = logical(case, t["gradOutput"])
        if dy.size > 1000 and "70000" not in case.name:
            continue
        if "70000" in case.name:  # (a slice of rows would not be the case: check a few columns of it)
            dy = dy[:, :64]
            dtype = D.lookup(t["gradInput"]["dtype"])
            full = logical(case, t["gradShift"], "golden")[:64]
            _, shift = _oracle(dy, dim)
            assert [float(x) for x in full] == [_round(x, dtype) for x in shift.reshape(-1)]
            continue
        grad, shift = _oracle(dy, dim)
        dtype = D.lookup(t["gradInput"]["dtype"])
        got = logical(case, t["gradInput"], "golden").astype(np.float64)
        want = np.array([_round(x, dtype) for x in grad.reshape(-1)]).reshape(grad.shape)
        np.testing.assert_array_equal(got, want, err_msg=case.name)
        got = logical(case, t["gradShift"], "golden").astype(np.float64).reshape(-1)
        want = np.array([_round(x, dtype) for x in shift.reshape(-1)])
        np.testing.assert_array_equal(got, want, err_msg=case.name)
        assert list(logical(case, t["gradShift"]).shape) == t["gradShift"]["shape"]
        checked += 1
    assert checked >= 10


def test_a_tie_goes_through_the_exact_path(out):
    case = next(out.glob("*tie*"))
    m = json.loads((case / "case.json").read_text())
    t = {x["name"]: x for x in m["tensors"]}
    assert m["golden"]["exact_fallback_elements"] > 0
    # (a - b)/2 = 0.5 + 2^-12, halfway between float16's 0.5 and 0.5 + 2^-11: to even, 0.5
    assert logical(case, t["gradInput"], "golden").astype(np.float64)[0].tolist() == [0.5, -0.5]


def test_the_loop_passes_the_kernel_and_fails_a_defect(out, tmp_path):
    import shutil

    work = tmp_path / "o"
    shutil.copytree(out, work)
    assert cli("emulate", work).returncode == 0
    done = cli("verify", work, "--json", tmp_path / "r.json")
    assert done.returncode == 0, done.stdout + done.stderr
    cases = json.loads((tmp_path / "r.json").read_text())["cases"]
    several = [c for c in cases if c["status"] == "PASS" and "gradInput:" in c["reason"] and "gradShift:" in c["reason"]]
    assert len(several) == len(cases)
    assert cli("emulate", work, "--defect", "mean-of-all").returncode == 0
    done = cli("verify", work, "--json", tmp_path / "r2.json")
    assert done.returncode == 1
    failed = {c["case_id"] for c in json.loads((tmp_path / "r2.json").read_text())["cases"] if c["status"] == "FAIL"}
    assert {"float32", "float16", "bfloat16"} <= {c.split("-")[-2] for c in failed}


def test_an_across_rows_output_changed_after_gen_is_caught(out, tmp_path):
    import shutil

    work = tmp_path / "o"
    shutil.copytree(out, work)
    case = next(work.glob("*last-float32-4x300"))
    allowance = case / "gradShift.allowance.bin"
    data = bytearray(allowance.read_bytes())
    data[0] ^= 1
    allowance.write_bytes(bytes(data))
    assert cli("emulate", case).returncode == 0
    done = cli("verify", case)
    assert done.returncode == 2 and "gradShift allowance changed since gen" in done.stdout + done.stderr
