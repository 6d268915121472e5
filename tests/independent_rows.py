"""An independent float32 kernel of a Rows op (written in its test file, e.g. ATen's order) over every bundled
case: the case's whole rows in float32, the kernel's outputs rounded once to each output's dtype and written
as the dumps, then verify. Cases the kernel cannot take (empty ones) keep the emulated dumps; how many it
wrote is returned, so a test can assert it covered the suite."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import harness
from shared import linked_copy
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.casedir import manifest as M
from aclnn_cli.pipeline.stages import gather_blocks, geometry
from aclnn_cli.tensor.storage import StorageFile


def case_blocks(m: M.CaseManifest) -> dict:
    """Every block of a Rows case (k, R, A0) as stored (docs/families.md), null inputs absent."""
    geo = geometry(m)
    files = {t.name: StorageFile(t.file, t.dtype.np_dtype, t.layout.storage_size) for t in m.inputs if not t.null}
    try:
        return gather_blocks(m, files, geo, 0, geo.a1)
    finally:
        for f in files.values():
            f.close()


def _blocks32(m: M.CaseManifest) -> dict:
    """Every block of the case, float inputs in float32 (bfloat16 too: its dtype kind is not "f"), integer ones
    as int64, with the attributes."""
    wide = {k: v if np.issubdtype(v.dtype, np.integer) else v.astype(np.float32) for k, v in case_blocks(m).items()}
    return {**wide, **m.attribute_values}


def run_suite(suite: Path, tmp_path: Path, kernel) -> tuple[int, dict[str, dict]]:
    """(cases the kernel wrote, {case id: verify record}) for a generated and emulated directory."""
    from helpers import verify_records

    work = linked_copy(suite, tmp_path / "independent")  # (gen's files linked: the kernel writes only dumps)
    wrote = 0
    for d in sorted(p.parent for p in work.glob("*/case.json")):
        m = M.load(d)
        if m.expect_status != 0 or geometry(m).numel == 0:
            continue
        with np.errstate(all="ignore"):
            result = m.op.by_output(kernel(_blocks32(m)))
        raw = harness.tensors(harness.load(d))
        for out in m.judged:
            t = raw[out.name]
            values = np.asarray(result[out.name], dtype=np.float32).reshape(-1)
            rounded = D.round_from_f32(values, D.lookup(t["dtype"]), "rint").reshape(t["shape"])
            buf = harness.storage(d, t).copy()
            harness.view(buf, t)[...] = rounded
            buf.tofile(d / t["dump"])
        wrote += 1
    return wrote, verify_records(work, jobs=1)[1]


def not_passing(records: dict[str, dict]) -> list[tuple[str, str, str]]:
    return [(cid, c["status"], c["reason"][:300]) for cid, c in records.items() if c["status"] != "PASS"]
