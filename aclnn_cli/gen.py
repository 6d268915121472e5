"""gen: case -> directory of storage .bin files, golden and case.json, written atomically."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import manifest as M
from .cases import Case
from .fill import generate
from .golden import golden
from .storage import CHUNK, atomic_write_text, chunks, create_storage, replace_dir, safe_child, sha256_file, write_view


@dataclass(frozen=True)
class GenResult:
    case_id: str
    path: Path
    elements: int
    exact_fallbacks: int


def generate_case(case: Case, out_root: Path, chunk: int = CHUNK) -> GenResult:
    """Write one case under out_root/<case_id>/. Nothing is left half-written if this is interrupted."""
    out_root.mkdir(parents=True, exist_ok=True)
    final = safe_child(out_root, case.case_id)
    tmp = out_root / f".{case.case_id}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        fallbacks = _write_tensors(case, tmp, chunk)
        digests = {p.name: sha256_file(p) for p in sorted(tmp.glob("*.bin"))}
        atomic_write_text(tmp / M.MANIFEST, M.dumps_json(M.build(case, digests, fallbacks)))
        replace_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return GenResult(case.case_id, final, case.numel, fallbacks)


def _write_tensors(case: Case, tmp: Path, chunk: int) -> int:
    storages = {t.name: create_storage(tmp / M.input_file(t.name), t.dtype.np_dtype, t.layout.storage_size)
                for t in case.tensors}
    out = case.output
    want_golden = case.expect_status == 0
    gold = create_storage(tmp / M.golden_file(out.name), out.dtype.np_dtype, out.layout.storage_size) if want_golden else None
    fallbacks = 0
    for start, stop in chunks(case.numel, chunk):
        values = {t.name: generate(t.fill, t.dtype, case.seed, t.slot, start, stop) for t in case.inputs}
        for t in case.inputs:
            write_view(storages[t.name], t.layout, start, stop, values[t.name])
        if gold is not None:
            result, hard = golden(case.op, values, out.dtype)
            write_view(gold, out.layout, start, stop, result)
            fallbacks += hard
    for arr in [*storages.values(), gold]:
        if isinstance(arr, np.memmap):
            arr.flush()
    return fallbacks
