"""gen: case -> directory of storage .bin files, golden and case.json, written atomically.

Inputs are written by their own logical index, then read back through their
views to compute the golden: broadcasting and self-overlapping views (stride 0)
need no special case, and the golden is always computed from exactly the bytes
the device will read. A large case with contiguous inputs is split into ranges
that workers fill in parallel; the bytes do not depend on how it is split.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..pipeline import blockdigests, stages as pipeline
from ..files import jsonsafe
from ..casedir import manifest as M

from ..casedir import dirs as casedirs

from ..casedir import manifest_text
from ..cases.case import Case
from ..errors import UserError
from ..files.jsonsafe import JsonRefused
from ..values.fill import generate
from .fingerprint import fingerprint
from .rounding import ExactPath, golden
from ..pipeline.parallel import Runner, paused_gc
from ..pipeline.stages import Stage, case_elements, gather_inputs, ranges, run_stage
from .derived import derive_inputs, is_derived
from .rowsgen import fill_rows_goldens
from .outdir import SizeLimits, check_free_space, check_sizes, prepare_output_dir, remove_stale
from ..tensor.storage import (CHUNK, StorageFile, WriteError, allocate, canary, chunks_between, copy_storage,
                              in_view_mask, replace_dir, safe_child, write_new_file)
from ..files.regular import regular_file_bytes, sha256_file, sha256_of_file


@dataclass(frozen=True, slots=True)
class GenResult:
    case_id: str
    root: Path  # the output root (one Path shared by a run's results)
    elements: int
    exact_path: ExactPath  # how many golden elements took the exact path, and how many were left uncertified
    skipped: bool = False  # unchanged and intact: nothing written

    @property
    def path(self) -> Path:
        return self.root / self.case_id


def generate_case(case: Case, out_root: Path, chunk: int = CHUNK, force: bool = False) -> GenResult:
    """Write one case under out_root/<case_id>/. Nothing is left half-written if this is interrupted.

    A case whose definition, tool version and seed are unchanged and whose files are intact is
    skipped unless `force`. When a case is rewritten with the same definition, the device's
    dumps and status file are kept (they were made from the same inputs).
    """
    with _naming(case):
        return _generate_case(case, out_root, chunk, force)


def _generate_case(case: Case, out_root: Path, chunk: int, force: bool) -> GenResult:
    fp, old, skip = _previous(case, out_root, force)
    if skip:
        return skip
    local = case.op.family.element_local
    if local and _fits_in_memory(case, chunk):
        return _generate_in_memory(case, out_root, fp, old)
    tmp = prepare(case, out_root)
    try:
        for t in case.inputs:
            if not t.null and not is_derived(t):
                fill_input(case, tmp, t.name, 0, t.layout.numel, chunk)
        derive_inputs(case, tmp, chunk)  # (after the inputs they are made from: MaxPool's indices from self)
        fallbacks = fill_golden(case, tmp, 0, case.numel, chunk) if local else fill_rows_goldens(case, tmp, chunk)
        return finish(case, out_root, tmp, fallbacks, fp, old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextmanager
def _naming(case: Case):
    """A refusal raised by an op's functions on this case's values (an NLL target out of range) names no
    case: it gets the case file and id, as a case file's own errors do."""
    try:
        yield
    except UserError as exc:
        if exc.where:
            raise
        named = f"case '{case.name}'" + (f" ({case.case_id})" if case.name != case.case_id else "")
        key = f": key '{exc.key}'" if getattr(exc, "key", "") else ""
        raise UserError(str(exc), where=f"{case.source}: {named}{key}") from None


def _fits_in_memory(case: Case, chunk: int) -> bool:
    """A small case of plain tensors: every file is one chunk, written once from memory."""
    shape = case.output.layout.shape
    return all(t.null or (not is_derived(t) and t.layout.storage_size == t.layout.numel <= chunk and t.layout.is_contiguous
                          and (case.expect_status != 0 or t.layout.shape == shape)) for t in case.tensors)


def _generate_in_memory(case: Case, out_root: Path, fp: str, old: dict | None) -> GenResult:
    """The fast path for thousands of small cases: the same bytes as the chunked path (tested), with
    each file created, written and hashed once, and no re-reads."""
    blobs: dict[str, bytes] = {}
    values: dict[str, np.ndarray] = {}
    for t in case.inputs:
        if not t.null:
            values[t.name] = generate(t.fill, t.dtype, case.seed, t.slot, 0, t.layout.numel)
            blobs[M.input_file(t.name)] = values[t.name].tobytes()
    out = case.output
    if not out.null:
        blobs[M.input_file(out.name)] = np.full(out.layout.storage_size, canary(out.dtype)).tobytes()
    fallbacks = ExactPath()
    if case.expect_status == 0:
        result, fallbacks = golden(case.op, values, out.dtype, case.attribute_values)
        blobs[M.golden_file(out.name)] = np.ascontiguousarray(result, dtype=out.dtype.np_dtype).tobytes()
    tmp = _fresh_tmp(case, out_root)
    try:
        where = str(tmp)
        for name, data in blobs.items():
            write_new_file(casedirs.join(where, name), data)
        digests = {name: hashlib.sha256(data).hexdigest() for name, data in sorted(blobs.items())}
        return finish(case, out_root, tmp, fallbacks, fp, old, digests)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@paused_gc()
def generate_batch(cases: list[Case], out_root: Path, chunk: int = CHUNK, force: bool = False) -> list[GenResult]:
    """Several small cases in one unit of work for the pool (see parallel.batches)."""
    return [generate_case(c, out_root, chunk, force) for c in cases]


def generate_cases(cases: list[Case], out_root: Path, jobs: int = 1, chunk: int = CHUNK, force: bool = False,
                   on_done=None, limits: "SizeLimits | None" = None, before_cases=None) -> list[GenResult]:
    """Generate many cases: small ones one per worker, large ones split into ranges across workers.

    Before anything is written: the sizes are checked against `limits`, the output directory
    is made and proved writable, and stale temporary directories of dead gens are removed.
    before_cases(): called then, before the first case (a sharded gen's record: see shardout.py).
    """
    check_sizes(cases, limits or SizeLimits())
    prepare_output_dir(out_root)
    remove_stale(out_root)
    # Predicted need: the cases not generated yet (an existing case that changed needs room too, but
    # telling would cost a manifest read per case; a disk that fills anyway is a clean error).
    there = set() if force else set(casedirs.subdirs(out_root))  # (one scandir, not a stat per case)
    check_free_space(out_root, sum(c.storage_bytes for c in cases if c.case_id not in there))
    before_cases and before_cases()
    results: list[GenResult] = []

    def done(case: Case, r: GenResult) -> None:
        results.append(r)
        on_done and on_done(r)

    stage = Stage(size=_elements, batch=generate_batch, split=_generate_split, args=(out_root, chunk, force),
                  splittable=_splittable)
    run_stage(stage, cases, jobs, done)
    return results


def _elements(case: Case) -> int:
    return case_elements(case)


def _splittable(case: Case) -> bool:
    """Contiguous inputs of an element-local op (a Rows op's case runs in one worker: its sums over every
    row would need their partials gathered from the workers)."""
    return case.op.family.element_local and all(t.null or t.layout.is_contiguous for t in case.inputs)


def _generate_split(run: Runner, case: Case, out_root: Path, chunk: int, force: bool) -> GenResult:
    with _naming(case):
        return _generate_split_case(run, case, out_root, chunk, force)


def _generate_split_case(run: Runner, case: Case, out_root: Path, chunk: int, force: bool) -> GenResult:
    fp, old, skip = _previous(case, out_root, force)
    if skip:
        return skip
    tmp = prepare(case, out_root)
    try:
        run.map(fill_input, [(case, tmp, t.name, s, e, chunk) for t in case.inputs if not t.null and not is_derived(t)
                             for s, e in ranges(t.layout.numel)])
        derive_inputs(case, tmp, chunk)
        fallbacks = sum(run.map(fill_golden, [(case, tmp, s, e, chunk) for s, e in ranges(case.numel)]), ExactPath())
        return finish(case, out_root, tmp, fallbacks, fp, old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _previous(case: Case, out_root: Path, force: bool) -> tuple[str, dict | None, GenResult | None]:
    """(fingerprint, the manifest the case has now or None, the result if it need not be written again)."""
    fp = fingerprint(case)
    final = safe_child(out_root, case.case_id)
    old = _existing(final)
    return fp, old, None if force else _reusable(case, out_root, final, old, fp)


def _reusable(case: Case, out_root: Path, final: Path, old: dict | None, fp: str) -> GenResult | None:
    """The result for a case that need not be written again (same fingerprint, files intact), or None."""
    if old is None or old.get("fingerprint") != fp or not _intact(final, old):
        return None
    try:
        fallbacks = ExactPath(int(old["golden"]["exact_fallback_elements"]),
                              int(old["golden"].get("uncertified_elements", 0)))
    except (KeyError, TypeError, ValueError):
        return None
    return GenResult(case.case_id, out_root, case.numel, fallbacks, skipped=True)


def _fresh_tmp(case: Case, out_root: Path) -> Path:
    """An empty `.<id>.partial-<pid>` beside the case's directory (refusing to replace a foreign one)."""
    final = safe_child(out_root, case.case_id)
    if os.path.lexists(final) and not (final.is_dir() and (final / casedirs.MANIFEST).is_file()):
        raise UserError(f"exists and is not a case directory gen wrote (no {casedirs.MANIFEST}); move it away or choose "
                        f"another output directory", where=str(final))
    tmp = out_root / f".{case.case_id}.partial-{os.getpid()}"
    try:
        try:
            tmp.mkdir()
        except FileNotFoundError:  # (generate_cases made out_root; a lone generate_case may not have)
            out_root.mkdir(parents=True, exist_ok=True)
            tmp.mkdir()
    except FileExistsError:  # left by a killed process that had this pid
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    except OSError as exc:
        raise WriteError(f"cannot create: {exc.strerror}", where=str(tmp)) from None
    return tmp


def prepare(case: Case, out_root: Path) -> Path:
    """A fresh temporary directory with every storage file allocated: poison and canary in place.

    If this fails (a full disk), the temporary directory is removed before the error goes on.
    """
    tmp = _fresh_tmp(case, out_root)
    try:
        _allocate_all(case, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


def _poison(dtype: np.dtype):
    """What an input's storage holds outside its view: NaN for a float (NaN in both parts for a complex); for an
    integer (a strided repeats or index tensor) the value furthest from any count or index, the dtype's minimum (an
    unsigned one's maximum)."""
    if np.dtype(dtype).kind == "c":
        return complex(np.nan, np.nan)
    if np.dtype(dtype).kind not in "iu":
        return np.nan
    info = np.iinfo(dtype)
    return info.min if info.min < 0 else info.max


def _allocate_all(case: Case, tmp: Path) -> None:
    for t in case.tensors:
        if t.null:
            continue
        path = tmp / M.input_file(t.name)
        allocate(path, t.dtype.np_dtype, t.layout.storage_size)
        with StorageFile(path, t.dtype.np_dtype, t.layout.storage_size, writable=True) as st:
            if t.role == "output":
                st.fill(canary(t.dtype))  # the device must overwrite every element of the view, and nothing else
            elif not t.layout.is_contiguous:
                st.fill(_poison(t.dtype.np_dtype), ~in_view_mask(t.layout))  # reading outside the view shows
    for out in case.tensors:
        if out.role != "output" or out.null or case.expect_status != 0:
            continue
        gold = tmp / M.golden_file(out.name)
        if out.layout.is_contiguous:
            allocate(gold, out.dtype.np_dtype, out.layout.storage_size)  # every element gets written
        else:
            copy_storage(tmp / M.input_file(out.name), gold)  # outside the view, expect the canary untouched


def fill_input(case: Case, tmp: Path, name: str, start: int, stop: int, chunk: int = CHUNK) -> None:
    t = next(x for x in case.inputs if x.name == name)
    with StorageFile(tmp / M.input_file(t.name), t.dtype.np_dtype, t.layout.storage_size, writable=True) as st:
        for s, e in chunks_between(start, stop, chunk):
            st.write(t.layout, s, e, generate(t.fill, t.dtype, case.seed, t.slot, s, e))


def fill_golden(case: Case, tmp: Path, start: int, stop: int, chunk: int = CHUNK) -> ExactPath:
    """Golden for output elements [start, stop); returns how its uncertain elements were settled."""
    if case.expect_status != 0:
        return ExactPath()
    out = case.output
    ins = {t.name: StorageFile(tmp / M.input_file(t.name), t.dtype.np_dtype, t.layout.storage_size)
           for t in case.inputs if not t.null}
    fallbacks = ExactPath()
    try:
        with StorageFile(tmp / M.golden_file(out.name), out.dtype.np_dtype, out.layout.storage_size, writable=True) as gold:
            for s, e in chunks_between(start, stop, chunk):
                values = gather_inputs(case, ins, s, e)
                result, hard = golden(case.op, values, out.dtype, case.attribute_values)
                gold.write(out.layout, s, e, result)
                fallbacks += hard
    finally:
        for f in ins.values():
            f.close()
    return fallbacks


def finish(case: Case, out_root: Path, tmp: Path, fallbacks: ExactPath, fp: str, old: dict | None,
           digests: dict[str, str] | None = None) -> GenResult:
    """Checksums (unless given), manifest, kept dumps; then move the finished directory into place.

    old: the manifest the case had before (its dumps are kept if it had the same fingerprint).
    """
    final = safe_child(out_root, case.case_id)
    blocks = {}
    if digests is None:
        blocks = _golden_blocks(case, tmp)
        digests = {p.name: sha256_file(p) for p in sorted(tmp.glob("*.bin")) if p.name not in blocks}
        digests.update({name: whole for name, (whole, _) in blocks.items()})
    extra = {t.name: {blockdigests.KEY: blockdigests.entry(blocks[M.golden_file(t.name)][1])}
             for t in case.tensors if t.role == "output" and M.golden_file(t.name) in blocks}
    manifest = manifest_text.sealed_text(M.build(case, digests, fallbacks.exact, fp, extra, fallbacks.uncertified))
    write_new_file(casedirs.join(str(tmp), casedirs.MANIFEST), manifest)  # tmp is private
    if old is not None and old.get("fingerprint") == fp:
        for kept in [*final.glob("*.dump.bin"), final / M.STATUS_FILE]:
            if kept.is_file():
                copy_storage(kept, tmp / kept.name)
    replace_dir(tmp, final, fresh=old is None)
    return GenResult(case.case_id, out_root, case.numel, fallbacks)


def _golden_blocks(case: Case, tmp: Path) -> dict[str, tuple[str, list[str]]]:
    """{golden file: (its sha256, the sha256 of each block)} of the large goldens a split verify checks by
    block (blockdigests.py), hashed in the one read that gives their whole-file sha256."""
    if case.expect_status != 0:
        return {}
    return {M.golden_file(t.name): blockdigests.file_digests(tmp / M.golden_file(t.name),
                                                            pipeline.RANGE * t.dtype.itemsize)
            for t in case.tensors if t.role == "output" and not t.null and blockdigests.wanted(t.layout, t.layout.numel)}


def _existing(case_dir: Path) -> dict | None:
    """The manifest gen wrote there before, or None if there is none it can use (then the case is written
    again): read as verify reads one (a regular file, strict JSON under jsonsafe's limits)."""
    data = regular_file_bytes(casedirs.join(str(case_dir), casedirs.MANIFEST), M.MAX_MANIFEST_BYTES)
    try:
        old = None if data is None else jsonsafe.loads(jsonsafe.decode_utf8(data))
    except JsonRefused:
        return None
    return old if isinstance(old, dict) else None


def _intact(case_dir: Path, manifest: dict) -> bool:
    """Every file the manifest lists is there with its recorded checksum (a malformed list: not intact)."""
    where = str(case_dir)
    tensors = manifest.get("tensors")
    if not isinstance(tensors, list) or not all(isinstance(t, dict) for t in tensors):
        return False
    for t in tensors:
        for name_key, sum_key in (("file", "sha256"), ("golden", "golden_sha256")):
            if name_key in t:
                name = t[name_key]
                if not isinstance(name, str) or "/" in name or name in ("", ".", ".."):
                    return False
                digest = sha256_of_file(os.path.join(where, name))
                if digest is None or digest != t.get(sum_key):
                    return False
    return True
