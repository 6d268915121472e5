"""Relief of a contraction's flagged elements from their own dot products (OpSpec.reference_at): the reference of a
few elements equals the whole tensor's reference there (value, bound, scale, allowance, to float64's rounding), and
verify's verdict and metrics are those of the relief through the whole reference, which it no longer evaluates."""

from __future__ import annotations

from exactq import Fraction

import ml_dtypes
import numpy as np
import pytest

from aclnn_cli.casedir import manifest as M
from aclnn_cli.judge import comparison as C
from aclnn_cli.judge import rowrelief
from aclnn_cli.judge.verify import verify_case
from aclnn_cli.ops.contraction import dots
from aclnn_cli.golden.rows import widened

from helpers import run_cli, write_yaml
from independent_rows import case_blocks

RNG = np.random.default_rng(11)


def _agree(whole, at, where) -> None:
    for name, got in at.items():
        for field in ("value", "bound", "scale", "allowance"):
            full = np.broadcast_to(getattr(whole[name], field), whole[name].value.shape).reshape(-1)[where[name]]
            np.testing.assert_allclose(getattr(got, field), full, rtol=1e-12, atol=0, err_msg=f"{name}.{field}")


OPS = ("aclnnBatchMatMul", "aclnnMatmul", "aclnnConvolutionBackward")
SMALL = 200_000  # the cases compared: up to this many output elements (every attribute and layout is among them)


def _bundled_contractions(suite):
    """(directory, manifest, t as `reference` receives it) of every positive bundled contraction case of finite inputs
    and up to SMALL output elements."""
    for d in sorted(suite.iterdir()):
        if not (d / "case.json").is_file() or not d.name.startswith(("batch_mat_mul-", "matmul-", "convolution_")):
            continue
        m = M.load(d)
        if m.op.name not in OPS or m.expect_status != 0 or sum(o.layout.numel for o in m.judged) > SMALL:
            continue
        t = {**widened(case_blocks(m)), **m.attribute_values}
        if all(np.isfinite(v).all() for v in t.values() if isinstance(v, np.ndarray) and v.dtype == np.float64):
            yield d, m, t


def test_reference_at_is_the_whole_reference_there_on_every_bundled_contraction(bundled_gen):
    """Every bundled BatchMatMul, Matmul and ConvolutionBackward case of finite inputs (every cubeMathType,
    transposed, grouped, padded and strided convolutions, each output): reference_at at random elements."""
    checked = 0
    for d, m, t in _bundled_contractions(bundled_gen):
        whole = m.op.by_output(m.op.reference(t))
        where = {o.name: RNG.choice(whole[o.name].value.size, min(whole[o.name].value.size, 7), replace=False)
                 for o in m.judged if o.layout.numel}
        _agree(whole, m.op.by_output(m.op.reference_at(t, where)), where)
        checked += 1
    assert checked >= 150, checked


def _same(got: dict, before: dict) -> None:
    assert got["status"] == before["status"] and got["reason"] == before["reason"]
    for key, value in before["metrics"].items():
        if isinstance(value, float):
            assert got["metrics"][key] == pytest.approx(value, rel=1e-12, abs=1e-300), key
        else:
            assert got["metrics"][key] == value, key


def test_verify_relieves_a_contraction_from_the_flagged_elements_alone(tmp_path, monkeypatch):
    """A BatchMatMul of K = 2048, the emulated kernel's dump (a few elements flagged by its rounding, relieved), then
    two elements broken: verify relieves the correct dump through reference_at alone, never evaluating the whole
    reference, and both verdicts and their metrics are those of the relief through the whole reference (the path
    before, rowrelief's blocks)."""
    text = ("op: aclnnBatchMatMul\ncases:\n  - {name: c, dtype: float32, shape: [4, 64, 2048], seed: 5,"
            " tensors: {mat2: {shape: [4, 2048, 48]}}}\n")
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out, "-j", 1).exit_code == 0
    assert run_cli("emulate", out, "-j", 1).exit_code == 0
    m = M.load(next(d for d in out.iterdir() if d.is_dir()))
    whole, at = [], []
    real_blocks, real_at = rowrelief.reference_blocks, rowrelief._relief_at
    monkeypatch.setattr(rowrelief, "reference_blocks", lambda *a: whole.append(1) or real_blocks(*a))
    monkeypatch.setattr(rowrelief, "_relief_at", lambda *a: at.append(a[5].size) or real_at(*a))  # (a[5]: `at`)
    correct = verify_case(m, C.Options()).to_json()
    assert correct["status"] == "PASS" and correct["metrics"]["relieved"] > 0 and at and not whole
    dump = np.fromfile(m.output.dump_path, np.float32)
    dump[5], dump[700] = np.float32(3.0) * dump[5] + 1, -dump[700]
    dump.tofile(m.output.dump_path)
    broken = verify_case(M.load(m.dir), C.Options()).to_json()
    assert broken["status"] == "FAIL"
    monkeypatch.setattr(rowrelief, "_relief_at", lambda *a: None)
    dump.tofile(m.output.dump_path)
    _same(broken, verify_case(M.load(m.dir), C.Options()).to_json())
    assert run_cli("emulate", out, "-j", 1).exit_code == 0  # (the correct dump again)
    _same(correct, verify_case(M.load(m.dir), C.Options()).to_json())
    assert whole


# ---- gen's reference (OpSpec.golden_reference): value and bound without the allowance's walk along K ---------------

def _contains(value, bound, exact) -> int:
    """How many exact values (Fractions) lie outside value +- bound."""
    return sum(abs(Fraction(float(v)) - e) > Fraction(float(b)) for v, b, e in zip(value, bound, exact))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("k", [1, 17, 1000, 4099])
def test_certified_bounds_the_exact_dot_product_cancelling_ones_too(dtype, k):
    """dots.certified on operands of each input dtype, K from 1 to past 4096, with columns built to cancel each
    row's sum to a few ulps: every exact value (integer sums of the exact products) is within value +- bound."""
    np_dtype = {"float16": np.float16, "float32": np.float32}.get(dtype)
    cast = (lambda x: x.astype(np_dtype)) if np_dtype else (lambda x: x.astype(ml_dtypes.bfloat16))
    left = cast(RNG.normal(0, 1, (2, 5, k)) * np.exp2(RNG.integers(-8, 8, (2, 5, 1)))).astype(np.float64)
    right = cast(RNG.normal(0, 1, (2, k, 6))).astype(np.float64)
    right[:, :, 0] = cast(-left[:, 0, :] * 0.5).astype(np.float64)  # (column 0 against row 0: a near cancellation)
    right[:, :, 1] = cast(np.where(np.arange(k) % 2, 1.0, -1.0)[None, :].repeat(2, 0)).astype(np.float64)
    value, bound, scale = dots.certified(left, right)
    where = np.arange(value.size)
    assert _contains(value.reshape(-1), bound.reshape(-1), dots.exact_at(left, right, where)) == 0
    whole = dots.reference(left, right)  # (the allowance's reference: the same value to float64's rounding)
    np.testing.assert_allclose(scale, whole[2], rtol=1e-12)
    assert np.all(np.abs(value - whole[0]) <= bound + whole[1])


def test_golden_reference_bounds_the_exact_values_of_every_bundled_contraction(bundled_gen):
    """Every bundled BatchMatMul, Matmul and ConvolutionBackward case of finite inputs, each output: golden_reference's
    value +- bound holds the exact value at random elements, and its value is the reference's to within both bounds
    (gen certifies with it; the goldens and manifests are the bytes `reference` gave: the bundled digests)."""
    checked = 0
    for d, m, t in _bundled_contractions(bundled_gen):
        golden, whole = m.op.by_output(m.op.golden_reference(t)), m.op.by_output(m.op.reference(t))
        for out in (o.name for o in m.judged if o.layout.numel):
            ref = golden[out]
            assert np.all(np.abs(ref.value - whole[out].value) <= ref.bound + whole[out].bound), (d.name, out)
            where = RNG.choice(ref.value.size, min(ref.value.size, 7), replace=False)
            exact = m.op.exact_at(t, {out: where})[out]
            assert _contains(ref.value.reshape(-1)[where], ref.bound.reshape(-1)[where], exact) == 0, (d.name, out)
        checked += 1
    assert checked >= 200, checked
