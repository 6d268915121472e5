"""Issue 3: strided views, poison and canary, broadcast, promotion, products and the API's rejections."""

from __future__ import annotations

import json

import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.casedir import manifest as M
from aclnn_cli.casedir import dirs as casedirs
from aclnn_cli.cases.loader import load_cases
from aclnn_cli.cli.main import BUNDLED
from aclnn_cli.values.fill import generate
from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops import OPS
from aclnn_cli.ops.contract import check, rejections, TensorDesc
from aclnn_cli.tensor.storage import canary
from aclnn_cli.judge.verify import verify_case

import harness
from helpers import run_cli, write_yaml


@pytest.fixture(scope="module")
def suite(bundled_gen):
    return bundled_gen  # (conftest.py: gen of the bundled suite, shared by the session; read only)


@pytest.fixture(scope="module")
def bundled_cases():
    """The bundled case files loaded once for the module's tests (each only reads them): a load is about a second."""
    return load_cases([BUNDLED])


def _last_writer_values(t: dict, case, tc) -> np.ndarray:
    """What each view element holds when the view overlaps itself: the last logical index writing it wins."""
    n = int(np.prod(t["shape"]))
    values = generate(tc.fill, tc.dtype, case.seed, tc.slot, 0, n)
    pos = tc.layout.storage_index(np.arange(n))
    last = {}
    for i, p in enumerate(pos):
        last[int(p)] = i
    return values[[last[int(p)] for p in pos]].reshape(t["shape"])


def test_every_generated_tensor_reads_back_through_its_manifest(suite, bundled_cases):
    cases = {c.case_id: c for c in bundled_cases}
    checked = 0
    for d in casedirs.find_cases(suite):
        m = harness.load(d)
        case = cases[m["case_id"]]
        if case.numel > 200_000:
            continue
        ts = harness.tensors(m)
        out = next(t for t in m["tensors"] if t["role"] == "output")
        logical = {}
        for tc in case.tensors:
            t = ts[tc.name]
            if t.get("null"):
                assert not (d / f"{tc.name}.bin").exists()
                continue
            buf = harness.storage(d, t)
            assert buf.size == t["storage_shape"][0]
            got = harness.view(buf, t)
            if tc.role == "input":
                overlapping = 0 in t["strides"] and int(np.prod(t["shape"])) > 1
                if tc.fill.kind != "derived":  # (a derived input: its op's test checks it against the derivation)
                    want = _last_writer_values(t, case, tc) if overlapping else \
                        generate(tc.fill, tc.dtype, case.seed, tc.slot, 0, int(np.prod(t["shape"]))).reshape(t["shape"])
                    np.testing.assert_array_equal(got.view(tc.dtype.uint_dtype), want.view(tc.dtype.uint_dtype))
                logical[tc.name] = got
                outside = np.ones(buf.size, bool)
                outside[tc.layout.storage_index(np.arange(int(np.prod(t["shape"]))))] = False
                if buf.dtype.kind in "iu":  # (an integer's poison: its minimum, an unsigned one's maximum)
                    info = np.iinfo(buf.dtype)
                    assert (buf[outside] == (info.min if info.min < 0 else info.max)).all(), "poisoned"
                else:
                    parts = (buf[outside].real, buf[outside].imag) if buf.dtype.kind == "c" else \
                        (buf[outside].astype(np.float64),)  # (a complex tensor's poison: NaN in both parts)
                    assert all(np.isnan(p).all() for p in parts), "input storage outside the view is poisoned"
            else:
                assert (buf.view(tc.dtype.uint_dtype) == canary(tc.dtype).view(tc.dtype.uint_dtype)).all()
        if m["expect_status"] == 0 and case.op.family.element_local:  # (rows goldens: tests/test_op_*)
            gbuf = harness.storage(d, out, "golden")
            shape = out["shape"]
            ins = {n: np.broadcast_to(v, shape).reshape(-1) for n, v in logical.items()}
            want, _ = golden(case.op, ins, D.lookup(out["dtype"]), case.attribute_values)
            u = D.lookup(out["dtype"]).uint_dtype
            np.testing.assert_array_equal(harness.view(gbuf, out).reshape(-1).view(u), want.view(u))
            inside = np.zeros(gbuf.size, bool)
            inside[case.output.layout.storage_index(np.arange(case.numel))] = True
            assert (gbuf[~inside].view(u) == canary(case.output.dtype).view(u)).all()
        checked += 1
    assert checked > 250


# The generated single-op APIs of graph-only ops (no op_api in ops-nn) take no views in their bundled cases: whether
# a generated API makes a view contiguous is not in ops-nn (decision 197). LayerNormGrad's strided case assumes it
# does, its stride 0 is not assumed.
GENERATED_NO_VIEWS = {"aclnnInstanceNormGrad", "aclnnL2NormalizeGrad", "aclnnMishGrad", "aclnnSoftmaxGradExt"}
STRIDE0_MISSING: set[str] = GENERATED_NO_VIEWS | {"aclnnLayerNormGrad"}


def test_bundled_suite_has_every_layout_kind_per_op(bundled_cases):
    cases = [c for c in bundled_cases if c.expect_status == 0]
    for op in OPS.values():
        mine = [c for c in cases if c.op is op]
        layouts = [t.layout for c in mine for t in c.tensors]
        if op.name not in GENERATED_NO_VIEWS:
            assert any(not l.is_contiguous and l.offset > 0 for l in layouts), op.name
        if op.name not in STRIDE0_MISSING:
            assert any(0 in l.strides for l in layouts), op.name
        if op.dims[1] >= 8:  # (NLL takes 1-2 dims)
            assert any(len(l.shape) == 8 for l in layouts), op.name
        if op.dims[0] == 0 and op.family.element_local:  # (a rows op's 0-d case: its op tests)
            assert any(c.output.layout.shape == () for c in mine)
        if op.empty_ok:
            assert any(any(t.layout.numel == 0 for t in c.inputs if not t.null) for c in mine), op.name
    silu = [c for c in cases if c.op.key == "silu_backward"]
    assert any(len({t.layout.shape for t in c.tensors}) > 1 for c in silu), "broadcast"
    assert any(len({t.dtype for t in c.inputs}) > 1 for c in silu), "mixed precision"
    hs = {(c.inputs[0].dtype.name, c.inputs[1].dtype.name, c.output.dtype.name)
          for c in cases if c.op.key == "hardsigmoid_backward"}
    assert len(hs) >= 27


@pytest.fixture()
def strided_case(tmp_path):
    text = """
op: aclnnSiluBackward
cases:
  - name: s
    dtype: float32
    shape: [6, 5]
    tensors:
      gradInput: {layout: {strides: [10, 1], offset: 22, tail: 3}}
"""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    d = out / "silu_backward-s"
    return out, d, M.load(d)


def test_kernel_ignoring_output_strides_fails_as_layout(strided_case):
    out, d, m = strided_case
    o = m.output
    assert (o.layout.strides, o.layout.offset) == ((10, 1), 22)  # the CANN docs' example view
    initial = np.fromfile(o.file, dtype=np.float32)
    correct = harness.view(np.fromfile(o.dump, dtype=np.float32), harness.tensors(m.raw)["gradInput"]).reshape(-1)
    broken = initial.copy()
    broken[:30] = correct  # written packed from storage index 0
    broken.tofile(o.dump)
    result = run_cli("verify", out)
    assert result.exit_code == 1
    assert "LAYOUT" in result.output and "wrote outside the view: " in result.output
    assert "first at storage index 0" in result.output


def test_one_element_past_the_view_fails_as_layout(strided_case):
    out, d, m = strided_case
    o = m.output
    dump = np.fromfile(o.dump, dtype=np.float32)
    last = 22 + 5 * 10 + 4
    dump[last + 1] = 1.0
    dump.tofile(o.dump)
    r = verify_case(M.load(d))
    assert r.status == "LAYOUT" and f"wrote outside the view: 1 elements, first at storage index {last + 1}" in r.reason
    assert "values inside the view: MERE" in r.reason


def test_every_documented_rejection_is_a_generated_negative_case(bundled_cases):
    """Each op's bundled `contract: true` cases hold the rejections its declaration implies: a null for every
    required tensor, an unsupported dtype for the tensors the contract ties and one outside each own dtype list,
    the dtype relations, dims, and (elementwise) the shape relations. A rows op's shapes are its shape_rule's;
    a rows op whose case file writes its negatives by hand (no `contract: true` on a product) is not checked here."""
    cases = [c for c in bundled_cases if c.expect_status != 0]
    for op in OPS.values():
        rows = not op.family.element_local
        tied = [t.name for t in op.tensors if t.dtypes is None and (op.contract.out_checked or t.role != "output")]
        for product in op.products:
            # (a case id names its product where the case spans several: an op of one product, MishGrad's, does not)
            mine = [c for c in cases if c.op is op and (len(op.products) == 1 or f"-{product}-" in c.case_id)]
            labels = {c.case_id.rsplit("-", 1)[1] for c in mine}
            if rows and not any(label.startswith("null_") for label in labels):
                continue  # (a rows op may write its negative cases by hand instead of `contract: true`)
            want = {f"null_{t.name}" for t in op.tensors if not t.optional}
            want |= {"dtype_float64"} if "float64" not in op.contract.also_accepts else set()
            want |= {"dims_9"} if op.contract.checks_dims else set()
            own = {t.name for t in op.tensors if t.dtypes is not None and not t.optional}
            want |= {label for label in labels if label.startswith("dtype_") and label.split("_")[-1] in own}
            assert all(any(label.startswith("dtype_") and label.endswith(f"_{n}") for label in labels) for n in own), \
                (op.name, product, own)
            if op.contract.dtypes == "same" and len(tied) > 1:
                want |= {f"dtype_mismatch_{op.output.name}"} if op.output.name in tied else set()
                want |= {"mixed_dtypes_without_float32_out" if product in op.contract.mixed_fp32_on
                         else f"dtype_mismatch_{op.gradient}"}
            if not rows:
                want |= {f"shape_mismatch_{op.output.name}"} if op.contract.out_checked else set()
                want |= {"shapes_not_broadcastable" if product in op.contract.broadcast_on
                         else f"shape_mismatch_{op.inputs[1].name}"}
            if "bfloat16" not in op.products[product]:
                want |= {f"dtype_bfloat16_on_{product}"}
            assert want <= labels, (op.name, product, want - labels)
    nulls = [c for c in cases if "null_" in c.case_id]
    assert all(c.expect_status == 161001 for c in nulls)
    assert all(c.expect_status == 161002 for c in cases if c not in nulls)


def test_negative_case_manifest_and_status_file(tmp_path):
    text = """
op: aclnnLogSigmoidBackward
cases:
  - {name: n, dtype: float16, shape: [2, 3], tensors: {buffer: {nullptr: true}}, expect_status: ACLNN_ERR_PARAM_NULLPTR}
  - {name: d, shape: [2, 3], tensors: {gradOutput: {dtype: float16}, self: {dtype: float32}, buffer: {dtype: float32},
     gradInput: {dtype: float32}}, expect_status: 161002}
"""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    m = json.loads((out / "log_sigmoid_backward-n" / "case.json").read_text())
    buf = next(t for t in m["tensors"] if t["name"] == "buffer")
    assert buf["null"] is True and "file" not in buf and "golden" not in m["tensors"][-1]
    assert m["expect_status"] == 161001 and "buffer is a null pointer" in m["expect_rule"]
    md = json.loads((out / "log_sigmoid_backward-d" / "case.json").read_text())
    assert [t["dtype"] for t in md["tensors"]] == ["float16", "float32", "float32", "float32"]
    assert (out / "log_sigmoid_backward-d" / "gradOutput.bin").stat().st_size == 12
    assert run_cli("verify", out).exit_code == 1  # no status files yet: MISSING
    assert run_cli("emulate", out).exit_code == 0
    assert (out / "log_sigmoid_backward-n" / "status.txt").read_text() == "161001\n"
    assert run_cli("verify", out).exit_code == 0
    (out / "log_sigmoid_backward-d" / "status.txt").write_text("0\n")
    result = run_cli("verify", out)
    assert result.exit_code == 1 and "STATUS" in result.output and "phase one returned 0" in result.output


@pytest.mark.parametrize("text,rule", [
    ("{name: b, product: A2, shape: [4, 5], tensors: {gradOutput: {shape: [4, 1]}}}", "shapes differ"),
    ("{name: m, product: A2, shape: [4], tensors: {gradOutput: {dtype: float16}, self: {dtype: float32}, gradInput: {dtype: float32}}}",
     "dtypes differ"),
    ("{name: m, product: '950', shape: [4], tensors: {gradOutput: {dtype: float16}, self: {dtype: float32}, gradInput: {dtype: float16}}}",
     "needs a float32 gradInput"),
    ("{name: b, product: '950', shape: [4, 5], tensors: {self: {shape: [3, 5]}}}", "do not broadcast"),
    ("{name: n, shape: [4], tensors: {self: {nullptr: true}}}", "self is a null pointer"),
])
def test_invalid_case_without_expect_status_is_refused_naming_the_rule(tmp_path, text, rule):
    p = write_yaml(tmp_path, f"op: aclnnSiluBackward\ncases:\n  - {text}\n")
    result = run_cli("gen", p, "-o", tmp_path / "out")
    assert result.exit_code == 2 and rule in result.output and "expect_status" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_expect_status_on_a_valid_case_is_refused(tmp_path):
    p = write_yaml(tmp_path, "op: aclnnSiluBackward\ncases:\n  - {name: v, shape: [4], expect_status: 161002}\n")
    result = run_cli("gen", p, "-o", tmp_path / "out")
    assert result.exit_code == 2 and "accepts this call" in result.output


def test_contract_mutations_are_all_rejected_and_the_base_accepted(bundled_cases):
    """From a valid call on every product (elementwise: any same-shaped tensors; rows: a bundled case's), every
    mutation `rejections` makes is rejected, at least a null per required tensor, a dtype and a shape or dims."""
    positive = [c for c in bundled_cases if c.expect_status == 0]
    for op in OPS.values():
        for product, dtypes in op.products.items():
            if not op.family.element_local:
                case = next((c for c in positive if c.op is op and c.product == product and c.numel), None)
                if case is None:
                    continue
                base = {t.name: TensorDesc(t.dtype, t.layout.shape, t.null) for t in case.tensors}
                attrs = dict(case.attributes)
            else:
                base, attrs = {t.name: TensorDesc(D.lookup(dtypes[0]), (3, 4)) for t in op.tensors}, {}
            assert check(op, product, base, attrs).status == 0
            found = rejections(op, product, base, attrs)
            assert all(check(op, product, r.tensors, attrs).status != 0 for r in found)
            required = [t for t in op.tensors if not t.optional]
            assert len(found) >= len(required) + 2, (op.name, product)  # nulls, a dtype, a shape or dims at least


def test_buffer_never_changes_the_result(tmp_path):
    text = """
op: aclnnLogSigmoidBackward
cases:
  - {name: a, dtype: bfloat16, shape: [500], seed: 3}
  - {name: b, dtype: bfloat16, shape: [500], seed: 3, inputs: {buffer: {values: [nan, inf, -inf, 1.0e30]}}}
"""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    a, b = out / "log_sigmoid_backward-a", out / "log_sigmoid_backward-b"
    assert (a / "buffer.bin").read_bytes() != (b / "buffer.bin").read_bytes()
    for f in ("gradInput.golden.bin", "gradInput.dump.bin"):
        assert (a / f).read_bytes() == (b / f).read_bytes()


def test_hardsigmoid_float32_edge_device_gives_zero_golden_gives_dy_over_6(tmp_path):
    text = """
op: aclnnHardsigmoidBackward
cases:
  - {name: e, dtype: float32, shape: [2], inputs: {self: {values: [2.9999998, -2.9999998]}, gradOutput: {constant: 1.0}}}
"""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    d = out / "hardsigmoid_backward-e"
    gold = np.fromfile(d / "out.golden.bin", dtype=np.float32)
    dump = np.fromfile(d / "out.dump.bin", dtype=np.float32)
    assert gold.tolist() == [np.float32(1 / 6), np.float32(1 / 6)]
    assert dump.tolist() == [0.0, np.float32(1) * (np.float32(1) / np.float32(6))]
    r = verify_case(M.load(d))
    assert r.status == "PASS" and r.metrics["relieved"] == 1


def test_silu_broadcast_golden_equals_materialized_inputs(tmp_path):
    text = """
op: aclnnSiluBackward
cases:
  - {name: b, product: '950', dtype: float16, shape: [7, 5], tensors: {gradOutput: {shape: [7, 1]}, self: {shape: [5]}}}
"""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    d = out / "silu_backward-b"
    m = harness.load(d)
    ts = harness.tensors(m)
    assert ts["gradInput"]["shape"] == [7, 5] and ts["gradOutput"]["storage_shape"] == [7]
    dy = np.broadcast_to(harness.view(harness.storage(d, ts["gradOutput"]), ts["gradOutput"]), (7, 5))
    x = np.broadcast_to(harness.view(harness.storage(d, ts["self"]), ts["self"]), (7, 5))
    want, _ = golden(OPS["aclnnSiluBackward"], {"gradOutput": dy.reshape(-1), "self": x.reshape(-1)}, D.FLOAT16)
    assert harness.storage(d, ts["gradInput"], "golden").tobytes() == want.tobytes()


def test_ops_json_is_the_declared_product_matrix():
    data = json.loads(run_cli("ops", "--json").output)
    silu = next(d for d in data if d["op"] == "aclnnSiluBackward")
    assert silu["products"]["910"] == ["float32", "float16"] and silu["broadcast_on"] == ["950"]
    assert {d["op"] for d in data} == set(OPS)
    assert "310P" not in silu["products"]


def test_range_index_is_storage_index_of_the_range():
    """Layout.range_index (a table of the inner axes added to each outer position) gives storage_index's positions
    for every range of every layout: random shapes up to 5-d with zero-size and size-1 axes, strides from 0
    (broadcast) to 49, offsets, ranges from empty to whole."""
    from aclnn_cli.tensor.layout import Layout

    rng = np.random.default_rng(20261129)
    for _ in range(2000):
        shape = tuple(int(x) for x in rng.integers(0, 6, rng.integers(0, 6)))
        layout = Layout(shape, tuple(int(x) for x in rng.integers(0, 50, len(shape))), int(rng.integers(0, 10)), 1 << 20)
        numel = layout.numel
        for _ in range(4):
            start = int(rng.integers(0, numel + 1))
            stop = int(rng.integers(start, numel + 1))
            np.testing.assert_array_equal(layout.range_index(start, stop), layout.storage_index(np.arange(start, stop)),
                                          err_msg=f"{layout} [{start}, {stop})")


@pytest.mark.parametrize("dtype", [D.FLOAT32, D.FLOAT16, D.BFLOAT16, D.INT64, D.UINT8])
def test_a_view_read_as_a_strided_window_is_the_gathered_read(tmp_path, dtype):
    """StorageFile.read of a non-contiguous view: whole slices of its first axis come through a strided window
    over the storage (no index per element), any other range through range_index's gather; both give the bytes of
    storage_index's elements in logical order, for random views (strides from 0 to 39, offsets, size-1 axes, up to
    4-d) and ranges (whole, first slice, the rest, a part of a slice, from the second element)."""
    from aclnn_cli.tensor.layout import Layout
    from aclnn_cli.tensor.storage import StorageFile

    rng = np.random.default_rng(20261130)
    path = tmp_path / "s.bin"
    for _ in range(300):
        shape = tuple(int(x) for x in rng.integers(1, 6, rng.integers(1, 5)))
        strides = tuple(int(x) for x in rng.integers(0, 40, len(shape)))
        offset = int(rng.integers(0, 7))
        size = offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1 + int(rng.integers(0, 3))
        layout = Layout(shape, strides, offset, size)
        storage = (rng.standard_normal(size) * 100).astype(dtype.np_dtype)
        storage.tofile(path)
        numel, inner = layout.numel, layout.numel // shape[0]
        with StorageFile(path, dtype.np_dtype, size) as f:
            for start, stop in [(0, numel), (0, inner), (inner, numel), (0, min(numel, 3)), (min(numel, 1), numel)]:
                want = storage[layout.storage_index(np.arange(start, stop))]
                got = f.read(layout, start, stop)
                assert got.dtype == want.dtype and got.shape == want.shape, (layout, start, stop)
                assert got.tobytes() == want.tobytes(), (layout, start, stop)
                seen = f.view(layout, start, stop)  # (a window over the map where the range is whole slices)
                assert seen.reshape(-1).tobytes() == want.tobytes(), (layout, start, stop)
                if not layout.is_contiguous and start % inner == 0 and stop % inner == 0 and stop > start:
                    assert not seen.flags.writeable and seen.shape == (stop // inner - start // inner, *shape[1:])
