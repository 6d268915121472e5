"""Issue 30's second set of activation backward ops beyond the generic tests (the exhaustive textbook oracle, the
defect matrix, the bundled cases through gen, emulate, verify and the stub runner):

GeluBackward: the tanh form (decision 101), bit for bit GeluBackwardV2's "tanh" golden and kernel, not its erf
golden; the kernel at hand-computed points and at the specials; its dims check, which GeluBackwardV2 has not.
SeluBackward (decision 102): the kernel at hand-computed points, the float64 bound against the exact value written
from the doc's decimals, its contract, and the graph op SeluGrad.
MishBackward (decision 103): the float64 bound against mpmath, the exact path, the kernel's specials and its edge
below x = -87.34, the promoting contract.
"""

from __future__ import annotations

import numpy as np

from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops import contract as C
from aclnn_cli.ops import find_op
from aclnn_cli.tensor import dtypes as D
from helpers import read_yaml

F = np.float32


def _bf16_grid() -> np.ndarray:
    """Every bfloat16 value with 0.25 <= |x| <= 12 (1,410): the tails, the zero of the derivative, the NaN select."""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(D.BFLOAT16.np_dtype)
    wide = x.astype(np.float64)
    return x[np.isfinite(wide) & (np.abs(wide) <= 12) & (np.abs(wide) >= 0.25)]


def test_gelu_backward_is_gelu_backward_v2_tanh_not_the_docs_erf():
    """ops-nn's ATK executor and golden call aten.gelu_backward(approximate="tanh"); the 950 DAG is the V2 tanh
    DAG. The doc's erf formula is GeluBackwardV2's "none": its golden differs on 528 of these x (the two forms are
    up to 8.7e-4 apart; bfloat16's ulps hide the rest)."""
    op, v2 = find_op("aclnnGeluBackward"), find_op("aclnnGeluBackwardV2")
    x = _bf16_grid()
    dy = np.full(x.shape, -0.7, F).astype(x.dtype)
    ins = {"gradOutput": dy, "self": x}
    got, _ = golden(op, ins, D.BFLOAT16)
    tanh, _ = golden(v2, ins, D.BFLOAT16, {"approximate": "tanh"})
    erf, _ = golden(v2, ins, D.BFLOAT16, {"approximate": "none"})
    assert np.array_equal(got.view(np.uint16), tanh.view(np.uint16))
    assert x.size == 1410 and (got.view(np.uint16) != erf.view(np.uint16)).sum() == 528
    x32, dy32 = x.astype(F), dy.astype(F)
    assert np.array_equal(op.kernel({"gradOutput": dy32, "self": x32}),
                          v2.kernel({"gradOutput": dy32, "self": x32, "approximate": "tanh"}), equal_nan=True)


def test_gelu_backward_kernel_at_hand_computed_points_and_specials():
    """float32, step by step as gelu_grad_dag.h (checked against a separate float32 evaluation: the values of
    test_op_gelu_backward_v2.py's tanh kernel). p = exp(...) overflows below x = -10.06: w = inf * 0 = NaN -> 0,
    q = 0; +inf: q = 1, w NaN -> 0 (dy); -inf: 0 * dy; NaN stays NaN."""
    op = find_op("aclnnGeluBackward")
    x = np.array([-10.1, -10, -3, -0.75, 0, 1, 3, 10.1, 20], F)
    got = op.kernel({"gradOutput": np.ones_like(x), "self": x})
    assert got.tolist() == [0.0, -2.7576377135617876e-36, -0.011584168300032616, 0.0010617375373840332, 0.5,
                            1.0829640626907349, 1.0115841627120972, 1.0, 1.0]
    x = np.array([np.inf, -np.inf, np.nan, 1.0, -20.0], F)
    dy = np.array([2.0, 3.0, 1.0, np.nan, -1.0], F)
    k = op.kernel({"gradOutput": dy, "self": x})
    assert k[0] == 2.0 and k[1] == 0 and np.isnan(k[2:4]).all() and k[4] == 0
    ieee = op.ieee({"gradOutput": dy.astype(float), "self": x.astype(float)})
    assert np.array_equal(np.isnan(ieee), np.isnan(k)) and ieee[0] == 2.0 and ieee[1] == 0


def test_gelu_backward_checks_dims_and_the_promoted_dtype():
    """OP_CHECK_MAX_DIM on gradOutput and self (GeluBackwardV2's op_api checks none); the promoted dtype must be
    gradInput's; bfloat16 neither on 910 nor 310P."""
    op, v2 = find_op("aclnnGeluBackward"), find_op("aclnnGeluBackwardV2")
    f32, f16, bf16 = (D.lookup(n) for n in ("float32", "float16", "bfloat16"))

    def descs(dy, x, out, shape=(2, 3)):
        return {"gradOutput": C.TensorDesc(dy, shape, False), "self": C.TensorDesc(x, shape, False),
                "gradInput": C.TensorDesc(out, shape, False)}

    nine = descs(f32, f32, f32, (1,) * 9)
    assert C.check(op, "950", nine).status == C.INVALID
    assert C.check(v2, "950", nine, {"approximate": "tanh"}).status == C.SUCCESS
    assert C.check(op, "A2", descs(f16, f32, f32)).status == C.SUCCESS
    assert C.check(op, "A2", descs(f16, f32, f16)).status == C.INVALID
    assert C.check(op, "A2", descs(bf16, bf16, bf16)).status == C.SUCCESS
    assert C.check(op, "910", descs(bf16, bf16, bf16)).status == C.INVALID
    wide = {**descs(f32, f32, f32), "self": C.TensorDesc(f32, (4, 1, 3), False),
            "gradInput": C.TensorDesc(f32, (4, 2, 3), False)}
    assert C.check(op, "310P", wide).status == C.SUCCESS


def test_selu_kernel_at_hand_computed_points_and_specials():
    """float32 as selu_grad.h: dy * SCALE_F (y > 0, NaN), dy * (y + SCALE_ALPHA_PRODUCT_F) (y <= 0); the float32
    constants are 1.0507010221481323 and 1.7580993175506592 (the decimals rounded once)."""
    op = find_op("aclnnSeluBackward")
    y = np.array([1.0, -1.0, 0.0, -0.0, np.nan, -np.inf, np.inf, -1.7580993, -2.0], F)
    dy = np.array([1.0, 1.0, 1.0, -2.0, 3.0, 1.0, 1.0, 1.0, 0.5], F)
    got = op.kernel({"gradOutput": dy, "result": y})
    assert got[:4].tolist() == [1.0507010221481323, 0.7580993175506592, 1.7580993175506592, -3.5161986351013184]
    assert got[4] == F(3) * F(1.0507010221481323) and got[5] == -np.inf and got[6] == F(1.0507010221481323)
    assert got[7] == 0.0 and got[8] == F(0.5) * (F(-2) + F(1.7580993175506592))
    assert (F(1.0507009873554804934193349852946), F(1.7580993408473768599402175208123)) == (
        F(1.0507010221481323), F(1.7580993175506592))
    ieee = op.ieee({"gradOutput": dy.astype(float), "result": y.astype(float)})
    assert ieee[4] == 3 * 1.0507009873554805 and ieee[5] == -np.inf and ieee[3] == -2 * 1.7580993408473769


def test_selu_reference_bound_holds_against_the_exact_value():
    """|value - exact| <= bound for float32 inputs on both branches and where y + alpha scale cancels (y near
    -1.7581); the exact value from the 32-digit decimals, written here again from the doc."""
    from decimal import Decimal, getcontext
    from fractions import Fraction

    getcontext().prec = 80
    op = find_op("aclnnSeluBackward")
    rng = np.random.default_rng(102)
    y = np.concatenate([rng.uniform(-3, 3, 200), rng.uniform(-1.75811, -1.75808, 200), [0.0, -0.0]]).astype(F)
    dy = rng.normal(0, 1, y.size).astype(F)
    ref = op.reference({"gradOutput": dy.astype(float), "result": y.astype(float)})
    alpha, scale = Decimal("1.6732632423543772848170429916717"), Decimal("1.0507009873554804934193349852946")
    for i in range(y.size):
        yi, di = Decimal(float(y[i])), Decimal(float(dy[i]))
        exact = di * (yi + alpha * scale) if yi <= 0 else di * scale
        assert abs(Decimal(float(ref.value[i])) - exact) <= Decimal(float(ref.bound[i])), (y[i], dy[i])
        e = op.exact({"gradOutput": Fraction(float(dy[i])), "result": Fraction(float(y[i]))})
        assert Decimal(e.numerator) / Decimal(e.denominator) == exact
    assert (ref.scale >= np.abs(ref.value)).all()


def test_selu_contract_same_dtype_same_shape_no_dims_check():
    op = find_op("aclnnSeluBackward")
    f32, f16, bf16 = (D.lookup(n) for n in ("float32", "float16", "bfloat16"))

    def descs(dy, y, out, shape=(2, 3), out_shape=None):
        return {"gradOutput": C.TensorDesc(dy, shape, False), "result": C.TensorDesc(y, shape, False),
                "gradInput": C.TensorDesc(out, out_shape or shape, False)}

    assert C.check(op, "950", descs(f32, f32, f32, (1,) * 9)).status == C.SUCCESS  # (reshaped to 1-D past 8 dims)
    assert C.check(op, "950", descs(f16, f32, f32)).status == C.INVALID
    assert C.check(op, "950", descs(f32, f32, f16)).status == C.INVALID
    assert C.check(op, "A3", descs(bf16, bf16, bf16)).status == C.SUCCESS
    assert C.check(op, "310P", descs(bf16, bf16, bf16)).status == C.INVALID
    assert C.check(op, "A2", descs(f32, f32, f32, (2, 3), (1, 3))).status == C.INVALID


def test_selu_grad_graph_op_is_selu_backward(tmp_path):
    """The graph op SeluGrad(gradients, outputs) -> y (selu_grad/op_graph/selu_grad_proto.h) is aclnnSeluBackward
    (gradOutput, result) -> gradInput; ops-nn has no TTK file for it, so a row in its TTK kernel-mode format."""
    from helpers import run_cli

    head = ("testcase_name,op_name,input_dtypes,input_ori_shapes,output_ori_shapes,input_ori_formats,"
            "output_ori_formats,attributes,input_shapes,output_dtypes,output_shapes,input_formats,output_formats,"
            "input_data_ranges,precision_tolerances,absolute_precision,soc_series")
    row = ('SeluGrad_fp16_1,selu_grad,"(\'float16\', \'float16\')","((4, 5), (4, 5))","((4, 5),)","(\'ND\', \'ND\')",'
           '"(\'ND\',)",{},"((4, 5), (4, 5))","(\'float16\',)","((4, 5),)","(\'ND\', \'ND\')","(\'ND\',)",'
           '"((-1, 1), (-2, 0))","((0.001, 0.001),)",0.001,')
    src = tmp_path / "ttk_selu_grad.csv"
    src.write_text(head + "\n" + row + "\n")
    r = run_cli("convert", src, "-o", tmp_path / "y")
    assert r.exit_code == 0, r.output
    doc = read_yaml(tmp_path / "y" / "ttk_selu_grad.yaml")
    case = doc["cases"][0]
    assert doc["op"] == "aclnnSeluBackward" and case["shape"] == [4, 5] and case["dtype"] == "float16"
    assert case["inputs"] == {"gradOutput": {"uniform": [-1, 1]}, "result": {"uniform": [-2, 0]}}


def test_mish_reference_bound_holds_against_mpmath_and_the_exact_path_agrees():
    """|value - mish'| <= bound at float32 x from -800 to 800 (e^x a float64 subnormal or zero below -708, e^-x zero
    above 745) and around mish's minimum (x = -1.1924, where the two terms cancel); the exact path within 1e-40.
    The oracle: t + x sech^2(sp) sigmoid(x), sp = log1p(e^x), in mpmath at 200 bits (not the module's ratios)."""
    import mpmath

    op = find_op("aclnnMishBackward")
    rng = np.random.default_rng(103)
    x = np.concatenate([rng.uniform(-800, 800, 60), -np.exp(rng.uniform(-20, 6.7, 60)),
                        rng.uniform(-1.2, -1.18, 60), [0.0, -0.0, -745.5, -744.0, 745.5]]).astype(F).astype(float)
    dy = rng.normal(0, 1, x.size).astype(F).astype(float)
    ref = op.reference({"gradOutput": dy, "self": x})
    with mpmath.workprec(200):
        for i in range(x.size):
            want = mpmath.mpf(dy[i]) * op.textbook(mpmath.mpf(x[i]), {}, mpmath)
            assert abs(mpmath.mpf(float(ref.value[i])) - want) <= ref.bound[i], (x[i], dy[i])
            if i % 5 == 0 and -700 < x[i]:
                from fractions import Fraction

                e = op.exact({"gradOutput": Fraction(dy[i]), "self": Fraction(x[i])})
                assert abs(mpmath.mpf(str(e)) - want) <= abs(want) * mpmath.mpf(1e-40), (x[i], dy[i])
    # x = -745.5: e^x is 0 in float64, mish' a zero of its sign (negative: ~ (1 + x) e^x); -744: a subnormal e^x
    assert ref.value[-3] == 0 and (np.signbit(ref.value[-3:-1]) == ~np.signbit(dy[-3:-1])).all()


def test_mish_kernel_specials_and_its_edge():
    """+-inf and NaN give NaN (0 * inf, inf / inf); below x = -87.34 e^x leaves float32's normals, and past -88.72
    the kernel's value is e^x >= 0 where mish' ~ (1 + x) e^x < 0: the edge accepts it there, not above."""
    op = find_op("aclnnMishBackward")
    x = np.array([np.inf, -np.inf, np.nan, -90.0, -87.0, 0.0], F)
    k = op.kernel({"gradOutput": np.ones_like(x), "self": x})
    assert np.isnan(k[:3]).all() and k[3] == np.exp(np.float64(-90)).astype(F) and k[3] > 0 and k[5] == F(0.6)
    assert k[4] < 0
    t = {"gradOutput": np.ones(x.size), "self": x.astype(float)}
    assert np.isnan(op.ieee(t)[:3]).all()
    where, device = op.edge(t)
    assert where.tolist() == [False, False, False, True, False, False] and device[3] == k[3]
    assert op.reference({"gradOutput": np.ones(1), "self": np.array([-90.0])}).value[0] < 0


def test_mish_contract_promotes_casts_and_checks_dims():
    """No dtype is compared with another (the inputs promote, the result is cast to gradInput's); each in the list;
    the three at most 8 dims; broadcast to gradInput's shape."""
    op = find_op("aclnnMishBackward")
    f32, f16, bf16 = (D.lookup(n) for n in ("float32", "float16", "bfloat16"))

    def descs(dy, x, out, shapes=((2, 3), (2, 3), (2, 3))):
        return {n: C.TensorDesc(d, s, False) for n, d, s in zip(("gradOutput", "self", "gradInput"), (dy, x, out),
                                                                 shapes)}

    assert C.check(op, "A2", descs(f16, bf16, f16)).status == C.SUCCESS
    assert C.check(op, "950", descs(f16, f16, f32, ((4, 1), (1, 3), (4, 3)))).status == C.SUCCESS
    assert C.check(op, "950", descs(f16, f16, f32, ((4, 1), (1, 3), (4, 1)))).status == C.INVALID
    assert C.check(op, "910", descs(f32, f32, bf16)).status == C.INVALID
    assert C.check(op, "950", descs(f32, f32, f32, ((1,) * 9,) * 3)).status == C.INVALID
