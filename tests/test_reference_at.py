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

from helpers import emulated_case, run_cli, same_verdict
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



def test_verify_relieves_a_contraction_from_the_flagged_elements_alone(tmp_path, monkeypatch):
    """A BatchMatMul of K = 2048, the emulated kernel's dump (a few elements flagged by its rounding, relieved), then
    two elements broken: verify relieves the correct dump through reference_at alone, never evaluating the whole
    reference, and both verdicts and their metrics are those of the relief through the whole reference (the path
    before, rowrelief's blocks)."""
    text = ("op: aclnnBatchMatMul\ncases:\n  - {name: c, dtype: float32, shape: [4, 64, 2048], seed: 5,"
            " tensors: {mat2: {shape: [4, 2048, 48]}}}\n")
    m = emulated_case(tmp_path, text)
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
    same_verdict(broken, verify_case(M.load(m.dir), C.Options()).to_json())
    assert run_cli("emulate", m.dir.parent, "-j", 1).exit_code == 0  # (the correct dump again)
    same_verdict(correct, verify_case(M.load(m.dir), C.Options()).to_json())
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
    value, bound, scale, tighter = dots.certified(left, right)
    where = np.arange(value.size)
    exact = dots.exact_at(left, right, where)
    assert _contains(value.reshape(-1), bound.reshape(-1), exact) == 0  # (the norms' bound)
    assert _contains(value.reshape(-1), tighter().reshape(-1), exact) == 0  # (|A|.|B|'s)
    whole = dots.reference(left, right)  # (the allowance's reference: the same value to float64's rounding)
    magnitude = dots.magnitude(left, right)[0]
    exact_magnitude = dots.exact_at(np.abs(left), np.abs(right), where)
    assert _below(exact_magnitude, scale.reshape(-1)) == 0 and _below(exact_magnitude, magnitude.reshape(-1)) == 0
    np.testing.assert_allclose(magnitude, whole[2], rtol=4 * dots.gamma(k, dots.F32_UNIT))  # (float32's |A|.|B|)
    assert np.all(np.abs(value - whole[0]) <= bound + whole[1])


def _below(exact, scale, over: float = 1.0) -> int:
    """How many exact |A|.|B| (Fractions) exceed the scale times `over`: what the bound takes them to be below."""
    return sum(e > Fraction(float(s)) * Fraction(over) for e, s in zip(exact, scale))


def _bf16(x):
    return np.asarray(x, np.float64).astype(ml_dtypes.bfloat16).astype(np.float64)


def _magnitude_cases():
    """(name, left, right, path): operands whose float32 |A|.|B| rounds, underflows or overflows, and the path
    dots.magnitude must take ("float32" or "float64")."""
    k = 4099
    ones = np.float16(RNG.uniform(0.5, 1, (1, 4, k))).astype(np.float64)  # (sums of 4,099 terms: rounded in float32)
    wide = (RNG.normal(0, 1, (1, 4, k)) * np.exp2(RNG.integers(-14, 15, (1, 4, k)))).astype(np.float16)
    sub = np.float16(RNG.integers(1, 1024, (1, 4, k)) * 2.0**-24).astype(np.float64)  # (float16 subnormals)
    tiny = _bf16(RNG.uniform(1, 2, (1, 3, 50)) * 2.0**-80)  # (products near 2^-160: float32 rounds them to 0)
    edge = _bf16(RNG.uniform(1, 2, (1, 3, 50)) * 2.0**-70)  # (products near 2^-140: float32's subnormals)
    f32 = (RNG.normal(0, 1, (1, 3, 300)) * np.exp2(RNG.integers(-70, -60, (1, 3, 300)))).astype(np.float32)
    huge = _bf16(np.full((1, 2, 8), 2.0**100))
    small = _bf16(RNG.uniform(1, 2, (1, 3, 40)) * 2.0**-133)  # (bfloat16 subnormals: a BLAS reading them as 0 fails)
    cancel = np.float16(RNG.normal(0, 1, (1, 4, k))).astype(np.float64)
    return [("float16 near 1", ones, np.swapaxes(ones, 1, 2).copy(), "float32"),
            ("float16 over 28 binades", wide.astype(np.float64), np.swapaxes(wide, 1, 2).astype(np.float64), "float32"),
            ("float16 subnormal products", sub, np.swapaxes(sub, 1, 2).copy(), "float32"),
            ("float16 cancelling", cancel, np.concatenate([-np.swapaxes(cancel, 1, 2)[:, :, :2],
                                                           np.swapaxes(cancel, 1, 2)[:, :, 2:]], axis=2), "float32"),
            ("bfloat16 products under float32's subnormals", tiny, np.swapaxes(tiny, 1, 2).copy(), "float32"),
            ("bfloat16 products in float32's subnormals", edge, -np.swapaxes(edge, 1, 2), "float32"),
            ("float32 products rounded and underflowing", f32.astype(np.float64),
             np.swapaxes(f32, 1, 2).astype(np.float64), "float32"),
            ("bfloat16 subnormals times 2^100", small, _bf16(RNG.uniform(1, 2, (1, 40, 3)) * 2.0**100), "float32"),
            ("bfloat16 products past float32's range", huge, np.swapaxes(huge, 1, 2).copy(), "float64"),
            ("float64 values (not float32's)", ones + 2.0**-40, np.swapaxes(ones, 1, 2).copy(), "float64")]


@pytest.mark.parametrize("name,left,right,path", _magnitude_cases(), ids=lambda x: x if isinstance(x, str) else "")
def test_magnitude_bounds_the_exact_absolute_products(name, left, right, path):
    """dots.magnitude's |A|.|B| bounds the exact one (integer sums of the exact products) on sums float32 rounds
    (4,099 terms near 1), 28 binades, float16 subnormals, cancelling values (|A|.|B| does not cancel), bfloat16
    products float32 rounds to 0 or to its subnormals (the absolute term), bfloat16 subnormal operands, float32
    operands (rounded products);
    beyond float32's range and for values float32 cannot hold it takes float64 (gamma / (1 - gamma)). certified's
    bound holds the exact value too. A float32 scale without the division by 1 - gamma_K(u32) fails the first
    cases, one without the absolute term the bfloat16 ones under 2^-150; subnormal operands times 2^100 would fail
    where the BLAS read subnormals as 0."""
    k = left.shape[2]
    scale, factor = dots.magnitude(left, right)
    g = dots.gamma(k)
    assert factor == (g if path == "float32" else g / (1 - g)), name
    where = np.arange(scale.size)
    over = Fraction(factor) / Fraction(g)  # (1 on the float32 path; on float64's, 1 / (1 - gamma_K(u64)))
    assert _below(dots.exact_at(np.abs(left), np.abs(right), where), scale.reshape(-1), over) == 0, name
    value, bound, norms, tighter = dots.certified(left, right)
    assert _below(dots.exact_at(np.abs(left), np.abs(right), where), norms.reshape(-1)) == 0, name
    exact = dots.exact_at(left, right, where)
    assert _contains(value.reshape(-1), bound.reshape(-1), exact) == 0, name  # (the norms' bound)
    assert _contains(value.reshape(-1), tighter().reshape(-1), exact) == 0, name  # (magnitude's)
    if path == "float32":  # (the scale rounds in float32, by up to gamma_K(u32), and the absolute term)
        within = np.matmul(np.abs(left), np.abs(right)) * (1 + 4 * dots.gamma(k, dots.F32_UNIT)) + k * 2.0**-122
        assert np.all(scale <= within), name


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
