"""Helpers of the loss-gradient tests (test_op_l1_loss_backward.py, test_op_soft_margin_loss_backward.py): a case's
tensors read fast, and oracle values rounded once to a dtype, exactly.

The rounding is decided in float64 where it can be (a value known to within a relative bound rounds alike at both
ends of its interval: rounding is monotonic), and in exact arithmetic where the interval holds a rounding
boundary: Fractions for a rational value (D.round_fraction), mpmath at 200 bits otherwise (tests/oracle.py's
Rounder, the exhaustive tests' rounding). None of it is aclnn_cli's golden path."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from aclnn_cli.tensor import dtypes as D

from helpers import manifest, read_storage, tensor


def logical(case: Path, t: dict, key: str = "file") -> np.ndarray:
    """A tensor through the manifest's shape, strides and offset (a strided view: helpers.logical walks every
    element in Python)."""
    storage = read_storage(case, t, key)
    if 0 in t["shape"]:
        return np.empty(t["shape"], storage.dtype)
    item = storage.itemsize
    return np.lib.stride_tricks.as_strided(storage[t["offset"]:], t["shape"], [s * item for s in t["strides"]]).copy()


def case_arrays(case: Path, inputs: tuple[str, ...], output: str):
    """(manifest, {input: float64 values broadcast to the output and flattened}, golden as float64, attributes)."""
    m = manifest(case)
    out = tensor(m, output)
    shape = tuple(out["shape"])
    t = {n: np.broadcast_to(logical(case, tensor(m, n)).astype(np.float64), shape).reshape(-1) for n in inputs}
    attrs = {a["name"]: a["value"] for a in m.get("attributes", [])}
    return m, t, logical(case, out, "golden").astype(np.float64).reshape(-1), attrs


def round_interval(value: np.ndarray, rel: float, dtype: D.DType, exact, terms: np.ndarray | None = None) -> np.ndarray:
    """value (float64, within rel * |value| + 2^-1070 of the exact result, or rel * terms where its terms cancel)
    rounded to dtype; where the two ends of that interval round apart, exact(i) -> the exact value's rounding (a
    float) decides."""
    slack = rel * (np.abs(value) if terms is None else terms) + 2.0**-1070
    with np.errstate(all="ignore"):
        lo, mid, hi = (D.round_from_f64(v, dtype).astype(np.float64) for v in (value - slack, value, value + slack))
    out = mid.copy()
    for i in np.flatnonzero((lo != hi) & np.isfinite(value)):
        out[i] = exact(int(i))
    return out


def own_cases(out: Path, key: str) -> list[Path]:
    """The op's cases (by its key) in a generated OUT, e.g. the session's bundled suite."""
    return sorted(p.parent for p in out.glob(f"{key}-*/case.json"))


def independent_run(bundled: Path, key: str, work: Path, kernel) -> tuple[list, int]:
    """Every positive bundled case of the op through tests/harness.py's run_case with `kernel` (an independent float32
    implementation) on a linked copy, then verify: (the cases that do not PASS, the number judged)."""
    import harness
    from aclnn_cli.judge.verify import verify_dirs
    from shared import linked_copy

    names = [d.name for d in own_cases(bundled, key) if manifest(d)["expect_status"] == 0]
    out = linked_copy(bundled, work, names)
    positive = [out / n for n in names]
    for d in positive:
        harness.run_case(d, kernel)
    run = verify_dirs(positive)
    return [(c.case_id, c.status, c.reason) for c in run.cases if c.status != "PASS"], len(run.cases)


def oracle_checked(bundled: Path, key: str, check) -> int:
    """How many golden elements of the op's positive bundled cases `check(case) -> (checked, wrong)` compared,
    asserting none was wrong (the case named where one was)."""
    checked = 0
    for case in own_cases(bundled, key):
        if manifest(case)["expect_status"] == 0:
            c, bad = check(case)
            assert bad == 0, case.name
            checked += c
    return checked

