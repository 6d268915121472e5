"""Helpers of tests/test_gate_edges.py: cases of every op and dtype, broken dumps, tolerance sets at the
edges of each standard's accepted ranges, and what makes a case of ordinary magnitude (tolerances.py)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aclnn_cli import dtypes as D
from aclnn_cli import manifest as M
from aclnn_cli.judge.comparison import tolerance_dtype
from aclnn_cli.standards import STANDARDS, Standard
from aclnn_cli.ops import OPS

DTYPES = ("float16", "bfloat16", "float32")
BROKEN = ("sign", "zero")
TUNABLE = [name for name, s in STANDARDS.items() if s.defaults(D.FLOAT32)]  # bitwise has no tolerance


def attributes_yaml(op) -> str:
    """The op's first oracle attributes as a YAML flow mapping entry (ops with required attributes)."""
    attrs = dict(op.oracle_attributes[0]) if op.attributes else {}
    if not attrs:
        return ""
    return ", attributes: {" + ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else repr(v)}"
                                         for k, v in attrs.items()) + "}"


def suite_yaml(op, names=BROKEN, shape: int = 128, extra: str = "", dtypes=DTYPES) -> str:
    """Small cases of `op` in each dtype (one per name), gradOutput ~ N(0, 1), the op's own self range."""
    lines = [f"op: {op.name}", "cases:"]
    for name in names:
        for d in dtypes:
            lines.append(f"  - {{name: {name}-{d}, dtype: {d}, shape: [{shape}], seed: 7{attributes_yaml(op)}{extra}}}")
    return "\n".join(lines) + "\n"


def case_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in out.glob("*/case.json"))


def write_broken(case: Path, broken: str) -> None:
    """The dump as the golden with every sign flipped, or all zeros."""
    m = M.load(case)
    out = m.output
    g = np.fromfile(out.golden, dtype=out.dtype.np_dtype)
    (-g if broken == "sign" else np.zeros_like(g)).tofile(out.dump)


def inputs_f64(m: M.CaseManifest) -> dict[str, np.ndarray]:
    """The inputs of a contiguous case as float64 (with the op's attributes)."""
    ins = {t.name: np.fromfile(t.file, dtype=t.dtype.np_dtype).astype(np.float64) for t in m.inputs}
    return {**ins, **m.attribute_values}


def informative(m: M.CaseManifest) -> tuple[np.ndarray, np.ndarray]:
    """(informative mask, |golden|): finite golden, normal in the judged dtype, at least 1/RELIEF_SCALE of
    its term scale, and not where the device's documented edge result differs."""
    from aclnn_cli.tolerances import RELIEF_SCALE
    out = m.output
    g = np.fromfile(out.golden, dtype=out.dtype.np_dtype).astype(np.float64)
    ins = inputs_f64(m)
    ref = m.op.golden_f64(ins)
    where, _ = m.op.device_edges(ins)
    floor = tolerance_dtype(m)[1]
    with np.errstate(invalid="ignore"):
        mask = np.isfinite(g) & (np.abs(g) >= floor) & (ref.scale <= RELIEF_SCALE * np.abs(g)) & ~np.asarray(where)
    return mask, np.abs(g)


def assert_ordinary(m: M.CaseManifest) -> None:
    """The case meets the definition the ranges are derived for (tolerances.py)."""
    from aclnn_cli.tolerances import ORDINARY_MAGNITUDE, ORDINARY_SHARE
    mask, mag = informative(m)
    assert mask.mean() >= ORDINARY_SHARE, (m.case_id, mask.mean())
    assert (mag[mask] >= ORDINARY_MAGNITUDE).any(), m.case_id


@dataclass(frozen=True)
class Edge:
    label: str
    values: dict[str, float]


def _extremes(std: Standard, key: str, dtype, p: dict[str, float]) -> tuple[float, float]:
    """A key's smallest and largest accepted values with the other keys as in p (joint bounds included)."""
    lo, hi = std.ranges[key].extremes(dtype)
    for j in std.joints:
        if key in j.keys:
            hi = min(hi, j.top(key, p))
    return lo, hi


def edge_sets(std: Standard, dtype) -> list[Edge]:
    """Each key alone at its min and max; every corner (each key at its min or max, together; with a joint
    bound the keys earlier in order take the room, so all-max is also taken in reverse order); and each joint
    bound exactly met with the others at their max."""
    base = std.defaults(dtype)
    keys = sorted(base)
    sets = []
    for k in keys:
        lo, hi = _extremes(std, k, dtype, base)
        sets += [Edge(f"{k} min", {k: lo}), Edge(f"{k} max", {k: hi})]
    corners = [(f"corner {''.join('+' if side else '-' for side in sides)}", keys, sides)
               for sides in itertools.product((0, 1), repeat=len(keys))]  # every key at one end, together
    for label, order, sides in corners + [("all max, reversed", keys[::-1], (1,) * len(keys))]:
        p = dict(base)
        for k, side in zip(order, sides):
            p[k] = _extremes(std, k, dtype, p)[side]
        sets.append(Edge(label, {k: p[k] for k in keys}))
    for j in std.joints:
        for k in j.keys:
            p = dict(base)
            for other in j.keys:
                if other != k:
                    p[other] = std.ranges[other].extremes(dtype)[1]
            p[k] = j.top(k, p)
            if std.ranges[k].contains(p[k], dtype):
                sets.append(Edge(f"joint {'*'.join(j.keys)} met, {k} last", {x: p[x] for x in j.keys}))
    return sets


def outside_values(std: Standard, dtype) -> list[tuple[str, float, str]]:
    """(key, value, why) just outside each key's range, and just past each joint bound."""
    out = []
    for k, rng in std.ranges.items():
        if k not in std.defaults(dtype):
            continue
        lo, hi = rng.bounds(dtype)
        out.append((k, math.nextafter(lo, -math.inf) if rng.closed_lo else lo, "below"))
        out.append((k, hi if rng.open_hi else math.nextafter(hi, math.inf), "above"))
    base = std.defaults(dtype)
    for j in std.joints:
        for k in j.keys:
            top = j.top(k, base)
            if std.ranges[k].contains(top, dtype):
                out.append((k, math.nextafter(top, math.inf), "joint"))
    return out


def every_op():
    return sorted(OPS.values(), key=lambda o: o.name)
