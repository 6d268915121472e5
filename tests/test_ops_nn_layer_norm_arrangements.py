"""Which float32 arrangements of LayerNorm's backward are correct kernels, settled on ops-nn's own suites (issue 27;
docs/allowances.md, "Arrangements"; decision 85).

ATen's CPU kernel (aten/src/ATen/native/cpu/layer_norm_kernel.cpp, layer_norm_backward_frame), ported to numpy
float32 below, differs from the 950's in two places:
- gradInput: ds = sum(dy x gamma) and db = sum(dy gamma), each over vector lanes then the lanes halved
  (vec::map3_reduce_all); b = (db mean - ds) rstd^3 / N, c = -b mean - db rstd / N, dx = rstd dy gamma + b x + c.
  The terms cancel where x is near mean or |mean| dwarfs the row's spread; the derived allowance takes it:
  every case passes.
- gradWeight: its term is dy (rstd x + (-rstd mean)), x̂ formed without subtracting first. Its two roundings are
  u rstd |x| each and do not cancel, so the term's relative error grows as |x| / |x - mean|, without bound;
  the 950 (and the doc's formula) subtract first, exactly where x is near mean, an error of u |x̂|. That one
  change, and nothing else, makes the cases below fail: with x̂ formed as the 950 does, every case passes.
  An uncentred x̂ in dgamma is a defect class, not an order of a correct kernel.

The suites are ops-nn's files unmodified (tests/ops_nn_suites); the cases generated are the ATK file's first 100
and the TTK file's recompute and big-M rows (1.6M elements; the whole files hold 228M: the same verdicts).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import independent_rows
from helpers import run_cli, verify_records

SUITES = Path(__file__).parent / "ops_nn_suites"
FILES = ("atk_aclnnLayerNormBackward.json", "ttk_kernel_layer_norm_grad_v3_st.csv")
CASES = ("*-atk_aclnnLayerNormBackward-[0-9]", "*-atk_aclnnLayerNormBackward-[0-9][0-9]", "*-atk_aclnnLayerNormBackward-1[0-2][0-9]", "*_recompute_*", "*_bigm_*")
GI, GW, GB = "gradInputOut", "gradWeightOut", "gradBiasOut"
LANES = 8  # Vectorized<float> on AVX2 (16 on AVX-512: both are tested)
F = np.float32


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ln_arrangements") / "out"
    cases = [a for c in CASES for a in ("--case", c)]
    assert run_cli("gen", *(SUITES / f for f in FILES), "-o", out, "--skip-unsupported", *cases).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    return out


def reduce_all(terms: np.ndarray, lanes: int) -> np.ndarray:
    """vec::reduce_all over each row: a running sum per lane (the tail in the first lanes), then halves added."""
    k, n = terms.shape
    v = np.concatenate([terms, np.zeros((k, (-n) % lanes), F)], axis=1).reshape(k, -1, lanes)
    v = np.cumsum(v, axis=1, dtype=F)[:, -1, :] if v.shape[1] else np.zeros((k, lanes), F)
    while v.shape[1] > 1:
        half = v.shape[1] // 2
        v = (v[:, :half] + v[:, half:]).astype(F)
    return v[:, 0]


def aten(t: dict, lanes: int = LANES, centred: bool = False) -> dict:
    """ATen's arrangement (module docstring) on a block of whole rows in float32, with `lanes` vector lanes;
    centred: dgamma's x̂ formed as the 950 does, fl(fl(x - mean) rstd), the only change."""
    dy, x = t["gradOut"][:, :, 0], t["input"][:, :, 0]
    k, n = dy.shape
    g = t["weightOptional"][0, :, 0] if "weightOptional" in t else None
    mean, rstd = t["mean"].reshape(-1), t["rstd"].reshape(-1)
    with np.errstate(all="ignore"):
        ds = reduce_all(dy * x * g if g is not None else dy * x, lanes)
        db = reduce_all(dy * g if g is not None else dy, lanes)
        scale = F(1) / F(n)
        b = (db * mean - ds) * rstd * rstd * rstd * scale
        c = -b * mean - db * rstd * scale
        ay = rstd[:, None] * dy * (g if g is not None else F(1))
        dx = ay + b[:, None] * x + c[:, None]
        xh = (x - mean[:, None]) * rstd[:, None] if centred else rstd[:, None] * x + (-rstd * mean)[:, None]
        gw = np.cumsum(dy * xh, axis=0, dtype=F)[-1:]
        gb = np.cumsum(dy, axis=0, dtype=F)[-1:]
    return {GI: dx[:, :, None], GW: gw[:, :, None], GB: gb[:, :, None]}


def outputs_within(record: dict) -> dict[str, bool]:
    """{output: every metric of it within its limit} from a verify JSON case record."""
    within: dict[str, bool] = {}
    for row in record["rows"]:
        within[row["output"]] = within.get(row["output"], True) and row["within"]
    return within


def test_the_950_kernel_passes_every_case(suite, tmp_path):
    code, records = verify_records(suite)
    assert code == 0 and records


@pytest.mark.parametrize("lanes", [LANES, 16])
def test_atens_arrangement_fails_only_on_its_uncentred_dgamma(suite, tmp_path, lanes):
    wrote, records = independent_rows.run_suite(suite, tmp_path / "aten", lambda t: aten(t, lanes))
    assert wrote >= 100
    failing = {cid: outputs_within(r) for cid, r in records.items() if r["status"] != "PASS"}
    assert len(failing) >= 3, failing  # (the class is met in these suites: 7 cases)
    for cid, within in failing.items():
        assert within[GI] and within.get(GB, True) and not within[GW], cid
    wrote, records = independent_rows.run_suite(suite, tmp_path / "centred", lambda t: aten(t, lanes, centred=True))
    assert not independent_rows.not_passing(records)
    assert set(failing) <= set(records)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 64, 1001])
def test_reduce_all_adds_lanes_then_halves(n):
    """The lane order by hand: lane j holds x[j], x[j + 8], ...; then (l0 + l4) + (l2 + l6) + ((l1 + l5) + (l3 + l7))."""
    x = np.random.default_rng(n).normal(size=(1, n)).astype(F)
    lanes = [F(0)] * LANES
    for i, v in enumerate(x[0]):
        lanes[i % LANES] = F(lanes[i % LANES] + v)
    h = [F(lanes[j] + lanes[j + 4]) for j in range(4)]
    q = [F(h[j] + h[j + 2]) for j in range(2)]
    assert reduce_all(x, LANES)[0] == F(q[0] + q[1])
