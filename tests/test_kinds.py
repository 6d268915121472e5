"""The declaration fields of issue 19 on the case side: integer dtypes and the randint fill, callable default
fills, a tensor's own dtype list, optional tensors, int and bool_list attributes (case files, ids, manifest),
the contract's rules and rejections for them, and register's checks.

The ops are tests/kinds_standins.py's stand-ins (the real names and signatures; zero references),
added to the registry for each test and removed after it; CLI runs load them with --ops.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from aclnn_cli.cases import attributes as A
from aclnn_cli.values.fill import BLOCK, generate, parse_fill
from aclnn_cli.cases.loader import cases_from_doc
from aclnn_cli.errors import CaseError
from aclnn_cli.ops import OPS
from aclnn_cli.ops.contract import TensorDesc, check, compute_dtype, rejections

import kinds_standins as S
from clifork import cli_process
from helpers import one_line_error

STANDINS = Path(__file__).parent / "user_ops" / "_kinds_standins.py"


@pytest.fixture
def ops():
    with S.added():
        yield OPS


def cli(*args, ops_file: Path | None = None) -> subprocess.CompletedProcess:
    """A CLI run; with the stand-ins (--ops) while some of the six ops is not bundled."""
    if ops_file is None and any(s.name not in OPS for s in S.STANDINS):
        ops_file = STANDINS
    env = {k: v for k, v in os.environ.items() if k != "ACLNN_CLI_OPS"}
    ops = ["--ops", str(ops_file)] if ops_file else []
    return cli_process(*ops, *map(str, args), env=env)


def load(op: str, cases: list[dict], defaults: dict | None = None):
    return cases_from_doc("t.yaml", {"op": op, **({"defaults": defaults} if defaults else {}), "cases": cases})


# ---- integer dtypes and the randint fill ----------------------------------------------------------------------

def test_integer_dtypes_have_their_numpy_types_and_acl_ids():
    """ACL ids from CANN's acl_base.h (aclDataType): ACL_INT32 3, ACL_UINT8 4, ACL_INT64 9."""
    for name, np_type, acl, lo, hi in (("int64", np.int64, 9, -2**63, 2**63 - 1), ("int32", np.int32, 3, -2**31, 2**31 - 1),
                                       ("uint8", np.uint8, 4, 0, 255)):
        d = D.lookup(name)
        assert d.np_dtype == np.dtype(np_type) and d.acl_id == acl and d.is_integer and d.int_range == (lo, hi)
    assert not D.FLOAT16.is_integer and D.FLOAT16.int_range == (-2048, 2048)
    assert D.lookup("long") is D.INT64


def test_randint_is_the_documented_stream_chunk_independent_and_inclusive():
    """Block b of the tensor is Generator(PCG64(SeedSequence([seed, slot, b]))).integers(lo, hi, endpoint=True),
    redrawn here with numpy directly; any cut of the tensor gives the same elements."""
    f = parse_fill({"randint": [-3, 4]})
    n = BLOCK + 1000
    whole = generate(f, D.INT64, 11, 2, 0, n)
    expect = np.concatenate([np.random.Generator(np.random.PCG64(np.random.SeedSequence([11, 2, b])))
                             .integers(-3, 4, size=min(BLOCK, n - b * BLOCK), endpoint=True) for b in (0, 1)])
    assert np.array_equal(whole, expect) and whole.dtype == np.int64
    assert set(np.unique(whole)) == set(range(-3, 5))  # both ends drawn
    for cut in (1, 777, BLOCK - 1, BLOCK, BLOCK + 3):
        parts = np.concatenate([generate(f, D.INT64, 11, 2, 0, cut), generate(f, D.INT64, 11, 2, cut, n)])
        assert np.array_equal(parts, whole)
    as_u8 = generate(parse_fill({"randint": [0, 255]}), D.UINT8, 5, 0, 0, 4096)
    assert as_u8.dtype == np.uint8 and as_u8.min() == 0 and as_u8.max() == 255


def test_sprinkle_sets_its_share_and_leaves_the_other_draws_alone():
    plain = generate(parse_fill({"randint": [0, 9]}), D.INT32, 3, 1, 0, 50_000)
    spr = generate(parse_fill({"randint": [0, 9], "sprinkle": {"value": -100, "share": 0.25}}), D.INT32, 3, 1, 0, 50_000)
    hit = spr == -100
    assert np.array_equal(spr[~hit], plain[~hit])
    u = np.concatenate([np.random.Generator(np.random.PCG64(np.random.SeedSequence([3, 1, b, 1]))).random(
        min(BLOCK, 50_000 - b * BLOCK)) for b in (0,)])
    assert np.array_equal(hit, u < 0.25)  # the sprinkle's own stream (key [seed, slot, block, 1])
    assert parse_fill({"randint": [0, 9], "sprinkle": {"value": 1, "share": 0}}).generate(D.INT64, 3, 1, 0, 10).min() >= 0


def test_fill_bytes_are_pinned():
    """Reproducible bytes across machines and numpy releases (PCG64 and Generator.integers are stable): 1000
    int64 draws (seed 7, slot 2), plain and sprinkled, as recorded when the fill was written."""
    a = generate(parse_fill({"randint": [0, 999]}), D.INT64, 7, 2, 0, 1000)
    b = generate(parse_fill({"randint": [0, 999], "sprinkle": {"value": -1, "share": 0.5}}), D.INT64, 7, 2, 0, 1000)
    assert a[:6].tolist() == [281, 277, 152, 445, 428, 933] and b[:6].tolist() == [-1, 277, 152, 445, -1, 933]
    assert hashlib.sha256(a.tobytes()).hexdigest()[:16] == "b8623875c4bd9750"
    assert hashlib.sha256(b.tobytes()).hexdigest()[:16] == "c4c877eff241a22f"


@pytest.mark.parametrize("spec, dtype, message", [
    ({"uniform": [0, 5]}, D.INT64, "'uniform' draws non-integers"),
    ({"values": [1, 2.5]}, D.INT32, "value 2.5 is not an integer"),
    ({"constant": 256}, D.UINT8, "value 256 is outside what uint8 holds, [0, 255]"),
    ({"randint": [-1, 3]}, D.UINT8, "value -1 is outside what uint8 holds"),
    ({"randint": [0, 2**31]}, D.INT32, "outside what int32 holds"),
    ({"randint": [0, 3], "sprinkle": {"value": -100, "share": 0.1}}, D.UINT8, "value -100 is outside"),
    ({"randint": [0, 5000]}, D.FLOAT16, "outside what float16 holds exactly, [-2048, 2048]"),
])
def test_a_fill_a_dtype_cannot_hold_is_refused(spec, dtype, message):
    assert message in parse_fill(spec).check(dtype)


def test_a_normal_on_an_integer_tensor_is_its_draws_rounded_toward_zero_and_held_in_range():
    """ATK's nd distribution on an integer input (SoftplusBackward's int8 self): the float draws, cast as C
    casts them (toward zero), saturated at the dtype's range; the same float draws a float tensor rounds."""
    from aclnn_cli.values.fill import generate

    fill = parse_fill({"normal": [-3, 60]})
    assert fill.check(D.INT8) is None
    floats = generate(fill, D.FLOAT64, 11, 0, 0, 5000)
    ints = generate(fill, D.INT8, 11, 0, 0, 5000)
    assert ints.dtype == np.int8 and ints.min() == -128 and ints.max() == 127
    inside = (floats > -128) & (floats < 127)
    assert np.array_equal(ints[inside], np.trunc(floats[inside]).astype(np.int8))
    assert (ints[floats <= -128] == -128).all() and (ints[floats >= 127] == 127).all()


@pytest.mark.parametrize("spec, message", [
    ({"randint": [3, 1]}, "lo <= hi"), ({"randint": [0.5, 2]}, "two integers"), ({"randint": [0, 2**63]}, "int64"),
    ({"randint": [0, 1], "sprinkle": {"value": 1}}, "{value: v, share: p}"),
    ({"randint": [0, 1], "sprinkle": {"value": 1, "share": 2}}, "share must be in [0, 1]"),
    ({"randint": [0, 1], "sprinkle": {"value": 1.5, "share": 0.1}}, "value must be an int64 integer"),
    ({"randint": [0, 1], "uniform": [0, 1]}, "only 'sprinkle'"),
])
def test_bad_randint_is_one_message(spec, message):
    with pytest.raises(ValueError, match=None) as exc:
        parse_fill(spec)
    assert message in str(exc.value)


def test_integral_values_fill_an_int_tensor_exactly():
    v = generate(parse_fill({"values": [0, -100, 3]}), D.INT64, 0, 0, 0, 5)
    assert v.tolist() == [0, -100, 3, 0, -100]


# ---- case files: own dtypes, callable default fills, optional tensors, attributes -------------------------

def test_a_tensor_with_its_own_dtypes_takes_the_case_dtype_or_its_first(ops):
    cases = load("aclnnNLLLossBackward", [{"name": "a", "dtype": "float16", "shape": [6, 5]}])
    t = {x.name: x.dtype.name for x in cases[0].tensors}
    assert t == {"gradOutput": "float16", "self": "float16", "target": "int64", "weight": "float16",
                 "totalWeight": "float16", "out": "float16"}
    rms = load("aclnnRmsNormGrad", [{"name": "a", "dtype": "bfloat16", "shape": [3, 8]}])[0]
    assert {x.name: x.dtype.name for x in rms.tensors}["rstd"] == "float32"
    assert {x.name: x.dtype.name for x in rms.tensors}["dgammaOut"] == "float32"
    assert {x.name: x.dtype.name for x in rms.tensors}["gamma"] == "bfloat16"  # in its list: the case's


def test_per_tensor_dtypes_expand_and_name_the_cases(ops):
    cases = load("aclnnNLLLossBackward", [{"name": "t", "dtype": "float32", "shape": [4, 3],
                                           "tensors": {"target": {"dtype": ["int32", "uint8"]}},
                                           "attributes": {"ignoreIndex": 1}}])
    assert [c.case_id for c in cases] == ["nll_loss_backward-t-i32", "nll_loss_backward-t-u8"]
    ln = load("aclnnLayerNormBackward", [{"name": "m", "dtype": "float16", "shape": [4, 6],
                                          "attributes": {"normalizedShape": [6]},
                                          "tensors": {"mean": {"dtype": "float32"}, "rstd": {"dtype": "float32"}}}])
    assert {t.name: t.dtype.name for t in ln[0].tensors}["mean"] == "float32"


def test_callable_default_fill_sees_the_case_shapes_and_attributes(ops):
    cases = load("aclnnNLLLossBackward", [{"name": "c", "dtype": "float32", "shape": [[40, 7], [9]],
                                           "attributes": {"ignoreIndex": [3, -5], "reduction": 0}}])
    fills = {(c.case_id): next(t.fill for t in c.tensors if t.name == "target") for c in cases}
    assert fills["nll_loss_backward-c-40x7-ignoreIndex3"].describe() == \
        {"randint": [0, 6], "sprinkle": {"value": 3, "share": 0.125}}
    assert fills["nll_loss_backward-c-9-ignoreIndex-5"].describe() == \
        {"randint": [0, 8], "sprinkle": {"value": -5, "share": 0.125}}


def test_a_fill_the_tensor_cannot_hold_names_the_case_and_key(ops):
    with pytest.raises(CaseError) as exc:  # the op's default: ignoreIndex -100 cannot be a uint8 class
        load("aclnnNLLLossBackward", [{"name": "u", "dtype": "float32", "shape": [4, 3], "tensors": {"target": {"dtype": "uint8"}}}])
    assert "case 'u'" in str(exc.value) and "inputs.target" in str(exc.value) and "-100 is outside" in str(exc.value)
    with pytest.raises(CaseError) as exc:
        load("aclnnNLLLossBackward", [{"name": "f", "dtype": "float32", "shape": [4, 3], "inputs": {"target": {"uniform": [0, 2]}}}])
    assert "inputs.target" in str(exc.value) and "draws non-integers" in str(exc.value)


def test_int_and_bool_list_attributes_expand_and_name_cases(ops):
    cases = load("aclnnLayerNormBackward", [{"name": "m", "dtype": "float32", "shape": [2, 3, 4],
                                             "attributes": {"normalizedShape": [[4], [3, 4]],
                                                            "outputMask": [[True, False, True], [True, True, True]]}}])
    assert [c.case_id for c in cases] == [
        "layer_norm_backward-m-normalizedShape4-outputMask1x0x1", "layer_norm_backward-m-normalizedShape4-outputMask1x1x1",
        "layer_norm_backward-m-normalizedShape3x4-outputMask1x0x1", "layer_norm_backward-m-normalizedShape3x4-outputMask1x1x1"]
    assert cases[0].attribute_values == {"normalizedShape": (4,), "outputMask": (True, False, True)}
    one = load("aclnnLayerNormBackward", [{"name": "o", "dtype": "float32", "shape": [2, 4],
                                           "attributes": {"normalizedShape": [4], "outputMask": [False, True, True]}}])
    assert len(one) == 1 and one[0].attribute_values["outputMask"] == (False, True, True)
    dims = load("aclnnSoftmaxBackward", [{"name": "d", "dtype": "float32", "shape": [2, 4], "attributes": {"dim": [-1, 0]}}])
    assert [c.case_id for c in dims] == ["softmax_backward-d-dim-1", "softmax_backward-d-dim0"]


@pytest.mark.parametrize("attrs, message", [
    ({"dim": 1.5}, "expected an int64 integer"), ({"dim": True}, "expected an int64 integer"),
    ({"dim": 2**63}, "expected an int64 integer"),
])
def test_bad_int_attribute_is_a_case_error(ops, attrs, message):
    with pytest.raises(CaseError, match="attributes.dim") as exc:
        load("aclnnSoftmaxBackward", [{"name": "d", "dtype": "float32", "shape": [2, 4], "attributes": attrs}])
    assert message in str(exc.value)


def test_bool_list_refuses_non_bools(ops):
    with pytest.raises(CaseError) as exc:
        load("aclnnLayerNormBackward", [{"name": "b", "dtype": "float32", "shape": [2, 4],
                                         "attributes": {"normalizedShape": [4], "outputMask": [1, 0, 1]}}])
    assert "attributes.outputMask" in str(exc.value) and "list of true/false" in str(exc.value)


def test_every_kind_round_trips_through_the_manifest(ops):
    for op, attrs in (("aclnnLayerNormBackward", {"normalizedShape": [3, 4], "outputMask": [False, True, False]}),
                      ("aclnnNLLLossBackward", {"reduction": 2, "ignoreIndex": -2**63}),
                      ("aclnnSoftmaxBackward", {"dim": -3})):
        case = load(op, [{"name": "r", "dtype": "float32", "shape": [2, 3, 4] if op != "aclnnNLLLossBackward" else [3, 4],
                          "attributes": attrs}])[0]
        written = json.loads(json.dumps(A.to_manifest(case.op, case.attributes)))
        assert [e["kind"] for e in written] == [a.kind for a in case.op.attributes]
        assert A.from_manifest(case.op, written) == case.attributes
        wrong = [dict(e, kind="scalar") for e in written]
        with pytest.raises(ValueError, match="must be of kind"):
            A.from_manifest(case.op, wrong)


# ---- the contract ---------------------------------------------------------------------------------------------

def descs(op, dtype="float16", **changes):
    """A valid call of a stand-in, as the loader builds it (shapes from a (4, 6) driver)."""
    case = load(op.name, [{"name": "v", "dtype": dtype, "shape": [4, 6],
                           **({"attributes": {"normalizedShape": [6]}} if op.name == "aclnnLayerNormBackward" else {})}])[0]
    out = {t.name: TensorDesc(t.dtype, t.layout.shape, t.null) for t in case.tensors}
    return {**out, **changes}, dict(case.attributes)


def test_null_optional_tensor_is_fine_and_a_required_one_is_161001(ops):
    ln = OPS["aclnnLayerNormBackward"]
    d, attrs = descs(ln)
    assert check(ln, "A2", d, attrs).status == SUCCESS
    for name in ("weightOptional", "biasOptional"):
        assert check(ln, "A2", {**d, name: TensorDesc(D.FLOAT64, (9, 9, 9), True)}, attrs).status == SUCCESS
    off = {**attrs, "outputMask": (True, False, True)}  # an output switched off may be null
    assert check(ln, "A2", {**d, "gradWeightOut": TensorDesc(D.FLOAT64, (9, 9, 9), True)}, off).status == SUCCESS
    out = check(ln, "A2", {**d, "mean": TensorDesc(D.FLOAT32, (4, 1), True)}, attrs)
    assert (out.status, out.rule, out.field) == (NULLPTR, "mean is a null pointer", "tensors.mean.nullptr")


def test_own_dtype_lists_are_checked_alone_and_left_out_of_the_relation(ops):
    nll = OPS["aclnnNLLLossBackward"]
    d, attrs = descs(nll, "bfloat16")
    for dt in (D.INT64, D.INT32, D.UINT8):
        assert check(nll, "A2", {**d, "target": TensorDesc(dt, (4,))}, attrs).status == SUCCESS
    bad = check(nll, "A2", {**d, "target": TensorDesc(D.FLOAT32, (4,))}, attrs)
    assert bad.status == INVALID and bad.rule == "target dtype float32 is not supported (supported: int64, int32, uint8)"
    same = check(nll, "A2", {**d, "weight": TensorDesc(D.FLOAT32, (6,))}, attrs)
    assert same.status == INVALID and "dtypes differ" in same.rule and "target" not in same.rule
    assert compute_dtype(nll, {n: x.dtype for n, x in d.items()}) == D.BFLOAT16
    ln = OPS["aclnnLayerNormBackward"]
    d, attrs = descs(ln, "float16")
    fp32_stats = {**d, "mean": TensorDesc(D.FLOAT32, (4, 1)), "rstd": TensorDesc(D.FLOAT32, (4, 1))}
    assert check(ln, "A2", fp32_stats, attrs).status == SUCCESS
    # promote: the statistics (own list) do not promote the computation to float32
    assert compute_dtype(ln, {n: x.dtype for n, x in fp32_stats.items()}) == D.FLOAT16


def test_compute_dtype_ignores_integer_tensors():
    mse = next(s for s in S.STANDINS if s.name == "aclnnMseLossBackward")
    dts = {"gradOutput": D.BFLOAT16, "self": D.BFLOAT16, "target": D.INT32, "out": D.BFLOAT16}
    assert compute_dtype(mse, dts) == D.BFLOAT16


def test_shape_rule_runs_after_the_dims_check():
    import dataclasses
    seen = []

    def rule(d, attrs):
        seen.append(attrs)
        return "x and y disagree" if d["output"].shape[-1] == 5 else None
    sm = next(s for s in S.STANDINS if s.name == "aclnnSoftmaxBackward")
    sm = dataclasses.replace(sm, contract=dataclasses.replace(sm.contract, shape_rule=rule))
    ok = {n: TensorDesc(D.FLOAT32, (2, 4)) for n in ("gradOutput", "output", "out")}
    assert check(sm, "A2", ok, {"dim": 0}).status == SUCCESS and seen == [{"dim": 0}]
    five = {n: TensorDesc(D.FLOAT32, (2, 5)) for n in ("gradOutput", "output", "out")}
    assert (check(sm, "A2", five, {}).status, check(sm, "A2", five, {}).rule) == (INVALID, "x and y disagree")
    nine = {n: TensorDesc(D.FLOAT32, (1,) * 8 + (5,)) for n in ("gradOutput", "output", "out")}
    assert "9 dims" in check(sm, "A2", nine, {}).rule  # dims first: the rule never saw it
    assert seen[-1] == {"dim": -1}  # (the default, for the two calls on `five`)


def test_rejections_of_the_new_fields(ops):
    nll = OPS["aclnnNLLLossBackward"]
    d, attrs = descs(nll, "float32")
    got = {r.label: (r.status, r.rule) for r in rejections(nll, "A2", d, attrs)}
    assert got["null_target"] == (NULLPTR, "target is a null pointer")
    assert got["dtype_float64_target"] == (INVALID, "target dtype float64 is not supported (supported: int64, int32, uint8)")
    assert got["dtype_mismatch_gradOutput"][0] == INVALID
    assert got["dtype_float64"][1].startswith("gradOutput dtype float64")
    ln = OPS["aclnnLayerNormBackward"]
    d, attrs = descs(ln, "float16")
    d = {**d, "biasOptional": TensorDesc(D.FLOAT16, (6,), True)}
    labels = [r.label for r in rejections(ln, "910", d, attrs)]
    assert "null_weightOptional" not in labels and "null_gradInputOut" not in labels and "null_mean" in labels
    assert "dtype_float64_biasOptional" not in labels and "dtype_float64_rstd" in labels  # (null: no dtype)
    assert "dtype_bfloat16_on_910" in labels and all(check(ln, "910", r.tensors, attrs).status != SUCCESS
                                                     for r in rejections(ln, "910", d, attrs))


def test_contract_true_makes_the_negatives_through_the_loader(ops):
    cases = load("aclnnNLLLossBackward", [{"name": "n", "dtype": "float32", "shape": [4, 3], "contract": True}])
    by = {c.case_id.rsplit("-", 1)[-1]: c for c in cases}
    target = next(t for t in by["dtype_float64_target"].tensors if t.name == "target")
    assert target.dtype == D.FLOAT64 and target.fill.check(D.FLOAT64) is None  # a fill the new dtype holds
    assert all(c.expect_status != SUCCESS for c in cases)


# ---- register's checks and the CLI ----------------------------------------------------------------------------

PROBE = {
    "tensors": "(TensorSpec('dy', 'input', {'normal': [0, 1]}), TensorSpec('x', 'input', {'normal': [0, 1]}), "
               "TensorSpec('idx', 'input', {'randint': [0, 3]}, dtypes=('int64',)), TensorSpec('out', 'output', {'constant': 0}))",
    "attributes": "(AttrSpec('dim', 'int', default=-1), AttrSpec('mask', 'bool_list', default=(True,)))",
    "family": "Rows(driver='x', axes=dim_axis('x'), per_row=('idx',))",
}


def probe(**changes: str) -> str:
    """A user op module declaring aclnnKindsProbe, with some keywords of its OpSpec changed."""
    keywords = ", ".join(f"{k}={v}" for k, v in {**PROBE, **changes}.items())
    return f"""
import numpy as np
from aclnn_cli.ops import OpSpec, register
from aclnn_cli.ops.base import AttrSpec, Reference, TensorSpec, products
from aclnn_cli.ops.families import Rows, dim_axis

def ref(t):
    z = np.zeros(np.shape(t["x"]))
    return Reference(z, z, z)

register(OpSpec(name="aclnnKindsProbe", key="kinds_probe", summary="s", formula="f", products=products("A2"),
                dims=(0, 8), empty_ok=True, reference=ref, {keywords}))
"""


TWO = "(TensorSpec('dy', 'input', {'normal': [0, 1]}, dtypes=DT), TensorSpec('x', 'input', {'constant': 0}), TensorSpec('out', 'output', {'constant': 0}))"


@pytest.mark.parametrize("changes, needles", [
    ({"attributes": "(AttrSpec('dim', 'int64_t'),)"},
     ("attributes[0].kind", "expected one of scalar, bool, string, int_list, int, bool_list, double, float, got 'int64_t'")),
    ({"attributes": "(AttrSpec('lr', 'float_list'),)"}, ("attributes[0].kind", "got 'float_list'")),  # (decision 84)
    ({"attributes": "(AttrSpec('hx', 'tensor_list'),)"}, ("attributes[0].kind", "got 'tensor_list'")),
    ({"family": "Rows(driver='out', axes=dim_axis('x'))"}, ("family.driver", "expected one of dy, x, idx")),
    ({"family": "Rows(driver='x', axes=dim_axis('x'), per_row=('nope',))"}, ("family.per_row[0]",)),
    ({"family": "Rows(driver='x', axes=dim_axis('x'), per_row=('x',))"}, ("family.per_row", "cannot be per-row too")),
    ({"family": "Rows(driver='x', axes=dim_axis('x'), across_rows=('dy',))"}, ("family.across_rows[0]", "expected one of out")),
    ({"family": "Rows(driver='x', axes=dim_axis('x'), kernel_chunk=-1)"}, ("family.kernel_chunk", "got -1")),
    ({"family": "Rows(driver='x', axes=dim_axis('x'), kernel_chunk=1.5)"}, ("family.kernel_chunk", "got 1.5")),
    ({"family": "Rows(driver='x', axes=dim_axis('x'), kernel_chunk=1 << 40)"}, ("family.kernel_chunk", "0 to 2^24")),
    ({"family": "Rows(driver='x', axes=dim_axis('x'), across_rows=('out',), kernel_chunk=1 << 20)"},
     ("family.kernel_chunk", "chunk by chunk")),
    ({"family": "'rows'"}, ("family", "expected Elementwise(), Rows(...), Channels(...) or Split(...)")),
    ({"signature": "('dy', 'x', 'idx', 'dim', 'out')"}, ("signature", "missing mask")),
    ({"signature": "('dy', 'x', 'idx', 'dim', 'mask', 'out', 'dy')"}, ("signature", "twice: dy")),
    ({"signature": "('dy', 'x', 'idx', 'dim', 'mask', 'y')"}, ("signature[5]",)),
    ({"tensors": TWO.replace("DT", "('int4',)"), "family": "Rows(driver='x', axes=dim_axis('x'))"},
     ("tensors[0].dtypes[0]", "got 'int4'")),
    ({"tensors": TWO.replace("DT", "()"), "family": "Rows(driver='x', axes=dim_axis('x'))"},
     ("tensors[0].dtypes", "at least one")),
    ({"attributes": "(AttrSpec('mask', 'bool_list', default=(1, 0)),)"}, ("attributes[0].default", "true/false")),
    ({"attributes": "(AttrSpec('dim', 'int', default=0.5),)"}, ("attributes[0].default", "int64 integer")),
    ({"tensors": PROBE["tensors"].replace("{'randint': [0, 3]}", "lambda s, a: {}").replace("{'normal'", "{'nrml'", 1)},
     ("tensors[0].default_fill", "unknown generator 'nrml'")),
])
def test_register_refuses_a_bad_declaration_in_one_line(tmp_path, changes, needles):
    f = tmp_path / "probe.py"
    f.write_text(probe(**changes))
    line = one_line_error(cli("ops", ops_file=f), "aclnnKindsProbe", *needles)
    assert str(f) in line


def test_the_probe_itself_registers_and_lists_its_kinds(tmp_path):
    f = tmp_path / "probe.py"
    f.write_text(probe())
    r = cli("ops", "--json", ops_file=f)
    assert r.returncode == 0, r.stderr
    info = next(o for o in json.loads(r.stdout) if o["op"] == "aclnnKindsProbe")
    assert info["signature"] == ["dy", "x", "idx", "dim", "mask", "out"]
    assert info["attributes"] == [{"name": "dim", "kind": "int", "optional": False, "default": -1},
                                   {"name": "mask", "kind": "bool_list", "optional": False, "default": [True]}]
    assert [t["dtypes"] for t in info["tensors"]] == [None, None, ["int64"], None]
    one_line_error(cli("ops", ops_file=tmp_path / "none.py"), "no op file")  # (the CLI's own line for a path)


def test_gen_emulate_verify_with_int_tensors_bool_lists_and_null_optionals(tmp_path):
    """The whole loop (on the bundled ops, or the stand-ins): verify reads back what gen wrote (attributes of every new kind, an int64,
    int32 and uint8 target, a null optional weight and a switched-off output) and passes every case."""
    cases = tmp_path / "c.yaml"
    cases.write_text("""\
op: aclnnLayerNormBackward
cases:
  - name: m
    dtype: float16
    shape: [4, 6]
    attributes: {normalizedShape: [6], outputMask: [[true, false, true]]}
    tensors: {mean: {dtype: float32}, rstd: {dtype: float32}, weightOptional: {nullptr: true},
              gradWeightOut: {nullptr: true}}
  - name: neg
    dtype: float16
    shape: [4, 6]
    attributes: {normalizedShape: [6]}
    contract: true
""")
    nll = tmp_path / "n.yaml"
    nll.write_text("""\
op: aclnnNLLLossBackward
cases:
  - name: t
    dtype: float32
    shape: [5, 4]
    attributes: {ignoreIndex: 2, reduction: [0, 2]}
    tensors: {target: {dtype: [int64, int32, uint8]}}
""")
    out = tmp_path / "out"
    for args in (("gen", cases, nll, "-o", out), ("emulate", out), ("verify", out)):
        r = cli(*args)
        assert r.returncode == 0, r.stdout + r.stderr
    m = json.loads((out / "nll_loss_backward-t-reduction0-u8" / "case.json").read_text()) if \
        (out / "nll_loss_backward-t-reduction0-u8").exists() else \
        json.loads(next(out.glob("nll_loss_backward-t-u8*/case.json")).read_text())
    target = next(t for t in m["tensors"] if t["name"] == "target")
    assert (target["dtype"], target["acl_dtype"], target["fill"]) == \
        ("uint8", 4, {"randint": [0, 3], "sprinkle": {"value": 2, "share": 0.125}})
    data = np.fromfile(next(out.glob("nll_loss_backward-t-*u8*")) / target["file"], dtype=np.uint8)
    assert data.size == 5 and set(data.tolist()) <= {0, 1, 2, 3}
    ln = json.loads((out / "layer_norm_backward-m" / "case.json").read_text())
    assert ln["attributes"][1] == {"name": "outputMask", "kind": "bool_list", "value": [True, False, True]}
    assert [t["name"] for t in ln["tensors"] if t.get("null")] == ["weightOptional", "gradWeightOut"]


def test_a_callable_default_fill_that_fails_is_one_line(tmp_path):
    f = tmp_path / "probe.py"
    f.write_text(probe(tensors=PROBE["tensors"].replace("{'randint': [0, 3]}", "lambda shapes, attrs: 1 // 0")))
    cases = tmp_path / "c.yaml"
    cases.write_text("op: aclnnKindsProbe\ncases:\n  - {name: c, dtype: float32, shape: [3, 4]}\n")
    one_line_error(cli("gen", cases, "-o", tmp_path / "out", ops_file=f), "case 'c'", "inputs.idx",
             "aclnnKindsProbe's default fill for idx", "ZeroDivisionError")
