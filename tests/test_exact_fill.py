"""`fill: exact` (ops/families/exact.py): operands of nonzero integers sized from K and the dtypes, goldens the exact
integer sums, judged bit for bit.

Both sides: the goldens equal an int64 matmul of this file's own, or the convolution's Fractions oracle; float32
kernels of this file's own in several orders write exactly the golden and pass; a dump one ulp off fails; defects
fail where they change the result; the edges of K (the largest accepted, one more refused) for float16, bfloat16,
float32 and float32 through float16 (cubeMathType 2).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import harness
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.values.fill import NonzeroInt, parse_fill
from helpers import one_line_error, run_cli, write_yaml
from rowblocks import generated_yaml, not_passing, variant_statuses, write_dump
from test_op_convolution_backward import logical, oracle, parameters, taps_float32

BMM = """\
op: aclnnBatchMatMul
defaults: {product: "950", fill: exact, seed: 3}
cases:
  - {name: k2048, dtype: float16, shape: [2, 16, 2048], tensors: {mat2: {shape: [2, 2048, 8]}}}
  - {name: k4096, dtype: float32, shape: [2, 16, 4096], tensors: {mat2: {shape: [1, 4096, 8]}}}
  - {name: k256, dtype: bfloat16, shape: [3, 8, 256], tensors: {mat2: {shape: [3, 256, 8]}}}
  - {name: k1000fp16, dtype: float32, shape: [2, 16, 1000], tensors: {mat2: {shape: [2, 1000, 8]}},
     attributes: {cubeMathType: [0, 2]}}
"""

CONV = """\
op: aclnnConvolutionBackward
defaults: {product: "950", fill: exact, seed: 5,
           attributes: {stride: [1, 1], padding: [1, 1], dilation: [1, 1], outputPadding: [0, 0]}}
cases:
  - {name: plain, dtype: [float32, float16, bfloat16], shape: [2, 4, 6, 6], tensors: {weight: {shape: [4, 4, 3, 3]}}}
  - {name: transposed, dtype: [float32, float16], shape: [2, 4, 5, 5], tensors: {weight: {shape: [4, 3, 3, 3]}},
     attributes: {stride: [2, 2], padding: [1, 1], dilation: [1, 1], outputPadding: [1, 1], transposed: true}}
  - {name: grouped, dtype: float32, shape: [2, 6, 7, 7], tensors: {weight: {shape: [9, 2, 3, 3]}},
     attributes: {stride: [2, 1], padding: [1, 2], dilation: [1, 2], outputPadding: [0, 0], groups: 3,
                  cubeMathType: 2}}
"""


def _cases(out):
    return sorted(p.parent for p in out.glob("*/case.json"))


def _tensor(case, m, name) -> np.ndarray:
    t = harness.tensors(m)[name]
    return harness.view(harness.storage(case, t), t).astype(np.float64)


@pytest.fixture(scope="module")
def bmm(tmp_path_factory):
    return generated_yaml(tmp_path_factory, BMM, "exact_bmm")


@pytest.fixture(scope="module")
def conv(tmp_path_factory):
    return generated_yaml(tmp_path_factory, CONV, "exact_conv")


def test_nonzero_int_draws_every_nonzero_value_and_no_zero_in_any_chunk():
    fill = parse_fill({"nonzero_int": 3})
    whole = fill.generate(D.FLOAT32, 7, 1, 0, 200_000)
    assert set(np.unique(whole)) == {-3, -2, -1, 1, 2, 3}
    counts = np.unique(whole, return_counts=True)[1]
    assert counts.min() > 0.95 * counts.max()  # (uniform over the six)
    np.testing.assert_array_equal(np.concatenate([fill.generate(D.FLOAT32, 7, 1, 0, 70_001),
                                                  fill.generate(D.FLOAT32, 7, 1, 70_001, 200_000)]), whole)
    assert fill.check(D.BFLOAT16) is None and NonzeroInt((257,)).check(D.BFLOAT16)
    with pytest.raises(ValueError, match="integer r"):
        parse_fill({"nonzero_int": 0})


def test_matmul_goldens_are_the_integer_products_and_orders_pass_bit_for_bit(bmm, tmp_path):
    """Each operand nonzero integers within r (r = 1 for float16 at K = 2048 and bfloat16 at 256, 64 for float32 at
    4096 and 129 at 1000, 1 under cubeMathType 2 at K = 1000), the golden int64's matmul, and float32 sums
    sequential, reversed and in 8 shuffled K ranges write the golden exactly; verify passes them bitwise."""
    r_of = {"k2048": 1, "k4096": 64, "k256": 1, "k1000fp16-cubeMathType0": 129, "k1000fp16-cubeMathType2": 1}
    orders = {"sequential": lambda k: [(i, i + 1) for i in range(k)], "reversed": lambda k: [(i, i + 1) for i in
                                                                                             reversed(range(k))],
              "split": lambda k: [((k * i) // 8, (k * (i + 1)) // 8) for i in np.random.default_rng(1).permutation(8)]}
    work = {name: tmp_path / name for name in orders}
    for case in _cases(bmm):
        m = harness.load(case)
        assert m["standard"] == "bitwise"
        a, b = _tensor(case, m, "self"), _tensor(case, m, "mat2")
        r = r_of[case.name.removeprefix("batch_mat_mul-")]
        assert np.abs(a).max() == r == np.abs(b).max() and np.abs(a).min() == 1 == np.abs(b).min()
        exact = np.matmul(a.astype(np.int64), b.astype(np.int64))
        np.testing.assert_array_equal(_tensor(case, m, "out").shape, exact.shape)
        golden = harness.view(harness.storage(case, harness.tensors(m)["out"], "golden"), harness.tensors(m)["out"])
        np.testing.assert_array_equal(golden.astype(np.float64), exact)
        for name, order in orders.items():
            shutil.copytree(case, work[name] / case.name)
            acc = np.zeros(exact.shape, np.float32)
            for s, e in order(a.shape[-1]):
                acc += np.matmul(a[..., s:e].astype(np.float32), b[..., s:e, :].astype(np.float32))
            write_dump(work[name] / case.name, harness.tensors(m)["out"], acc)
    for name in orders:
        assert not not_passing(work[name], tmp_path / f"{name}.json"), name


def test_one_ulp_off_fails_bit_for_bit(bmm, tmp_path):
    case = next(c for c in _cases(bmm) if "k4096" in c.name)
    m = harness.load(case)
    work = tmp_path / "off"
    shutil.copytree(case, work / case.name)
    t = harness.tensors(m)["out"]
    values = np.matmul(_tensor(case, m, "self"), _tensor(case, m, "mat2")).astype(np.float32)
    values.reshape(-1)[5] = np.nextafter(values.reshape(-1)[5], np.float32(np.inf))
    write_dump(work / case.name, t, values)
    assert [c for c, _ in not_passing(work, tmp_path / "off.json")] == [case.name]


def test_convolution_goldens_are_exact_and_an_independent_kernel_passes_bit_for_bit(conv, tmp_path):
    """The golden of every gradient is the exact sum (the Fractions oracle of test_op_convolution_backward.py, written
    from the doc's formulas), and the test's own float32 taps kernel (numpy's einsum: its own order and blocking)
    writes it exactly, transposed and grouped under cubeMathType 2 too."""
    work = tmp_path / "taps"
    for case in _cases(conv):
        m = harness.load(case)
        args = [logical(case, m, n) for n in ("input", "weight", "gradOutput")]
        assert all(np.abs(a).min() >= 1 for a in args)
        want = oracle(*args, *parameters(m))
        got = taps_float32(*args, *parameters(m))
        shutil.copytree(case, work / case.name)
        for name in ("gradInput", "gradWeight", "gradBias"):
            t = harness.tensors(m)[name]
            golden = harness.view(harness.storage(case, t, "golden"), t).astype(np.float64)
            np.testing.assert_array_equal(golden.reshape(-1), np.array([float(q) for q in want[name]]))
            write_dump(work / case.name, t, got[name])
    assert not not_passing(work, tmp_path / "taps.json")


@pytest.mark.parametrize("variant, fails", [("bmm-not-transposed", "all"), ("bmm-k-tail-dropped", ["k1000"]),
                                            ("bmm-fp16-accumulation", ["k4096", "k1000fp16-cubeMathType0"]),
                                            ("bmm-split-k", [])])
def test_matmul_defects_fail_where_they_change_the_result(bmm, tmp_path, variant, fails):
    status = variant_statuses(bmm, tmp_path, variant)
    failing = sorted(k for k, v in status.items() if v != "PASS")
    if fails == "all":
        assert len(failing) == len(status) == 5
    else:
        assert failing == sorted(k for k in status if any(f in k for f in fails)), failing


def test_convolution_defects_fail_and_orders_pass(conv, tmp_path):
    assert set(variant_statuses(conv, tmp_path / "f", "conv-flipped-kernel").values()) == {"FAIL"}
    assert set(variant_statuses(conv, tmp_path / "s", "conv-split-k").values()) == {"PASS"}


@pytest.mark.parametrize("dtype, k, math, ok", [("float16", 2048, 0, True), ("float16", 2049, 0, False),
                                                 ("bfloat16", 256, 0, True), ("bfloat16", 257, 0, False),
                                                 ("float32", 2049, 0, True), ("float32", 2048, 2, True),
                                                 ("float32", 2049, 2, False)])
def test_k_edges(tmp_path, dtype, k, math, ok):
    text = (f"op: aclnnBatchMatMul\ncases:\n  - {{name: a, dtype: {dtype}, shape: [1, 2, {k}], fill: exact, "
            f"product: '950', tensors: {{mat2: {{shape: [1, {k}, 2]}}}}, attributes: {{cubeMathType: {math}}}}}\n")
    r = run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / "out")
    if ok:
        assert r.exit_code == 0, r.output
    else:
        limit = {"float16": "2,048", "bfloat16": "256", "float32": "2,048"}[dtype]
        one_line_error(r, "fill: exact", f"K = {k:,}", f"K = {limit} at most")
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case, needles", [
    ("op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: float16, shape: [8], fill: exact}",
     ("key 'fill'", "elementwise family", "contraction and convolution")),
    ("op: aclnnBatchMatMul\ncases:\n  - {name: a, dtype: float16, shape: [1, 2, 4], tensors: {mat2: {shape: [1, 4, 2]}},"
     " fill: exact, inputs: {self: {uniform: [0, 1]}}}", ("inputs.self", "drop inputs.self")),
    ("op: aclnnBatchMatMul\ncases:\n  - {name: a, dtype: float16, shape: [1, 2, 4], tensors: {mat2: {shape: [1, 4, 2]}},"
     " fill: exact, standard: ulp}", ("key 'standard'", "bit for bit")),
    ("op: aclnnBatchMatMul\ncases:\n  - {name: a, dtype: float16, shape: [1, 2, 4], fill: exactly}",
     ("key 'fill'", "exact or random")),
])
def test_refusals_are_one_line(tmp_path, case, needles):
    one_line_error(run_cli("gen", write_yaml(tmp_path, case + "\n"), "-o", tmp_path / "out"), *needles)


def test_fill_random_undoes_a_default_exact(tmp_path):
    text = ("op: aclnnBatchMatMul\ndefaults: {fill: exact}\ncases:\n  - {name: a, dtype: float16, shape: [1, 2, 4], "
            "tensors: {mat2: {shape: [1, 4, 2]}}, fill: random}\n")
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / "out").exit_code == 0
    m = harness.load(next(iter(_cases(tmp_path / "out"))))
    assert m["standard"] is None and "nonzero_int" not in str(m["tensors"])


def test_matmul_dot_products_and_batch_broadcast(tmp_path):
    """aclnnMatmul's forms: 1-d @ 1-d (no cube: cubeMathType 2 leaves float32's 24 bits, r = 57 at K = 5,000) and a
    batch that broadcasts (3 x 1 against 4): generated, emulated and judged bit for bit, each golden the int64 sum."""
    text = ("op: aclnnMatmul\ndefaults: {product: '950', fill: exact, seed: 4}\ncases:\n"
            "  - {name: dot, dtype: float32, shape: [5000], tensors: {mat2: {shape: [5000]}},\n"
            "     attributes: {cubeMathType: 2}}\n"
            "  - {name: bcast, dtype: float16, shape: [3, 1, 8, 300], tensors: {mat2: {shape: [4, 300, 5]}}}\n")
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    assert not not_passing(out, tmp_path / "v.json")
    r = {}
    for case in _cases(out):
        m = harness.load(case)
        a, b = _tensor(case, m, "self").astype(np.int64), _tensor(case, m, "mat2").astype(np.int64)
        r[case.name] = int(np.abs(a).max())
        t = harness.tensors(m)["out"]
        golden = harness.view(harness.storage(case, t, "golden"), t).astype(np.float64)
        np.testing.assert_array_equal(golden, np.matmul(a, b))
    assert r == {"matmul-dot": 57, "matmul-bcast": 2}
