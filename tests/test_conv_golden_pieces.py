"""gen's ConvolutionBackward golden (conv_lowering.certified through golden_reference) in pieces: wide pieces of K,
|L|.|R| through dots.magnitude, each piece placed into the tensor's order, the operands kept as stored (float16,
bfloat16, float32) and widened piece by piece, and golden/rows.certify in runs. Each claim against an independent
answer: the exact sums of tests/test_op_convolution_backward.oracle (Fractions from the doc's formulas), the whole
arrays' certify, and the float64 lowering's own values.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from aclnn_cli.golden import rows
from aclnn_cli.ops.convolution import conv_lowering as L
from aclnn_cli.ops.convolution import convolution_backward as CB
from aclnn_cli.ops.families.convolution import shape_values
from aclnn_cli.tensor import dtypes as D
from oracle import rounded_bits
from test_op_convolution_backward import oracle

RNG = np.random.default_rng(7)
CAST = {"float16": np.float16, "float32": np.float32, "bfloat16": ml_dtypes.bfloat16}
# (input, weight, stride, padding, dilation, groups, transposed): 2-D with stride, dilation and groups; 1-D
# transposed; gradOutput's shape follows
CASES = {"2d": ((3, 4, 7, 6), (6, 2, 3, 2), (2, 1), (1, 1), (1, 2), 2, False),
         "1d transposed": ((2, 4, 9), (4, 3, 3), (2,), (1,), (1,), 1, True)}


def _case(which: str, dtype: str):
    """(t as golden_reference receives it, the operands as float64 arrays in their logical shapes, its parameters)."""
    x_shape, w_shape, stride, padding, dilation, groups, transposed = CASES[which]
    family = CB.FAMILY
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups, "transposed": transposed,
             "outputPadding": (0,) * len(stride)}
    gy_shape = family.relation(x_shape, w_shape, attrs)[0]
    cast = CAST[dtype]
    x, w, gy = (cast(RNG.normal(0, 1, s) * np.exp2(RNG.integers(-6, 6, s))) for s in (x_shape, w_shape, gy_shape))
    gy.reshape(-1)[: gy.size // 2] = cast(-gy.reshape(-1)[gy.size // 2: 2 * (gy.size // 2)])  # (sums that cancel)
    t = {"input": x.reshape(1, -1, x.shape[-1]), "weight": w.reshape(1, -1, w.shape[-1]),
         "gradOutput": gy.reshape(1, -1, gy.shape[-1]), **attrs, "cubeMathType": 0,
         **shape_values("input", "weight", "gradOutput")({"input": x_shape, "weight": w_shape, "gradOutput": gy_shape})}
    wide = tuple(a.astype(np.float64) for a in (x, w, gy))
    return t, wide, (stride, [(p, p) for p in padding], dilation, groups, transposed)


@pytest.fixture(params=[(1 << 22, 1 << 10), (40, 8)], ids=["held", "tiny pieces"])
def pieces(request, monkeypatch):
    """The lowering's piece sizes: as shipped, and tiny (HELD 40 elements, 8 columns: ranges that start and end
    inside a sample, K cut into many pieces)."""
    monkeypatch.setattr(L, "HELD", request.param[0])
    monkeypatch.setattr(L, "WIDE_COLUMNS", request.param[1])
    return request.param


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("which", list(CASES))
def test_golden_reference_holds_the_oracle_in_the_tensors_order(which, dtype, pieces):
    """Every element of every output: golden_reference's value +- bound (from the blocks as stored, pieces placed in
    the tensor's order) holds the oracle's exact sum, and rounding it certifies to the oracle's rounded value
    wherever certify calls it certain. A piece placed a column off, or a bound without the gamma_K factor, fails."""
    t, (x, w, gy), (stride, padding, dilation, groups, transposed) = _case(which, dtype)
    want = oracle(x, w, gy, stride, padding, dilation, groups, transposed)
    got = CB._golden_reference(t)
    for name, exact in want.items():
        value, bound = got[name].value.reshape(-1), got[name].bound.reshape(-1)
        assert len(exact) == value.size, name
        outside = [i for i, e in enumerate(exact) if abs(Fraction(float(value[i])) - e) > Fraction(float(bound[i]))]
        assert not outside, (name, outside[:5])
        rounded, unsure = rows.certify(value, bound, D.FLOAT16)
        sure = ~unsure
        assert np.array_equal(rounded.view(np.uint16)[sure], rounded_bits(exact, D.FLOAT16)[sure]), name
        assert sure.mean() > 0.5, name  # (the bound is tight enough to certify most elements)


@pytest.mark.parametrize("which", list(CASES))
def test_stored_operands_give_the_float64_lowerings_values_bit_for_bit(which, pieces):
    """certified from the float16 blocks as stored (the lowering keeps them narrow, widens each piece) equals
    certified from their float64 copies, value and bound bit for bit, and exact_at from either agrees: widening a
    float16 value is exact, so keeping it narrow changes nothing."""
    t, (x, w, gy), _ = _case(which, "float16")
    wide = {**t, **{k: t[k].astype(np.float64) for k in ("input", "weight", "gradOutput")}}
    for name in CB.OUTPUTS:
        narrow = CB.lowered(t, names=(name,), stored=True)[name]
        assert narrow.dtype == np.float64
        a, b = L.certified(narrow), L.certified(CB.lowered(wide, names=(name,))[name])
        assert all(np.array_equal(p, q) for p, q in zip(a, b)), name
        where = np.arange(a[0].size)[::3]
        assert list(CB._exact_at(t, {name: where})[name]) == list(CB._exact_at(wide, {name: where})[name]), name


def test_narrow_keeps_float64_values_float32_cannot_hold():
    """_narrow stores float32 only where every value survives: the float16 reach of cubeMathType 2 (|v| plus half
    a float16 ulp) is not a float32 value and stays float64; NaN and infinity narrow. Narrowing it anyway would
    round the reach down, under the allowance it bounds."""
    reach = np.float16(RNG.normal(0, 1, 64)).astype(np.float64) * (1 + 2.0**-11) + 2.0**-40
    assert L._narrow(reach).dtype == np.float64 and L._narrow(reach) is reach
    exact = np.array([1.5, -0.0, np.inf, np.nan, 2.0**-149], np.float64)
    assert L._narrow(exact).dtype == np.float32
    low = L.GradBias(reach.reshape(2, 4, 8), 2, 4, 8)
    assert np.array_equal(L.certified(low)[0], reach.reshape(2, 4, 8).sum(axis=(0, 2)))


def test_certify_in_runs_is_certify_whole(monkeypatch):
    """rows.certify of an output longer than CERTIFY_RUN, taken run by run (a short last run too), returns the
    whole arrays' rounding and uncertainty element for element, a value's NaN and a tie at a boundary included."""
    value = RNG.normal(0, 1, (3, 7, 11)) * np.exp2(RNG.integers(-20, 20, (3, 7, 11)))
    value.reshape(-1)[::17] = np.nan
    value.reshape(-1)[5] = 1 + 2.0**-11  # (float16's tie between 1 and 1 + 2^-10)
    bound = np.abs(value) * 2.0**-12 * RNG.uniform(0, 2, value.shape)
    whole = rows.certify(value, bound, D.FLOAT16)
    monkeypatch.setattr(rows, "CERTIFY_RUN", 50)
    runs = rows.certify(value, bound, D.FLOAT16)
    for a, b in zip(whole, runs):
        assert a.shape == b.shape == value.shape and a.dtype == b.dtype
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    assert whole[1].any() and not whole[1].all()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("which", list(CASES))
def test_golden_settled_tile_by_tile_is_the_oracle_and_the_whole_settlement(which, dtype, pieces):
    """gen's golden of every output settled tile by tile (golden/rowsgen._settled_tiles over golden_reference's
    `tiles`: each tile certified, its uncertain elements through the exact path at their tensor positions) is the
    oracle's correctly rounded value at every element, and the same bits and exact-path count as settling the whole
    output at once (`_settled` on golden_reference's whole value and bound). Input all ones and gradOutput's last
    channel 1 and half an ulp make sums that land on ties, which take the exact path in several tiles; a tile's
    exact path asked at positions within the tile (not the tensor's) fails."""
    from types import SimpleNamespace

    from aclnn_cli.golden import rowsgen

    t, (x, w, gy), (stride, padding, dilation, groups, transposed) = _case(which, dtype)
    x, gy = np.ones_like(x), gy.copy()  # (sums that land on a tie of the dtype: 1 + half its ulp)
    gy[:, -1] = 0
    gy[0, -1].reshape(-1)[:2] = 1.0, {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24}[dtype]
    t = {**t, "input": CAST[dtype](x).reshape(1, -1, x.shape[-1]), "gradOutput": CAST[dtype](gy).reshape(1, -1, gy.shape[-1])}
    want = oracle(x, w, gy, stride, padding, dilation, groups, transposed)
    blocks = {k: t[k] for k in ("input", "weight", "gradOutput")}
    attrs = {k: v for k, v in t.items() if k not in blocks}
    golden, exact = CB._golden_reference(t), 0
    for name in CB.OUTPUTS:
        out = SimpleNamespace(name=name, dtype=D.DTYPES[dtype])
        shape, tiles = golden.tiles(name)
        tiled, path = rowsgen._settled_tiles(CB.SPEC, blocks, attrs, out, shape, tiles)
        whole, whole_path = rowsgen._settled(CB.SPEC, blocks, attrs, out, golden[name])
        assert tiled.shape == whole.shape == shape and tiled.dtype == whole.dtype, name
        assert np.array_equal(tiled.view(np.uint8), whole.view(np.uint8)) and path == whole_path, name
        bits = tiled.reshape(-1).view(np.uint32 if dtype == "float32" else np.uint16)
        assert np.array_equal(bits, rounded_bits(want[name], out.dtype)), name
        exact += path.exact
    assert exact > 0  # (the exact path ran)
