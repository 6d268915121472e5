"""The Groups family through gen, emulate and verify with a user op written from docs/adding-an-op.md
(tests/user_ops/my_group_scale_backward.py: y = x * scale[n, g] + bias[c]; gradScale, a per-group output, summed
over each group's channels and HxW, gradBias, a per-channel one, over the samples and HxW): every golden is the
exact value rounded once (Fractions on the inputs read back through case.json alone), the module's kernel passes,
its defect fails exactly where there is more than one sample, and a per-group tensor without N * group values is
refused in one line. Every CLI run is a fresh process."""

from __future__ import annotations

import json
import shutil
from exactq import Fraction
from pathlib import Path

import pytest

from test_user_ops_table import DATA, attrs, check, cli, positive, read

MODULE = "my_group_scale_backward"
CASES = 24


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    out = tmp_path_factory.mktemp("groups") / "out"
    r = cli(MODULE, "gen", DATA / f"{MODULE}.yaml", "-o", out)
    assert r.returncode == 0, r.stderr
    return out


def statuses(out: Path, report: Path, *emulate) -> tuple[int, dict]:
    """Emulate (with `emulate`'s extra arguments) and verify: verify's exit code and case id -> status."""
    assert cli(MODULE, "emulate", out, *emulate).returncode == 0
    r = cli(MODULE, "verify", out, "--json", report)
    return r.returncode, {c["case_id"]: c["status"] for c in json.loads(report.read_text())["cases"]}


def test_the_kernel_passes_and_its_defect_fails_where_there_are_several_samples(out, tmp_path):
    work = Path(shutil.copytree(out, tmp_path / "out"))
    code, got = statuses(work, tmp_path / "v.json")
    assert code == 0 and len(got) == CASES and set(got.values()) == {"PASS"}, got
    code, got = statuses(work, tmp_path / "d.json", "--defect", "my-group-bias-one-sample")
    samples = {m["case_id"]: attrs(m)["N"] for _, m in positive(work)}
    assert code == 1 and got == {c: "FAIL" if samples[c] > 1 else "PASS" for c in samples}, got
    assert sum(n == 1 for n in samples.values()) == 3


def test_goldens_are_the_exact_values_rounded_once(out):
    """gradInput[n, c, hw] = dy * scale[n, c // (C / group)], gradScale[n, g] = sum over c in g and hw of dy * x,
    gradBias[c] = sum over n and hw of dy, in Fractions on the (n, c, hw) and (n, g) values whatever the shapes."""
    checked = cases = 0
    for case, m in positive(out):
        a = attrs(m)
        n, c, hw, g = a["N"], a["C"], a["HxW"], a["group"]
        dy, x = ([[[Fraction(v) for v in ch] for ch in smp] for smp in read(case, m, k).reshape(n, c, hw).tolist()]
                 for k in ("gradOutput", "self"))
        s = [[Fraction(v) for v in smp] for smp in read(case, m, "scale").reshape(n, g).tolist()]
        d = c // g
        checked += check(case, m, "gradInput", [dy[i][ch][j] * s[i][ch // d] for i in range(n) for ch in range(c)
                                                for j in range(hw)])
        checked += check(case, m, "gradScale", [sum(dy[i][ch][j] * x[i][ch][j] for ch in range(q * d, (q + 1) * d)
                                                    for j in range(hw)) for i in range(n) for q in range(g)])
        checked += check(case, m, "gradBias", [sum(dy[i][ch][j] for i in range(n) for j in range(hw))
                                               for ch in range(c)])
        cases += 1
    assert cases == CASES and checked > 100_000


def test_a_per_group_tensor_without_n_times_group_values_is_one_line(tmp_path):
    y = tmp_path / "bad.yaml"
    y.write_text("op: aclnnMyGroupScaleBackward\ncases:\n  - {name: bad, dtype: float32, product: A2, "
                 "shape: [2, 6, 4], attributes: {N: 2, C: 6, HxW: 4, group: 3}, tensors: {scale: {shape: [5]}}}\n")
    r = cli(MODULE, "gen", y, "-o", tmp_path / "o")
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, lines
    assert "case 'bad'" in lines[0] and "scale has 5 elements; the groups family needs 6" in lines[0], lines
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


@pytest.mark.parametrize("shape", [(3, 2, 4, 5), (1, 6, 7), (4, 1, 3), (2, 9)])
def test_channels_last_blocks_are_the_channels_of_the_ndhwc_layout(shape):
    """Groups(channels_last=True): block c is channel c of (N, ..., C) in (n, hw) order (NumPy's moveaxis of the
    flat indices), positions and block_of are inverse, per-group tensors (n, c) and per-channel ones c."""
    import numpy as np

    from aclnn_cli.ops.families import Groups

    family = Groups(driver="x", per_group=("mean",), per_channel=("gamma",), channels_last=True)
    shapes = {"x": shape, "mean": (shape[0], shape[-1]), "gamma": (shape[-1],)}
    geo = family.geometry(shapes, {})
    c = shape[-1]
    flat = np.moveaxis(np.arange(int(np.prod(shape))).reshape(shape[0], -1, c), 2, 0).reshape(-1)
    assert (geo.a1, geo.r, geo.a0) == (c, flat.size // c, 1) and geo.contiguous == (c == 1)
    at_ = lambda p, n: np.arange(n)[p]  # noqa: E731  (positions: a slice where the blocks are one range)
    assert np.array_equal(at_(geo.positions(0, c), flat.size), flat)
    block, at = geo.block_of(flat)
    assert np.array_equal(block * geo.block + at, np.arange(flat.size))
    stats = family.own_geometry("mean", shapes, {}, geo)
    by_channel = np.arange(shape[0] * c).reshape(shape[0], c).T.reshape(-1)
    assert np.array_equal(at_(stats.positions(0, c), shape[0] * c), by_channel)
    assert np.array_equal(at_(family.own_geometry("gamma", shapes, {}, geo).positions(0, c), c), np.arange(c))
    assert family.shape_problem(type("Op", (), {"tensors": ()})(), {"x": shape[:1]}, {}) is not None
