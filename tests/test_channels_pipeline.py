"""The Channels family through gen, emulate and verify, with a user op (tests/user_ops/my_channel_affine_backward.py):
goldens nearest the exact values read through the manifest alone (tests/harness.py), the emulated kernel passes,
its defect fails, and a declaration the family cannot relate is refused in one line."""

from __future__ import annotations

import subprocess
from exactq import Fraction
from pathlib import Path

import numpy as np
import pytest

import harness
from aclnn_cli.tensor import dtypes as D
from clifork import cli_process

DATA = Path(__file__).parent / "user_ops"
OP_FILE = DATA / "my_channel_affine_backward.py"


def cli(*args) -> subprocess.CompletedProcess:
    return cli_process("--ops", str(OP_FILE), *map(str, args))


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    out = tmp_path_factory.mktemp("channels") / "out"
    r = cli("gen", DATA / "my_channel_affine_backward.yaml", "-o", out)
    assert r.returncode == 0, r.stderr
    return out


def _nearest(golden: float, exact: Fraction, dtype: D.DType) -> bool:
    """golden is within half an ulp (of golden's binade, the subnormal spacing at least) of exact."""
    exp = np.frexp(golden)[1] - 1 if golden else dtype.emin
    ulp = Fraction(2) ** (max(int(exp), dtype.emin) - dtype.precision + 1)
    return abs(Fraction(golden) - exact) <= ulp / 2


def test_goldens_are_the_exact_values_rounded(out):
    cases = sorted(p.parent for p in out.glob("*/case.json"))
    assert len(cases) == 12
    checked = 0
    for case in cases:
        m = harness.load(case)
        ts = harness.tensors(m)
        read = {n: harness.view(harness.storage(case, t), t).astype(np.float64) for n, t in ts.items() if t["role"] == "input"}
        dy, x, s = read["gradOutput"], read["self"], read["scale"]
        c = x.shape[1]
        want = {"gradInput": [Fraction(float(v)) for v in (dy * s.reshape((1, c) + (1,) * (x.ndim - 2))).reshape(-1)],
                "gradScale": [sum(Fraction(float(a)) * Fraction(float(b)) for a, b in
                                  zip(np.take(dy, ch, 1).reshape(-1), np.take(x, ch, 1).reshape(-1))) for ch in range(c)],
                "gradBias": [sum(Fraction(float(a)) for a in np.take(dy, ch, 1).reshape(-1)) for ch in range(c)]}
        for name, exact in want.items():
            t = ts[name]
            dtype = D.lookup(t["dtype"])
            golden = harness.view(harness.storage(case, t, "golden"), t).astype(np.float64).reshape(-1)
            assert all(_nearest(float(g), e, dtype) for g, e in zip(golden, exact)), (case.name, name)
            checked += len(exact)
    assert checked > 100_000


def test_the_kernel_passes_and_its_defect_fails(out, tmp_path):
    import shutil

    work = tmp_path / "w"
    shutil.copytree(out, work)
    assert cli("emulate", work).returncode == 0
    r = cli("verify", work)
    assert r.returncode == 0 and "12 PASS" in r.stdout, r.stdout[-500:]
    assert cli("emulate", work, "--defect", "affine-first-half-only").returncode == 0
    r = cli("verify", work)
    assert r.returncode == 1 and "12 FAIL" in r.stdout, r.stdout[-500:]


def test_a_shape_the_family_cannot_relate_is_one_line(tmp_path):
    """A (C,) scale given as (1, C): the family reads per-channel tensors as (C,) only."""
    y = tmp_path / "bad.yaml"
    y.write_text("op: aclnnMyChannelAffineBackward\ncases:\n  - {name: wide, dtype: float32, product: A2, "
                 "shape: [2, 3, 4], tensors: {scale: {shape: [1, 3]}}}\n")
    r = cli("gen", y, "-o", tmp_path / "o")
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "scale has shape [1, 3]" in lines[0], lines


def test_the_harness_gets_the_format_an_op_declares_by_rank(tmp_path):
    """BatchNormBackward's gradOut, input and gradInput carry NC, NCL, NCHW, NCDHW by rank (ND from 6-d, and for the
    per-channel tensors): the 950's op_api refuses a 5-d ND input and reads an ND inference input's channel last."""
    import json

    y = tmp_path / "bn.yaml"
    y.write_text("op: aclnnBatchNormBackward\ndefaults: {dtype: float32, product: '950'}\ncases:\n"
                 "  - {name: r, shape: [[2, 3], [2, 3, 4], [2, 3, 4, 5], [2, 3, 2, 2, 2], [2, 3, 1, 2, 1, 2]]}\n")
    r = cli_process("gen", y, "-o", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    want = {2: ("NC", 35), 3: ("NCL", 47), 4: ("NCHW", 0), 5: ("NCDHW", 30), 6: ("ND", 2)}
    seen = set()
    for case in (tmp_path / "o").iterdir():
        m = json.loads((case / "case.json").read_text())
        for t in m["tensors"]:
            rank = len(t["shape"])
            expected = want[rank] if t["name"] in ("gradOut", "input", "gradInput") else ("ND", 2)
            assert (t["format"], t["acl_format"]) == expected, (case.name, t["name"])
            seen.add(rank)
    assert seen >= {1, 2, 3, 4, 5, 6}


def test_a_format_no_harness_knows_is_refused_when_the_op_loads(tmp_path):
    bad = tmp_path / "bad_format.py"
    bad.write_text(OP_FILE.read_text().replace('TensorSpec("self", "input", {"normal": [0, 1]})',
                                               'TensorSpec("self", "input", {"normal": [0, 1]}, formats={4: "NHWQ"})'))
    r = cli_process("--ops", str(bad), "ops")
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "formats" in lines[0] and "NHWQ" in lines[0], lines
