"""gen: case -> directory of storage .bin files, golden and case.json, written atomically.

Inputs are written by their own logical index, then read back through their
views to compute the golden: broadcasting and self-overlapping views (stride 0)
need no special case, and the golden is always computed from exactly the bytes
the device will read.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import manifest as M
from .cases import Case
from .fill import generate
from .golden import golden
from .storage import (CHUNK, atomic_write_text, canary, chunks, create_storage, gather, in_view_mask, replace_dir,
                      safe_child, sha256_file, write_view)


@dataclass(frozen=True)
class GenResult:
    case_id: str
    path: Path
    elements: int
    exact_fallbacks: int
    skipped: bool = False  # unchanged and intact: nothing written


def generate_case(case: Case, out_root: Path, chunk: int = CHUNK, force: bool = False) -> GenResult:
    """Write one case under out_root/<case_id>/. Nothing is left half-written if this is interrupted.

    A case whose definition, tool version and seed are unchanged and whose files are intact is
    skipped unless `force`. When a case is rewritten with the same definition, the device's
    dumps and status file are kept (they were made from the same inputs).
    """
    out_root.mkdir(parents=True, exist_ok=True)
    final = safe_child(out_root, case.case_id)
    fingerprint = M.fingerprint(case)
    old = _existing(final)
    same = old is not None and old.get("fingerprint") == fingerprint
    if same and not force and _intact(final, old):
        return GenResult(case.case_id, final, case.numel, old["golden"]["exact_fallback_elements"], skipped=True)
    tmp = out_root / f".{case.case_id}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        fallbacks = _write_tensors(case, tmp, chunk)
        digests = {p.name: sha256_file(p) for p in sorted(tmp.glob("*.bin"))}
        atomic_write_text(tmp / M.MANIFEST, M.dumps_json(M.build(case, digests, fallbacks)))
        if same:
            for kept in [*final.glob("*.dump.bin"), final / M.STATUS_FILE]:
                if kept.is_file():
                    shutil.copy2(kept, tmp / kept.name)
        replace_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return GenResult(case.case_id, final, case.numel, fallbacks)


def _existing(case_dir: Path) -> dict | None:
    try:
        return json.loads((case_dir / M.MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _intact(case_dir: Path, manifest: dict) -> bool:
    """Every file the manifest lists is there with its recorded checksum."""
    for t in manifest.get("tensors", []):
        for name_key, sum_key in (("file", "sha256"), ("golden", "golden_sha256")):
            if name_key in t:
                path = case_dir / t[name_key]
                if not path.is_file() or sha256_file(path) != t.get(sum_key):
                    return False
    return True


def _write_tensors(case: Case, tmp: Path, chunk: int) -> int:
    storages = {}
    for t in case.tensors:
        if t.null:
            continue
        st = create_storage(tmp / M.input_file(t.name), t.dtype.np_dtype, t.layout.storage_size)
        if t.role == "output":
            st[:] = canary(t.dtype)  # the device must overwrite every element of the view, and nothing else
        elif not t.layout.is_contiguous:
            st[~in_view_mask(t.layout)] = np.nan  # poison: a kernel reading outside the view sees NaN
        storages[t.name] = st
    for t in case.inputs:
        if not t.null:
            for start, stop in chunks(t.layout.numel, chunk):
                write_view(storages[t.name], t.layout, start, stop, generate(t.fill, t.dtype, case.seed, t.slot, start, stop))
    fallbacks = 0
    out = case.output
    if case.expect_status == 0:
        if isinstance(storages[out.name], np.memmap):
            storages[out.name].flush()
        gold_path = tmp / M.golden_file(out.name)
        shutil.copyfile(tmp / M.input_file(out.name), gold_path)  # outside the view, expect the canary untouched
        gold = np.memmap(gold_path, dtype=out.dtype.np_dtype, mode="r+", shape=(out.layout.storage_size,)) \
            if out.layout.storage_size else np.empty(0, out.dtype.np_dtype)
        for start, stop in chunks(out.layout.numel, chunk):
            values = {t.name: gather(storages[t.name], t.layout, out.layout.shape, start, stop) for t in case.inputs}
            result, hard = golden(case.op, values, out.dtype)
            write_view(gold, out.layout, start, stop, result)
            fallbacks += hard
        storages["golden"] = gold
    for arr in storages.values():
        if isinstance(arr, np.memmap):
            arr.flush()
    return fallbacks
