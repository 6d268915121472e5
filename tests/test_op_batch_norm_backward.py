"""aclnnBatchNormBackward: goldens against an oracle that shares nothing with the op or the channels family, an
independent float32 kernel (ATen's CPU order) over every bundled case, and the kernel's order checked by hand.

The oracle reads the generated case directories through the manifest's numbers alone (tests/harness.py: shape,
strides, offset; no aclnn_cli layout or family code), so a channel read along the wrong axis, a block written
to the wrong elements or a (C,) tensor broadcast along W = C shows up as a wrong golden. Its algebra is ATen's
(aten/src/ATen/native/Normalization.cpp, batch_norm_backward_cpu_template): per channel
  dotp = sum(dy (x - mean)), k = dotp invstd^2 / M, dx = (dy - (x - mean) k - sum(dy) / M) invstd w,
  gradWeight = dotp invstd, gradBias = sum(dy);
in inference dx = dy invstd w, invstd = 1 / sqrt(runningVar + eps) in mpmath at 200 bits.
"""

from __future__ import annotations

import math
from exactq import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

import harness
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.ops.channels.batch_norm_backward import SPEC
from helpers import run_cli, write_yaml
from oracle import PREC, rounded_bits
from rowblocks import bundled_emulated, not_passing, write_dump

GI, GW, GB = "gradInput", "gradWeight", "gradBias"
FILLS = {"weight": 1.0, "runningMean": 0.0, "runningVar": 1.0, "saveMean": 0.0, "saveInvstd": 1.0}

ORACLE_YAML = """\
op: aclnnBatchNormBackward
defaults: {product: "950", seed: 77, dtype: [float32, float16, bfloat16]}
cases:
  - {name: nchw, shape: [2, 3, 4, 5]}
  - {name: w_equals_c, shape: [2, 3, 4, 3]}
  - {name: nc, shape: [9, 4]}
  - {name: ncdhw, shape: [2, 2, 3, 2, 3]}
  - {name: one_sample, shape: [1, 3, 7]}
  - {name: cancel, shape: [3, 2, 8], inputs: {gradOut: {constant: 0.75}}}
  - {name: null_weight, shape: [3, 2, 5], tensors: {weight: {nullptr: true}}}
  - {name: strided, shape: [3, 4, 5], tensors: {input: {layout: transposed}, gradInput: {layout: {step: 2, offset: 1}}}}
  - {name: fp32_stats, dtype: [float16, bfloat16], shape: [4, 3, 6],
     tensors: {weight: {dtype: float32}, runningMean: {dtype: float32}, runningVar: {dtype: float32},
               saveMean: {dtype: float32}, saveInvstd: {dtype: float32}, gradWeight: {dtype: float32},
               gradBias: {dtype: float32}}}
  - {name: inference, shape: [2, 3, 4, 5], attributes: {training: false, eps: 1.0e-5}}
  - {name: inference_square, shape: [3, 3, 4], attributes: {training: false, eps: 0.0},
     inputs: {runningVar: {values: [0.25, 4.0, 1.0]}}}
"""


def logical(case: Path, m: dict, name: str) -> np.ndarray | None:
    """A tensor's logical values (float64) from its storage file and the manifest's strides; None if null."""
    t = harness.tensors(m)[name]
    if t.get("null") or t.get("file") is None:
        return None
    return harness.view(harness.storage(case, t), t).astype(np.float64)


def oracle(case: Path, m: dict) -> dict[str, list]:
    """Every output's exact values in logical (row-major) order, per channel in plain Python."""
    attrs = {a["name"]: a["value"] for a in m.get("attributes", [])}
    x, dy = logical(case, m, "input"), logical(case, m, "gradOut")
    n, c = x.shape[0], x.shape[1]
    per = {k: (logical(case, m, k) if logical(case, m, k) is not None else np.full(c, v)) for k, v in FILLS.items()}
    dx = np.empty(x.shape, dtype=object)
    gw, gb = [], []
    for ch in range(c):
        xs = [Fraction(float(v)) for v in x[:, ch].reshape(-1)]
        ds = [Fraction(float(v)) for v in dy[:, ch].reshape(-1)]
        w = Fraction(float(per["weight"][ch]))
        total = sum(ds)
        if attrs["training"]:
            mean, inv = Fraction(float(per["saveMean"][ch])), Fraction(float(per["saveInvstd"][ch]))
            dotp = sum(d * (xi - mean) for d, xi in zip(ds, xs))
            k = dotp * inv * inv / len(xs)
            vals = [(d - (xi - mean) * k - total / len(xs)) * inv * w for d, xi in zip(ds, xs)]
            gw.append(dotp * inv)
        else:
            mean = Fraction(float(per["runningMean"][ch]))
            with mpmath.workprec(PREC):
                var = mpmath.mpf(float(per["runningVar"][ch])) + mpmath.mpf(float(attrs["eps"]))
                inv_m = 1 / mpmath.sqrt(var)
                vals = [mpmath.mpf(d.numerator) / d.denominator * inv_m * mpmath.mpf(float(w)) for d in ds]
                dotp = sum(d * (xi - mean) for d, xi in zip(ds, xs))
                gw.append(mpmath.mpf(dotp.numerator) / dotp.denominator * inv_m)
        dx[:, ch] = np.array(vals, dtype=object).reshape(dx[:, ch].shape)
        gb.append(total)
    return {GI: list(dx.reshape(-1)), GW: gw, GB: gb}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("bn_oracle")
    out = root / "out"
    r = run_cli("gen", write_yaml(root, ORACLE_YAML, "bn.yaml"), "-o", out)
    assert r.exit_code == 0, r.output
    return out


def test_goldens_equal_the_oracle_rounded_once(generated):
    """Every golden of every case (training, inference, strided, W = C, null weight, fp32 statistics) is the
    oracle's exact value rounded once to its dtype, bit for bit."""
    cases = sorted(p.parent for p in generated.glob("*/case.json"))
    assert len(cases) >= 30
    compared = 0
    for case in cases:
        m = harness.load(case)
        want = oracle(case, m)
        for name, values in want.items():
            t = harness.tensors(m)[name]
            if t.get("null"):
                continue
            dtype = D.lookup(t["dtype"])
            got = harness.view(harness.storage(case, t, "golden"), t).reshape(-1).view(dtype.uint_dtype)
            assert np.array_equal(got, rounded_bits(values, dtype).astype(dtype.uint_dtype)), (case.name, name)
            compared += len(values)
    assert compared > 2000


def aten_float32(ins: dict, attrs: dict) -> dict:
    """ATen's CPU batch_norm_backward in numpy float32 on whole (N, C, ...) tensors: per channel sums in
    index order, then dx = (dy - (x - mean) k - sum / M) invstd w (training), dy invstd w (inference)."""
    f = np.float32
    x, dy = ins["input"].astype(f), ins["gradOut"].astype(f)
    c = x.shape[1]
    per = {k: (ins[k].astype(f) if ins.get(k) is not None else np.full(c, v, f)) for k, v in FILLS.items()}
    xs = np.moveaxis(x, 1, 0).reshape(c, -1)
    ds = np.moveaxis(dy, 1, 0).reshape(c, -1)
    m = xs.shape[1]
    with np.errstate(all="ignore"):
        if attrs["training"]:
            mean, inv = per["saveMean"][:, None], per["saveInvstd"][:, None]
        else:
            mean = per["runningMean"][:, None]
            inv = (f(1) / np.sqrt(per["runningVar"] + f(attrs["eps"])))[:, None]
        total = np.cumsum(ds, axis=1, dtype=f)[:, -1:] if m else np.zeros((c, 1), f)
        dotp = np.cumsum((xs - mean) * ds, axis=1, dtype=f)[:, -1:] if m else np.zeros((c, 1), f)
        if attrs["training"]:
            k = dotp * inv * inv / f(max(m, 1))
            dx = (ds - (xs - mean) * k - total / f(max(m, 1))) * inv * per["weight"][:, None]
        else:
            dx = ds * inv * per["weight"][:, None]
    dx = np.moveaxis(dx.reshape((c, x.shape[0], *x.shape[2:])), 0, 1)
    return {GI: dx, GW: (dotp * inv).reshape(-1), GB: total.reshape(-1)}


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    return bundled_emulated(tmp_path_factory, bundled_produced, "batch_norm_backward")


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    """ATen's order (above, sequential channel sums) written as the dumps of every bundled positive case: verify
    passes them all (no false alarm on a correct kernel in another order and arrangement)."""
    import shutil

    work = tmp_path / "aten"
    shutil.copytree(suite, work)
    wrote = 0
    for case in sorted(p.parent for p in work.glob("*/case.json")):
        m = harness.load(case)
        if m["expect_status"] != 0 or 0 in harness.tensors(m)["input"]["shape"]:
            continue
        ins = {n: logical(case, m, n) for n, t in harness.tensors(m).items() if t["role"] == "input"}
        attrs = {a["name"]: a["value"] for a in m.get("attributes", [])}
        result = aten_float32(ins, attrs)
        for name, values in result.items():
            t = harness.tensors(m)[name]
            if t.get("null"):
                continue
            write_dump(case, t, values)
        wrote += 1
    assert wrote >= 60
    bad = not_passing(work, tmp_path / "aten.json")
    assert not bad, bad


def test_kernel_follows_the_source_order():
    """One channel of three by hand in float32 (batch_norm_grad_v3_full_load_regbase.h): t = fl(fl(x - mean) dy)
    rstd, dgamma = the 64-lane tree of t, dx = rstd (g (dy - ((x - mean) rstd dgamma + dbeta) fl(1/M)))."""
    f = np.float32
    x, dy = np.array([0.1, 0.7, -0.3], f), np.array([1.0, -2.0, 0.5], f)
    g, mean, rstd = f(1.5), f(0.2), f(1.7)
    t = ((x - mean) * dy) * rstd
    dg, db = f(f(t[0] + t[2]) + t[1]), f(f(dy[0] + dy[2]) + dy[1])  # (the 64-lane tree: lanes 0+2, then + 1)
    dx = rstd * (g * (dy - (((x - mean) * rstd) * dg + db) * (f(1) / f(3))))
    block = {"gradOut": dy.reshape(1, 3, 1), "input": x.reshape(1, 3, 1), "weight": np.full((1, 1, 1), g),
             "saveMean": np.full((1, 1, 1), mean), "saveInvstd": np.full((1, 1, 1), rstd), "training": True,
             "eps": 1e-5, "outputMask": (True, True, True), "sampleCount": 1}
    got = SPEC.kernel(block)
    assert np.array_equal(got[GI].reshape(-1), dx)
    assert got[GW].reshape(-1)[0] == dg and got[GB].reshape(-1)[0] == db


def test_inv_sqrt_is_exact_on_squares_and_close_elsewhere():
    from aclnn_cli.ops.channels.batch_norm_backward import inv_sqrt

    assert inv_sqrt(Fraction(1, 4)) == 2 and inv_sqrt(Fraction(9, 16)) == Fraction(4, 3)
    v = inv_sqrt(Fraction(2))
    assert abs(v - Fraction(1) / Fraction(math.sqrt(2))) < Fraction(1, 10**15)
    assert abs(v * v * 2 - 1) < Fraction(1, 10**55)
