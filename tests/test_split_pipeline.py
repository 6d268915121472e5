"""The Split family through gen, emulate and verify, with a user op (tests/user_ops/my_glu_backward.py, the docs'
example): goldens are the exact values rounded once, read through the manifest alone (tests/harness.py) and
split with numpy, so a half read from the wrong elements shows; the emulated kernel passes, its defect fails;
shapes the family cannot relate and declarations that cannot work are one line, exit 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import mpmath
import numpy as np
import pytest

import harness
from clifork import cli_process
from aclnn_cli.tensor import dtypes as D
from oracle import PREC, rounder

DATA = Path(__file__).parent / "user_ops"
OP_FILE = DATA / "my_glu_backward.py"


def cli(*args, op_file=OP_FILE) -> subprocess.CompletedProcess:
    return cli_process("--ops", str(op_file), *map(str, args))


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    out = tmp_path_factory.mktemp("split") / "out"
    r = cli("gen", DATA / "my_glu_backward.yaml", "-o", out)
    assert r.returncode == 0, r.stderr
    return out


def _bits(v, dtype):
    if dtype is D.FLOAT32:
        with mpmath.workprec(24):
            return int(np.array(float(+v), np.float32).view(np.uint32))
    with mpmath.workprec(PREC):
        return rounder(dtype.np_dtype)(v)


def test_goldens_are_the_exact_values_rounded_once(out):
    cases = sorted(p.parent for p in out.glob("*/case.json"))
    assert len(cases) == 12
    for case in cases:
        m = harness.load(case)
        ts = harness.tensors(m)
        dim = next(a["value"] for a in m["attributes"] if a["name"] == "dim")
        x = harness.view(harness.storage(case, ts["self"]), ts["self"]).astype(np.float64)
        dy = harness.view(harness.storage(case, ts["gradOut"]), ts["gradOut"]).astype(np.float64)
        a, b = np.split(x, 2, axis=dim)
        want = []
        with mpmath.workprec(PREC):
            for i in np.ndindex(*a.shape):
                s = 1 / (1 + mpmath.exp(-mpmath.mpf(b[i])))
                want.append((mpmath.mpf(dy[i]) * s, mpmath.mpf(dy[i]) * mpmath.mpf(a[i]) * s * (1 - s)))
        ga = np.array([w[0] for w in want], dtype=object).reshape(a.shape)
        gb = np.array([w[1] for w in want], dtype=object).reshape(a.shape)
        dtype = D.lookup(ts["out"]["dtype"])
        exact = np.concatenate([ga, gb], axis=dim).reshape(-1)
        got = harness.view(harness.storage(case, ts["out"], "golden"), ts["out"]).reshape(-1).view(dtype.uint_dtype)
        assert [int(g) for g in got] == [_bits(v, dtype) for v in exact], case.name


def _verify(out: Path, tmp: Path, *emulate) -> set[str]:
    assert cli("emulate", out, *emulate).returncode == 0
    report = tmp / "r.json"
    cli("verify", out, "--json", report)
    return {c["status"] for c in json.loads(report.read_text())["cases"]}


def test_the_kernel_passes_and_its_defect_fails(out, tmp_path):
    import shutil

    work = Path(shutil.copytree(out, tmp_path / "out"))
    assert _verify(work, tmp_path) == {"PASS"}
    assert _verify(work, tmp_path, "--defect", "glu-halves-swapped") == {"FAIL"}


def test_shapes_the_family_cannot_relate_are_one_line(tmp_path):
    cases = tmp_path / "c.yaml"
    cases.write_text("op: aclnnMyGluBackward\ncases:\n  - {name: odd, product: A2, shape: [4, 7]}\n")
    r = cli("gen", cases, "-o", tmp_path / "o")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "case 'odd'" in r.stderr and "even number" in r.stderr
    cases.write_text("op: aclnnMyGluBackward\ncases:\n  - {name: whole, product: A2, shape: [4, 8], "
                     "tensors: {gradOut: {shape: [4, 8]}}}\n")
    r = cli("gen", cases, "-o", tmp_path / "o")
    assert r.returncode == 2 and "gradOut has shape [4, 8]" in r.stderr and "[4, 4]" in r.stderr, r.stderr


@pytest.mark.parametrize("change, says", [
    ('halves=("gradOut",)', 'halves=("out",)'),
    ('halves=("gradOut",)', 'halves=("gradOut",), dim="axis"'),
])
def test_a_split_declaration_that_cannot_work_is_refused_when_it_loads(tmp_path, change, says):
    text = OP_FILE.read_text()
    assert change in text
    bad = tmp_path / "bad_glu.py"
    bad.write_text(text.replace(change, says))
    r = cli("ops", op_file=bad)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "bad_glu.py" in r.stderr and ("family.halves" in r.stderr or "family.dim" in r.stderr)
