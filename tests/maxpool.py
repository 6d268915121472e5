"""What the MaxPool gradient tests share (aclnnMaxPool2dWithIndicesBackward, aclnnMaxPool3dWithArgmaxBackward): the
windows read from a case's manifest, PyTorch CPU's forward loop (the indices gen must derive), and the exact oracle
of Fractions, for n = 2 or 3 window axes. Nothing here uses the op's or the window family's code: the manifest's
numbers alone (tests/harness.py) and PyTorch's formulas, start = o * s - p, taps start + j * d."""

from __future__ import annotations

import itertools
import math

import numpy as np

import harness
from exactq import Fraction


def attrs(m) -> dict:
    return {a["name"]: a["value"] for a in m.get("attributes", [])}


def spread(v, n: int, fill):
    """An aclIntArray of 1 or n values as n; `fill` where it is empty."""
    v = list(v or [])
    return tuple(fill) if not v else (v[0],) * n if len(v) == 1 else tuple(v[:n])


def params(m, n: int):
    """(kernel, stride, padding, dilation), n values each, as the case's attributes give them."""
    a = attrs(m)
    k = spread(a["kernelSize"], n, None)
    s, p = spread(a.get("stride"), n, k), spread(a.get("padding"), n, (0,) * n)
    return k, s, p, spread(a.get("dilation"), n, (1,) * n)


def blocks(case, m, name: str, n: int, dtype=np.float64) -> np.ndarray:
    """A tensor's logical values as (planes, last n axes)."""
    t = harness.tensors(m)[name]
    v = harness.view(harness.storage(case, t), t).astype(dtype)
    return v.reshape(math.prod(v.shape[:-n]), *v.shape[-n:])


def forward(x: np.ndarray, k, s, p, d, outs) -> np.ndarray:
    """PyTorch CPU's max_pool2d / max_pool3d indices of blocks x (planes, (D,) H, W): for each window, maxindex starts
    at its first tap inside the input, maxval at -inf; a tap replaces them where val > maxval or val is NaN (taps in
    scan order, the first axis outer). Every plane at once, one tap at a time."""
    sizes = x.shape[1:]
    flat_x = x.reshape(x.shape[0], math.prod(sizes))
    out = np.zeros((x.shape[0], *outs), np.int64)
    for o in itertools.product(*(range(q) for q in outs)):
        axes = [[o[i] * s[i] - p[i] + j * d[i] for j in range(k[i]) if 0 <= o[i] * s[i] - p[i] + j * d[i] < sizes[i]]
                for i in range(len(sizes))]
        taps = [int(np.ravel_multi_index(pos, sizes)) for pos in itertools.product(*axes)]
        best, at = np.full(x.shape[0], -math.inf), np.full(x.shape[0], taps[0], np.int64)
        for f in taps:
            v = flat_x[:, f]
            take = (v > best) | np.isnan(v)
            best, at = np.where(take, v, best), np.where(take, f, at)
        out[(slice(None), *o)] = at
    return out


def indices(case, m, n: int) -> np.ndarray:
    """The case's indices as (planes, last n axes of gradOutput), int64."""
    return blocks(case, m, "indices", n, np.int64)


def derived_are_forwards(case, m, n: int, read=indices) -> bool:
    """Whether a case's indices (as `read` gives them) are the forward's of its self."""
    idx = read(case, m, n)
    return np.array_equal(idx, forward(blocks(case, m, "self", n), *params(m, n), idx.shape[1:]))


def oracle(n: int, read=indices):
    """oracle(case, m): the exact gradient in logical order, each window's gradOutput (a Fraction) added at its
    index (as `read` gives them) in its plane or volume."""
    def exact(case, m) -> list:
        g = blocks(case, m, "gradOutput", n)
        idx = read(case, m, n)
        size = math.prod(harness.tensors(m)["self"]["shape"][-n:])
        out = [[Fraction(0)] * size for _ in range(g.shape[0])]
        for b in range(g.shape[0]):
            for v, i in zip(g[b].reshape(-1).tolist(), idx[b].reshape(-1).tolist()):
                out[b][i] += Fraction(v)
        return [v for block in out for v in block]
    return exact


def bundled(tmp_path_factory, path, name: str):
    """A bundled case file generated and emulated into a fresh directory (a module fixture's suite)."""
    from helpers import run_cli

    out = tmp_path_factory.mktemp(name) / "out"
    for args in (("gen", path, "-o", out), ("emulate", out)):
        r = run_cli(*args)
        assert r.exit_code == 0, r.output[-2000:]
    return out


def indices_by_chunk(tmp_path, text: str, chunks) -> list[bytes]:
    """The indices gen writes for the one case of `text`, reading self `chunk` elements at a time, for each chunk."""
    from aclnn_cli.cases.loader import load_file
    from aclnn_cli.golden.gen import generate_case
    from helpers import write_yaml

    case, = load_file(write_yaml(tmp_path, text, "c.yaml"))
    return [(generate_case(case, tmp_path / f"out{chunk}", chunk=chunk).path / "indices.bin").read_bytes()
            for chunk in chunks]


def refusal(tmp_path, text: str) -> str:
    """gen's output on a case file it must refuse (exit 2)."""
    from helpers import run_cli, write_yaml

    r = run_cli("gen", write_yaml(tmp_path, text, "c.yaml"), "-o", tmp_path / "out")
    assert r.exit_code == 2, r.output
    return r.output


def status(spec, shapes, attrs: dict, base: dict, dtype, product: str, i_dtype, s_dtype=None) -> int:
    """The contract's status of a call: (gradOutput, self, indices, gradInput) shapes, one float dtype (self's may
    differ), the indices' dtype, the attributes over `base`."""
    from aclnn_cli.ops.contract import TensorDesc, check

    g, s, i, o = shapes
    descs = {"gradOutput": TensorDesc(dtype, tuple(g)), "self": TensorDesc(s_dtype or dtype, tuple(s)),
             "indices": TensorDesc(i_dtype, tuple(i)), "gradInput": TensorDesc(dtype, tuple(o))}
    return check(spec, product, descs, {**base, **attrs}).status


def assert_exact_at_is_exact(spec, t) -> None:
    """A block's exact_at at every position equals its whole exact values, and the float64 reference their value."""
    from rowblocks import as_f64, as_fractions

    whole = spec.exact(as_fractions(t)).reshape(-1)
    at = spec.exact_at(as_f64(t), {"gradInput": np.arange(whole.size)})["gradInput"]
    assert [str(v) for v in whole] == [str(v) for v in at]
    assert np.array_equal(spec.reference(as_f64(t)).value.reshape(-1), np.array([float(v) for v in whole]))


DTYPES = ("float32", "float16", "bfloat16")


def every_dtype(*cases) -> set:
    """(case, dtype) for each case and float dtype."""
    return {(c, d) for c in cases for d in DTYPES}


def assert_variant(suite, tmp_path, variant: str, changes: dict, legitimate, cases: int) -> None:
    """The gate suite emulated with `variant`: a legitimate one passes every case; a defect fails every (case, dtype)
    `changes` names for it, in every dtype."""
    from rowblocks import variant_statuses

    status = variant_statuses(suite, tmp_path, variant)
    assert len(status) == cases
    if variant in legitimate:
        assert set(status.values()) == {"PASS"}, status
        return
    by_case = {tuple(k.split("-")[1:3]): v for k, v in status.items()}
    assert {by_case[c] for c in changes[variant]} == {"FAIL"}, status
    assert {d for _, d in changes[variant]} == set(DTYPES)
