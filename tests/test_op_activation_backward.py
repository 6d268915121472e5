"""Issue 30's activation backward ops beyond the generic tests: EluBackward's float64 bound holds against the exact
value, ThresholdBackward's dispatch to ReluGrad, HardtanhBackward's unchecked output (Contract.out_checked), and the
ATK importer's unnamed inputs (ops-nn's SoftshrinkBackward file)."""

from __future__ import annotations

import json
from decimal import Decimal
from exactq import PackageFraction, RATIONAL

import numpy as np
import pytest

from aclnn_cli.ops import contract as C
from aclnn_cli.ops import find_op
from aclnn_cli.tensor.dtypes import lookup

from helpers import run_cli

F = np.float32


@pytest.mark.parametrize("is_result", [False, True])
def test_elu_reference_bound_holds_against_the_exact_value(is_result):
    """|value - exact| <= bound on float32 inputs over the whole x <= 0 range the exp sees (underflow and overflow of
    float64 included), and the bound is tight enough to leave few elements to the exact path."""
    op = find_op("aclnnEluBackward")
    rng = np.random.default_rng(30)
    n = 300
    x = -np.exp(rng.uniform(-30, 9, n)).astype(F)  # x from -1e-13 to -8000
    dy = rng.normal(0, 1, n).astype(F)
    for attrs in ({"alpha": 1.0, "scale": 1.0, "inputScale": 1.0}, {"alpha": float(F(1.6732632)),
                  "scale": float(F(1.050701)), "inputScale": float(F(0.75))}, {"alpha": 0.5, "scale": 3.0,
                                                                               "inputScale": -0.125}):
        t = {"selfOrResult": x.astype(np.float64), "gradOutput": dy.astype(np.float64), **attrs, "isResult": is_result}
        with np.errstate(all="ignore"):
            ref = op.reference(t)
        for i in range(n):
            exact = op.exact({"selfOrResult": PackageFraction(float(x[i])), "gradOutput": PackageFraction(float(dy[i])),
                              **{k: PackageFraction(v) for k, v in attrs.items()}, "isResult": is_result})
            e = Decimal(exact.numerator) / Decimal(exact.denominator) if isinstance(exact, RATIONAL) else exact
            v = ref.value[i]
            if not np.isfinite(v):  # (the exact value is beyond float64: an infinity of every output dtype)
                assert abs(e) > Decimal(1.7e308) and np.sign(v) == (1 if e > 0 else -1), (x[i], dy[i], attrs)
                continue
            assert abs(Decimal(float(v)) - e) <= Decimal(float(ref.bound[i])), (x[i], dy[i], attrs, v, e)


def test_elu_edge_is_where_the_float32_exp_leaves_the_normal_range():
    op = find_op("aclnnEluBackward")
    x = np.array([-1.0, -87.0, -87.5, -104.0, -0.0, 2.0])
    t = {"selfOrResult": x, "gradOutput": np.ones(6), "alpha": 1.0, "scale": 1.0, "inputScale": 1.0, "isResult": False}
    where, device = op.edge(t)
    assert where.tolist() == [False, False, True, True, False, False]
    assert device[3] == 0.0  # (exp(-104) is 0 in float32)
    t["inputScale"] = -1.0  # exp(x * -1) overflows past x = -88.72
    where, device = op.edge({**t, "selfOrResult": np.array([-88.0, -89.0]), "gradOutput": np.ones(2)})
    assert where.tolist() == [False, True] and np.isinf(device[1])


def test_threshold_dispatch_to_relu_grad():
    """|threshold| <= FLT_EPSILON: ReluGrad (x > 0, dy * mask: NaN for an infinite dy at x <= 0); its value is the
    edge between 0 and the threshold; otherwise a select (+0)."""
    op = find_op("aclnnThresholdBackward")
    x = np.array([5e-8, -1.0, -1.0, 2e-7], dtype=F)
    dy = np.array([1.0, np.inf, -2.0, 3.0], dtype=F)
    relu = op.kernel({"self": x, "gradOutput": dy, "threshold": 1e-7})
    assert relu[0] == 1.0 and np.isnan(relu[1]) and relu[2] == 0.0 and np.signbit(relu[2]) and relu[3] == 3.0
    where, device = op.edge({"self": x.astype(np.float64), "gradOutput": dy.astype(np.float64), "threshold": 1e-7})
    assert where.tolist() == [True, False, False, False] and device[0] == 1.0
    ref = op.reference({"self": x.astype(np.float64), "gradOutput": dy.astype(np.float64), "threshold": 1e-7})
    assert ref.value[0] == 0.0  # (the doc's x > threshold)
    select = op.kernel({"self": x, "gradOutput": dy, "threshold": 0.5})
    assert select[1] == 0.0 and not np.signbit(select[2]) and select[3] == 0.0
    assert not op.edge({"self": x.astype(np.float64), "gradOutput": dy.astype(np.float64), "threshold": 0.0})[0].any()


def test_hardtanh_phase_one_ties_neither_out_dtype_nor_shape():
    op = find_op("aclnnHardtanhBackward")
    f32, f16 = lookup("float32"), lookup("float16")
    descs = {"gradOutput": C.TensorDesc(f32, (2, 3), False), "self": C.TensorDesc(f32, (2, 3), False),
             "out": C.TensorDesc(f16, (4,), False)}
    assert C.check(op, "A2", descs).status == C.SUCCESS
    assert C.check(op, "A2", {**descs, "self": C.TensorDesc(f16, (2, 3), False)}).status == C.INVALID
    assert C.check(op, "910", {**descs, "out": C.TensorDesc(lookup("bfloat16"), (2, 3), False)}).status == C.INVALID
    base = {n: C.TensorDesc(f32, (2, 3), False) for n in ("gradOutput", "self", "out")}
    labels = {r.label for r in C.rejections(op, "A2", base)}
    assert "dtype_mismatch_gradOutput" in labels and "shape_mismatch_self" in labels
    assert not {"dtype_mismatch_out", "shape_mismatch_out"} & labels


def _atk(inputs):
    return [{"id": 0, "name": "softshrink_backward", "aclnn_name": "aclnnSoftshrinkBackward", "inputs": inputs}]


def _tensor(name):
    return {"name": name, "type": "tensor", "required": True, "dtype": "fp16", "shape": [4], "range_values": [-2, 2]}


def test_an_unnamed_atk_input_is_the_api_argument_at_its_position(tmp_path):
    src = tmp_path / "atk_unnamed.json"
    scalar = {"name": None, "type": "scalar", "dtype": "fp32", "range_values": 1.5}
    src.write_text(json.dumps(_atk([_tensor(None), _tensor(None), scalar])))
    r = run_cli("convert", src, "-o", tmp_path / "y")
    assert r.exit_code == 0, r.output
    text = (tmp_path / "y" / "atk_unnamed.yaml").read_text()
    assert "gradOutput:" in text and "self:" in text and "lambda: 1.5" in text
    src.write_text(json.dumps(_atk([_tensor(None), _tensor(None), scalar, _tensor(None)])))
    r = run_cli("convert", src, "-o", tmp_path / "z")
    assert r.exit_code != 0 and "an unnamed input at position 3" in r.output
