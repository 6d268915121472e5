"""A convolution's single elements gathered from the operands as given (conv_lowering.Lowered.rows, columns: views
and index arithmetic, no padded or narrowed copy) are, term for term and bit for bit, the rows of L and columns of R
of the whole-tensor lowering (left, right: the copies verify's relief used to make), on hostile window geometry; and
verify's relief of a ConvolutionBackward case takes its blocks as stored, never widening them."""

from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest

from aclnn_cli.casedir import manifest as M
from aclnn_cli.judge import comparison as C
from aclnn_cli.judge import rowrelief
from aclnn_cli.judge.memo import Memo
from aclnn_cli.judge.verify import verify_case
from aclnn_cli.ops.convolution import conv_elements as E
from aclnn_cli.ops.convolution import conv_lowering as L

from helpers import emulated_case, run_cli, same_verdict

RNG = np.random.default_rng(29)
DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}


def _conv(n, cin, cout, groups, sizes, kernel, stride, pad_lo, dilation, pad_hi=None) -> L.Conv:
    """The Conv of these sizes, its output size from both sides' padding (pad_hi: pad_lo unless given)."""
    pad_hi = pad_hi or pad_lo
    out = tuple((s + lo + hi - d * (k - 1) - 1) // st + 1
                for s, k, st, lo, hi, d in zip(sizes, kernel, stride, pad_lo, pad_hi, dilation))
    assert min(out) >= 1
    return L.Conv(n, cin, cout, groups, sizes, out, kernel, stride, pad_lo, dilation)


HOSTILE = {
    "1-d grouped, padding past the kernel, stride 2, dilation 2": _conv(2, 4, 6, 2, (11,), (3,), (2,), (4,), (2,)),
    "1-d stride past the kernel (unread positions)": _conv(2, 3, 2, 1, (13,), (2,), (3,), (1,), (1,)),
    "2-d depthwise, dilation, stride": _conv(2, 3, 3, 3, (7, 6), (3, 2), (1, 2), (1, 0), (2, 1)),
    "2-d padded unequally (2 above, 0 below)": _conv(1, 2, 4, 1, (5, 6), (3, 3), (1, 1), (2, 1), (1, 1), (0, 1)),
    "2-d kernel as wide as the padded input": _conv(1, 4, 2, 2, (3, 4), (5, 2), (1, 1), (1, 0), (1, 2)),
    "3-d grouped, strided, padded": _conv(2, 4, 4, 2, (4, 5, 3), (2, 3, 1), (2, 1, 1), (1, 2, 0), (1, 1, 2)),
}


def _operand(shape, dtype) -> np.ndarray:
    """Values of `dtype` with some exact zeros of both signs (the padding's +0 must not be confused with them)."""
    a = RNG.normal(0, 1, shape).astype(DTYPES[dtype])
    flat = a.reshape(-1)
    flat[RNG.choice(flat.size, max(1, flat.size // 10), replace=False)] = -0.0
    flat[RNG.choice(flat.size, max(1, flat.size // 10), replace=False)] = 0.0
    return a


def _lowerings(conv: L.Conv, x, w, gy, dtype=np.float64) -> dict:
    """Every lowering the op makes: gradInput, the forward (a transposed convolution's gradInput), gradWeight (a
    transposed one's with input and gradOutput exchanged: the same class) and gradBias."""
    return {"gradInput": L.grad_input(conv, w, gy, dtype), "forward": L.forward(conv, w, x, dtype),
            "gradWeight": L.GradWeight(conv, x, gy, dtype), "gradBias": L.GradBias(gy, conv.n, conv.cout, conv.pout,
                                                                                    dtype)}


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float64).view(np.int64)


def _im2col(conv: L.Conv, x, w, gy) -> dict:
    """(L, R) of each lowering by the definitions in conv_lowering's docstring, element by element with Python
    loops over window positions (row-major positions and taps), float64, +0 where a tap falls in the padding:
    the independent answer."""
    x, w, gy = (a.astype(np.float64) for a in (x, w, gy))
    taps, outs = list(np.ndindex(*conv.kernel)), list(np.ndindex(*conv.out))
    ins = list(np.ndindex(*conv.sizes))
    G, cg, cog, n = conv.groups, conv.cg, conv.cog, conv.n

    def read(o, j):  # (the input position tap j of output position o reads, or None in the padding)
        i = tuple(oo * s - p + jj * d for oo, jj, s, p, d in zip(o, j, conv.stride, conv.padding, conv.dilation))
        return i if all(0 <= v < size for v, size in zip(i, conv.sizes)) else None

    gw_r = np.zeros((G, n * len(outs), cg * len(taps)))
    gi_r = np.zeros((G, len(taps) * cog, n * len(ins)))
    fw_r = np.zeros((G, cg * len(taps), n * len(outs)))
    for g in range(G):
        for b in range(n):
            for oi, o in enumerate(outs):
                for ji, j in enumerate(taps):
                    i = read(o, j)
                    if i is None:
                        continue
                    ii = ins.index(i)
                    for c in range(cg):
                        gw_r[g, b * len(outs) + oi, c * len(taps) + ji] = x[(b, g * cg + c, *i)]
                        fw_r[g, c * len(taps) + ji, b * len(outs) + oi] = x[(b, g * cg + c, *i)]
                    for co in range(cog):
                        gi_r[g, ji * cog + co, b * len(ins) + ii] = gy[(b, g * cog + co, *o)]
    gyf = gy.reshape(n, G, cog, len(outs))
    wf = w.reshape(G, cog, cg, len(taps))
    return {"gradWeight": (gyf.transpose(1, 2, 0, 3).reshape(G, cog, -1), gw_r),
            "gradInput": (wf.transpose(0, 2, 3, 1).reshape(G, cg, -1), gi_r),
            "forward": (wf.reshape(G, cog, -1), fw_r),
            "gradBias": (gy.reshape(n, conv.cout, -1).transpose(1, 0, 2).reshape(1, conv.cout, -1),
                         np.ones((1, n * len(outs), 1)))}


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_pieces_and_gathered_terms_are_the_definitions_bit_for_bit(name, dtype):
    """Every lowering's pieces (left, right: whole, and over ranges of K and of columns inside it) and every
    element's row of L and column of R (rows, columns) are the definitions' L and R (`_im2col`), bit for bit
    (signed zeros too), from the operands as stored and as float64 (as tests and TBC's relief give them)."""
    conv = HOSTILE[name]
    x = _operand((conv.n, conv.cin, *conv.sizes), dtype)
    gy = _operand((conv.n, conv.cout, *conv.out), dtype)
    w = _operand((conv.cout, conv.cg, *conv.kernel), dtype)
    want = _im2col(conv, x, w, gy)
    for stored in (True, False):
        arrays = (x, w, gy) if stored else (x.astype(np.float64), w.astype(np.float64), gy.astype(np.float64))
        for kind, low in _lowerings(conv, *arrays).items():
            left, right = want[kind]
            assert (low.g, low.m, low.k, low.c) == (*left.shape, right.shape[2]), kind
            g, m, c = low.locate(np.arange(low.g * low.m * low.c))
            third = max(1, low.k // 3)
            for ks, ke in ((0, low.k), (third, min(low.k, 2 * third + 1)), (low.k - 1, low.k)):
                for cs, ce in ((0, low.c), (low.c // 2, low.c)):
                    assert low.right(ks, ke, cs, ce).dtype == np.float64
                    np.testing.assert_array_equal(_bits(low.right(ks, ke, cs, ce)), _bits(right[:, ks:ke, cs:ce]),
                                                  err_msg=f"{kind} right {ks}:{ke}, {cs}:{ce}")
                np.testing.assert_array_equal(_bits(low.left(ks, ke)), _bits(left[:, :, ks:ke]),
                                              err_msg=f"{kind} left {ks}:{ke}")
                np.testing.assert_array_equal(_bits(low.rows(ks, ke, g, m)), _bits(left[g, m, ks:ke]),
                                              err_msg=f"{kind} rows {ks}:{ke}")
                np.testing.assert_array_equal(_bits(low.columns(ks, ke, g, c)),
                                              _bits(np.swapaxes(right, 1, 2)[g, c, ks:ke]),
                                              err_msg=f"{kind} columns {ks}:{ke}")


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_tensor_positions_are_where_flat_puts_each_column(name):
    """certified_tiles' positions: columns cs:ce of every lowering lie where `flat` (the tensor's element order)
    puts them, over ranges that start and end inside a sample."""
    conv = HOSTILE[name]
    x, gy = _operand((conv.n, conv.cin, *conv.sizes), "float16"), _operand((conv.n, conv.cout, *conv.out), "float16")
    w = _operand((conv.cout, conv.cg, *conv.kernel), "float16")
    for kind, low in _lowerings(conv, x, w, gy).items():
        ids = np.arange(low.g * low.m * low.c)
        where = np.argsort(low.flat(ids.reshape(low.g, low.m, low.c)))  # (tensor position of each (g, m, c))
        for cs, ce in {(0, low.c), (min(1, low.c - 1), max(min(2, low.c), low.c - 1)), (low.c - 1, low.c)}:
            np.testing.assert_array_equal(low.tensor_positions(cs, ce),
                                          where.reshape(low.g, low.m, low.c)[:, :, cs:ce], err_msg=kind)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_reference_at_from_the_gather_is_the_whole_reference(name):
    """reference_at of every element of each lowering, from the stored float16 operands, against the whole
    float64 lowering's reference (value, bound, scale, allowance: the same terms, summed by a walk of other chunks,
    so to float64's rounding), and its value against an independent float64 convolution (np.einsum over a padded
    window)."""
    conv = HOSTILE[name]
    x = _operand((conv.n, conv.cin, *conv.sizes), "float16")
    gy = _operand((conv.n, conv.cout, *conv.out), "float16")
    w = _operand((conv.cout, conv.cg, *conv.kernel), "float16")
    whole = _lowerings(conv, *(a.astype(np.float64) for a in (x, w, gy)))
    for kind, low in _lowerings(conv, x, w, gy).items():
        where = np.arange(low.g * low.m * low.c)
        got = E.reference_at(low, where)
        for a, b in zip(got, L.reference(whole[kind])):
            np.testing.assert_allclose(a, whole[kind].flat(b), rtol=1e-12, atol=1e-300, err_msg=kind)
    np.testing.assert_allclose(E.reference_at(_lowerings(conv, x, w, gy)["gradWeight"],
                                              np.arange(w.size))[0], _grad_weight(conv, x, gy).reshape(-1), rtol=1e-12)


def _grad_weight(conv: L.Conv, x, gy) -> np.ndarray:
    """gradWeight by its definition: for each tap, the input padded on both sides and read at o s - p + j d."""
    x, gy = x.astype(np.float64), gy.astype(np.float64)
    sp = len(conv.sizes)
    pad = max(max(conv.padding), 1) + max(d * k for d, k in zip(conv.dilation, conv.kernel)) + max(conv.stride) * max(conv.out)
    padded = np.pad(x, [(0, 0), (0, 0)] + [(pad, pad)] * sp)
    out = np.zeros((conv.cout, conv.cg, *conv.kernel))
    for tap in np.ndindex(*conv.kernel):
        idx = tuple(slice(pad - p + j * d, pad - p + j * d + s * (o - 1) + 1, s)
                    for j, p, d, s, o in zip(tap, conv.padding, conv.dilation, conv.stride, conv.out))
        window = padded[(slice(None), slice(None), *idx)]  # (N, Cin, *out)
        for g in range(conv.groups):
            xs = window[:, g * conv.cg:(g + 1) * conv.cg]
            ys = gy[:, g * conv.cog:(g + 1) * conv.cog]
            out[(slice(g * conv.cog, (g + 1) * conv.cog), slice(None), *tap)] = np.tensordot(
                ys, xs, axes=([0, *range(2, 2 + sp)],) * 2)
    return out


def test_verify_relieves_a_convolution_from_its_blocks_as_stored(tmp_path, monkeypatch):
    """A float16 ConvolutionBackward case whose emulated dump has elements flagged and relieved: verify's relief
    takes them through reference_at on the blocks as stored (rowrelief never widens them), and the verdicts and
    metrics, of the correct dump and of a broken one, are those of the relief through the whole reference."""
    text = ("op: aclnnConvolutionBackward\ncases:\n  - {name: c, dtype: float16, shape: [4, 32, 12, 12], seed: 3,"
            " attributes: {stride: [1, 1], padding: [1, 1], dilation: [1, 1], outputPadding: [0, 0]}}\n")
    m = emulated_case(tmp_path, text)
    widened, at = [], []
    real_widened, real_at = rowrelief.widened, rowrelief._relief_at
    monkeypatch.setattr(rowrelief, "widened", lambda *a: widened.append(1) or real_widened(*a))
    monkeypatch.setattr(rowrelief, "_relief_at", lambda *a: at.append(a[5].size) or real_at(*a))
    correct = verify_case(m, C.Options()).to_json()
    assert correct["status"] == "PASS" and correct["metrics"]["relieved"] > 0 and at and not widened
    gi = next(o for o in m.judged if o.name == "gradInput")
    dump = np.fromfile(gi.dump_path, np.float16)
    dump[5], dump[700] = np.float16(3.0) * dump[5] + np.float16(1), -dump[700]
    dump.tofile(gi.dump_path)
    broken = verify_case(M.load(m.dir), C.Options()).to_json()
    assert broken["status"] == "FAIL" and not widened
    monkeypatch.setattr(rowrelief, "_relief_at", lambda *a: None)  # (the whole reference's relief)
    same_verdict(broken, verify_case(M.load(m.dir), C.Options()).to_json())
    assert run_cli("emulate", m.dir.parent, "-j", 1).exit_code == 0
    same_verdict(correct, verify_case(M.load(m.dir), C.Options()).to_json())



@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_finite_values_of_16_bit_floats_from_their_bits_is_isfinite(dtype):
    """rows.finite_values (relief's and gen's finite check of the blocks) on every one of the 65,536 bit patterns of
    float16 and bfloat16, in a strided view too, is NumPy's isfinite of their float32 values."""
    from aclnn_cli.golden import rows

    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(DTYPES[dtype])
    want = np.isfinite(every.astype(np.float32))
    assert not want.all() and want.any()
    np.testing.assert_array_equal(rows.finite_values(every), want)
    np.testing.assert_array_equal(rows.finite_values(every.reshape(256, 256)[:, ::3]),
                                  want.reshape(256, 256)[:, ::3])


def test_a_failing_case_makes_its_blocks_reference_once_for_every_output(tmp_path, monkeypatch):
    """Every output of a ConvolutionBackward case broken (its dumps negated): verify relieves gradInput, gradWeight
    and gradBias one after the other, twice (the second look), and the blocks' whole reference, which makes all
    three, is made once (the others' kept as spares: rowrelief.KEEP_EVERY_OUTPUT); the verdict and its metrics are
    those of the reference made again for each output, as before the spares."""
    text = ("op: aclnnConvolutionBackward\ncases:\n  - {name: c, dtype: float32, shape: [4, 16, 10, 10], seed: 4,"
            " attributes: {stride: [1, 1], padding: [1, 1], dilation: [1, 1], outputPadding: [0, 0]}}\n")
    m = emulated_case(tmp_path, text)
    assert len(m.judged) == 3
    for o in m.judged:
        (-np.fromfile(o.dump_path, np.float32)).tofile(o.dump_path)
    made, real = [], rowrelief.reference_blocks
    monkeypatch.setattr(rowrelief, "reference_blocks", lambda *a: made.append(1) or real(*a))
    monkeypatch.setattr(rowrelief, "MEMO", Memo(64 << 20))  # (nothing this process judged before)
    once = verify_case(M.load(m.dir), C.Options()).to_json()
    assert once["status"] == "FAIL" and len(made) == 1
    monkeypatch.setattr(rowrelief, "MEMO", Memo(64 << 20))
    monkeypatch.setattr(rowrelief, "KEEP_EVERY_OUTPUT", -1)  # (no spares)
    made.clear()
    again = verify_case(M.load(m.dir), C.Options()).to_json()
    assert len(made) >= 3
    same_verdict(once, again)
