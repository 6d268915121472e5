"""A minimal device harness written only from the README's manifest contract.

It reads tensors through shape/strides/offset with numpy's as_strided (no
aclnn_cli layout code), broadcasts with numpy, runs a kernel and writes the
result into a copy of the initial output storage at the view's positions.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from aclnn_cli.tensor import dtypes as D


def load(case_dir: Path) -> dict:
    return json.loads((case_dir / "case.json").read_text())


def storage(case_dir: Path, t: dict, key: str = "file") -> np.ndarray:
    return np.fromfile(case_dir / t[key], dtype=D.lookup(t["dtype"]).np_dtype)


def view(buf: np.ndarray, t: dict) -> np.ndarray:
    """The logical tensor of a storage buffer, by the manifest's numbers alone."""
    if 0 in t["shape"]:
        return np.empty(t["shape"], dtype=buf.dtype)
    base = buf[t["offset"]:]
    return np.lib.stride_tricks.as_strided(base, shape=t["shape"], strides=[s * buf.itemsize for s in t["strides"]],
                                           writeable=True)


def tensors(m: dict) -> dict[str, dict]:
    return {t["name"]: t for t in m["tensors"]}


def run_case(case_dir: Path, kernel) -> None:
    """kernel(op, {name: logical float array broadcast to the output shape}, out_dtype) -> output array."""
    m = load(case_dir)
    if m["expect_status"] != 0:
        return
    ts = tensors(m)
    out = next(t for t in m["tensors"] if t["role"] == "output")
    ins = {n: np.broadcast_to(view(storage(case_dir, t), t), out["shape"]) for n, t in ts.items()
           if t["role"] == "input" and not t.get("null")}  # (a null optional input: absent)
    attrs = {a["name"]: a["value"] for a in m.get("attributes", [])}  # scalars: null, or a number / "inf"
    result = kernel(m["op"], ins, ts, attrs)
    buf = storage(case_dir, out).copy()
    view(buf, out)[...] = result
    buf.tofile(case_dir / out["dump"])
