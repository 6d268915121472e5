"""emulate: play the device. Phase one returns the contract's status; phase two computes like the kernel.

16-bit inputs are widened to float32, the op's float32 kernel runs, and the
result is cast to the compute dtype with the kernel's rounding mode
(docs/kernels.md); where the output dtype differs (Hardsigmoid's
promotion), a final Cast rounds to it to nearest even, as l0op::Cast does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import numpy as np

from ..tensor import dtypes as D
from ..casedir import manifest as M
from .defects import Variant
from .emulate_rows import emulate_rows_case
from .run import forget_run_verdict
from ..ops.complexparts import Parts
from ..ops.contract import compute_dtype
from ..errors import UserError
from ..pipeline.parallel import Runner, paused_gc
from ..pipeline.stages import (Stage, as_user_error, case_elements, gather_inputs, is_large, ranges, run_stage,
                               run_stage_on_dirs)
from ..tensor.storage import (CHUNK, StorageFile, WriteError, atomic_write_text, check_file_sha256, check_size,
                              chunks_between, copy_storage)


def kernel_output(m: M.CaseManifest, inputs: Mapping[str, np.ndarray], variant: Variant | None = None) -> np.ndarray:
    """The device result for one chunk of logical elements, in the output dtype (optionally a defect's)."""
    inner = compute_dtype(m.op, {t.name: t.dtype for t in m.tensors})
    kernel, wide_type = m.op.kernel or m.op._reference_value, np.float32  # (no kernel: the ideal device)
    if variant is not None:
        if variant.op_kernel and variant.name in m.op.variants:
            kernel = m.op.variants[variant.name]
        if variant.compute == "float64":
            wide_type = np.float64
        elif variant.compute == "float16-native" and inner is D.FLOAT16:
            wide_type = np.float16
        if variant.swap_inputs:
            dy, x = (t.name for t in m.op.inputs[:2])
            inputs = {**inputs, dy: inputs[x], x: inputs[dy]}
    if m.output.dtype.is_integer:
        return _integer_output(m, kernel, inputs, variant)
    if m.output.dtype.is_complex:
        own = variant is not None and variant.op_kernel and variant.name in m.op.variants
        return _complex_output(m, kernel if own else m.op.complex_formula, inputs, variant, inner)
    with np.errstate(all="ignore"):
        wide = {k: v.astype(wide_type) for k, v in inputs.items()}
        # attributes: scalars in the compute type (the kernel receives float32), the others as they are
        attrs = {k: wide_type(v) if isinstance(v, float) else v for k, v in m.attribute_values.items()}
        result = kernel({**wide, **attrs})
        if variant is not None and variant.post is not None:
            result = variant.post(result)
        result = np.asarray(result).astype(np.float32)
        mode = m.op.cast_mode.get(inner.name, "rint")
        cast = variant.cast if variant is not None and variant.cast is not None else D.round_from_f32
        result = cast(result, inner, mode)
        if inner != m.output.dtype:
            result = D.round_from_f32(result.astype(np.float32), m.output.dtype)
    return D.canonical_nans(np.asarray(result))


def _integer_output(m: M.CaseManifest, kernel, inputs: Mapping[str, np.ndarray], variant: Variant | None) -> np.ndarray:
    """An integer output's device result: integer inputs reach the kernel as they are, whose casts are its own
    (float32 holds int32 only to 2^24, and the device's ReluGrad multiplies int32 and int64 natively), float ones
    widened to float32; scalars as the float32 the kernel receives. The kernel's values go out as the dtype's with
    no rounding to model. A variant's output cast (a float rounding) and its post-processing (NaN to zero) have
    nothing to act on here: an integer has neither a rounding nor a NaN."""
    with np.errstate(all="ignore"):
        native = {k: v if v.dtype.kind in "iu" else v.astype(np.float32) for k, v in inputs.items()}
        attrs = {k: np.float32(v) if isinstance(v, float) else v for k, v in m.attribute_values.items()}
        result = kernel({**native, **attrs})
    return np.asarray(result).astype(m.output.dtype.np_dtype)


def _complex_output(m: M.CaseManifest, formula, inputs: Mapping[str, np.ndarray], variant: Variant | None,
                    inner: D.DType) -> np.ndarray:
    """A complex output's device result: the AI CPU's expression in T, the compute dtype, as the op's complex_formula
    writes it, each complex operation as std::complex<T> does it (ops/complexparts.py: the standard formula, every
    float operation rounded once in T, the same bytes on every machine). A variant's float cast has nothing to act
    on (no float32 result to round); its float64 compute is complex128, its post-processing (NaN to zero) applies."""
    wide = np.complex128 if variant is not None and variant.compute == "float64" else inner.np_dtype
    with np.errstate(all="ignore"):
        result = formula({**{k: Parts.of(v.astype(wide)) for k, v in inputs.items()}, **m.attribute_values})
        result = result.numpy() if isinstance(result, Parts) else result
        if variant is not None and variant.post is not None:
            result = variant.post(result)
        result = np.asarray(result).astype(m.output.dtype.np_dtype)
    return D.canonical_nans(result)


def emulate_case(m: M.CaseManifest, chunk: int = CHUNK, variant: Variant | None = None, run: Runner | None = None) -> Path | None:
    """Write phase one's status and, if the call succeeds, the output dump (returns the dump's path).

    With a Runner, a large case's ranges are computed by its workers.
    """
    outcome = m.phase_one()
    out = m.output
    forget_run_verdict(m.dir)  # the emulated device's results replace a device run's
    if outcome.status != 0 or not m.judged or m.judged[0].dump is None:
        atomic_write_text(m.dir / M.STATUS_FILE, f"{outcome.status}\n")
        return None
    if not m.op.family.element_local:
        emulate_rows_case(m, chunk, variant)
        atomic_write_text(m.dir / M.STATUS_FILE, f"{outcome.status}\n")
        return m.judged[0].dump
    for t in (*(i for i in m.inputs if not i.null), out):  # (a null optional input has no file)
        check_size(t.file, t.dtype.np_dtype, t.layout.storage_size, f"input {t.name}" if t.role == "input" else
                   "initial output storage")
    tmp = out.dump.with_name(f".{out.dump.name}.tmp-{os.getpid()}")
    try:
        copy_storage(out.file, tmp)  # the device writes into the initial output storage
        if not out.layout.is_contiguous:  # only then do its bytes (outside the view) reach the dump
            check_file_sha256(tmp, m.recorded_sha256(out.name), "initial output storage")
        n = out.layout.numel
        if run is not None and is_large(n) and out.layout.is_contiguous:
            sums = [run.submit(check_file_sha256, t.file, m.recorded_sha256(t.name), f"input {t.name}") for t in m.inputs
                    if not t.null]
            run.map(emulate_range, [(m, tmp, s, e, chunk, variant) for s, e in ranges(n)])
            for f in sums:
                f.result()
        else:
            emulate_range(m, tmp, 0, n, chunk, variant, checksums=True)
        try:
            os.replace(tmp, out.dump)
        except OSError as exc:
            raise WriteError(f"cannot write: {exc.strerror}", where=str(out.dump)) from None
        atomic_write_text(m.dir / M.STATUS_FILE, f"{outcome.status}\n")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out.dump


def emulate_range(m: M.CaseManifest, dump_path: Path, start: int, stop: int, chunk: int = CHUNK,
                  variant: Variant | None = None, checksums: bool = False) -> None:
    """Compute output elements [start, stop) into the dump file.

    checksums: check the inputs' recorded sha256 (hashed beside the reads) before returning.
    """
    out = m.output
    ins = {t.name: StorageFile(t.file, t.dtype.np_dtype, t.layout.storage_size, what=f"input {t.name}",
                               sha256=m.recorded_sha256(t.name) if checksums else None) for t in m.inputs
           if not t.null}
    write = variant.write if variant is not None and variant.write is not None else None
    try:
        with StorageFile(dump_path, out.dtype.np_dtype, out.layout.storage_size, writable=True) as dump:
            for s, e in chunks_between(start, stop, chunk):
                result = kernel_output(m, gather_inputs(m, ins, s, e), variant)
                if write is None:
                    dump.write(out.layout, s, e, result)
                else:
                    write(dump.map, out.layout, s, e, result)
        for f in ins.values():
            f.check_sha256()
    finally:
        for f in ins.values():
            f.close()


def emulate_all(manifests: list[M.CaseManifest], variant: Variant | None = None, jobs: int = 1,
                on_done=None) -> list[UserError]:
    """Emulate many cases; a case with bad files is reported (one UserError each) and the rest still run.

    A WriteError (a full disk) stops the run: one line, not one per case.
    """
    errors: list[UserError] = []

    def settle(m: M.CaseManifest, problem: UserError | None) -> None:
        if problem is not None:
            errors.append(problem)
        on_done and on_done(m)

    run_stage(_stage(variant), manifests, jobs, settle)
    return errors


def emulate_dirs(case_dirs: list[Path], variant: Variant | None = None, jobs: int = 1,
                 on_done=None) -> list[UserError]:
    """emulate_all for case directories, each worker loading its own batch of manifests (no serial
    read of thousands of manifests); on_done(case_id, elements). Large cases are split across the pool."""
    errors: list[UserError] = []

    def settle(case_id: str, elements: int, problem: UserError | None) -> None:
        if problem is not None:
            errors.append(problem)
        on_done and on_done(case_id, elements)

    run_stage_on_dirs(_stage(variant), case_dirs, jobs, settle)
    return errors


def _stage(variant: Variant | None) -> Stage:
    return Stage(size=case_elements, batch=emulate_batch, split=_emulate_split, broken=_broken, args=(variant,))


@paused_gc()
def emulate_batch(manifests: list[M.CaseManifest], variant: Variant | None = None) -> list[UserError | None]:
    """Several small cases in one unit of work for the pool: each case's error (or None), in order.

    A WriteError (a full disk) stops the batch: the cases after it are not attempted.
    """
    return [_emulate_safely(m, variant) for m in manifests]


def _emulate_split(run: Runner, m: M.CaseManifest, variant: Variant | None) -> UserError | None:
    return _emulate_safely(m, variant, run)


def _emulate_safely(m: M.CaseManifest, variant: Variant | None, run: Runner | None = None) -> UserError | None:
    try:
        emulate_case(m, CHUNK, variant, run)
        return None
    except WriteError:
        raise
    except (UserError, OSError) as exc:
        return as_user_error(exc, m.dir)


def _broken(case_dir: Path, error: UserError, variant: Variant | None) -> UserError:
    return error
