"""What verify says about single elements and the storage around a view: the worst elements described
for a person (coordinates, inputs, expected, actual, errors) and writes outside the output view."""

from __future__ import annotations

import contextlib

import numpy as np

from ..casedir import manifest as M
from .compare import element_errors
from .judgeddtype import tolerance_dtype
from .judging import complex_gamma
from ..standards.rules import Standard
from ..tensor.storage import StorageFile, check_file_sha256, check_size, in_view_mask
from ..tensor.wholefiles import LoadedFile


def writes_outside_view(m: M.CaseManifest, out: M.TensorEntry | None = None) -> str | None:
    """Storage elements outside the output view that the device changed (compared bit for bit)."""
    out = out or m.output
    if out.layout.is_contiguous:
        return None
    check_size(out.file, out.dtype.np_dtype, out.layout.storage_size, "initial output storage")
    check_file_sha256(out.file, m.recorded_sha256(out.name, "sha256"), "initial output storage")
    size = out.layout.storage_size
    dump = LoadedFile(out.dump_path, out.dtype.uint_dtype, size, what="dump").map
    initial = LoadedFile(out.file_path, out.dtype.uint_dtype, size, what="initial output storage").map
    changed = np.flatnonzero(~in_view_mask(out.layout) & (dump != initial))
    if not changed.size:
        return None
    return f"wrote outside the view: {changed.size} elements, first at storage index {changed[0]}"


def describe_elements(m: M.CaseManifest, std: Standard, items: list[tuple[int, float | None]],
                      out: M.TensorEntry | None = None) -> list[dict]:
    """Coordinates, inputs, expected and actual value, and errors of logical elements, in the order of `items`
    ((flat index, judged_rel) each).

    judged_rel: the relative error the verdict used for it (after the op's relief and with the
    case's floor); the element then reports that, so what a person reads is what was judged.
    Each file (inputs, dump, golden) is opened once for all the elements: a failing case describes several, and
    opening every file again per element was most of what describing cost. Each element is still read and its
    errors computed alone, as it was: the same values, bit for bit.
    """
    out = out or m.output
    if not items:
        return []
    rows = not m.op.family.element_local  # (its element depends on whole rows: no inputs per element)
    emulator = std.against == "emulator"
    size = out.layout.storage_size
    with contextlib.ExitStack() as stack:
        opened = {t.name: stack.enter_context(StorageFile(t.file, t.dtype.np_dtype, t.layout.storage_size))
                  for t in (() if rows else (i for i in m.inputs if not i.null))}
        dump = stack.enter_context(StorageFile(out.dump, out.dtype.np_dtype, size))
        golden = None if emulator else stack.enter_context(StorageFile(out.golden, out.dtype.np_dtype, size))
        return [_describe(m, out, flat, rel, opened, dump, golden, rows) for flat, rel in items]


def _describe(m: M.CaseManifest, out: M.TensorEntry, flat: int, judged_rel: float | None, opened: dict,
              dump: StorageFile, golden: StorageFile | None, rows: bool) -> dict:
    """One element from the open files (golden None: the standard judges against the emulated kernel)."""
    shape = out.layout.shape
    with np.errstate(all="ignore"):
        ins = {t.name: f.gather(t.layout, shape, flat, flat + 1)
               for t in m.inputs if (f := opened.get(t.name)) is not None and not t.null}
        a = dump.read(out.layout, flat, flat + 1)
        if golden is None and rows:
            from ..device.emulate_rows import emulated_range

            g = emulated_range(m, out, None, flat, flat + 1)
        elif golden is None:
            from ..device.emulate import kernel_output

            g = kernel_output(m, ins)
        else:
            g = golden.read(out.layout, flat, flat + 1)
        e = element_errors(a, g, tolerance_dtype(m, out)[1], out.dtype,
                           complex_gamma=complex_gamma(m, out) if out.dtype.is_complex else None)
    with np.errstate(invalid="ignore"):  # (a NaN of a 16-bit dtype widened: NumPy warns, the value is NaN)
        expected, actual = _value(g), _value(a)
        inputs = {k: _value(v) for k, v in ins.items()}
    element = {"index": flat, "coords": list(out.layout.coords(flat)), "inputs": inputs,
               "expected": expected, "actual": actual,
               "abs_error": float(e.abs[0]), "rel_error": float(e.rel[0]) if judged_rel is None else judged_rel,
               "ulp_error": float(e.ulp[0])}
    if e.special.size:  # errors of non-finite values are not numbers: say what disagreed
        element["mismatch"] = f"expected {_name(expected)}, got {_name(actual)}"
    return element


def _value(v: np.ndarray) -> float | int | list:
    """An element as the report holds it: an integer dtype's as an int (2^53 + 1 read as a float would print as
    2^53, and an off-by-one element would read as equal to its golden), a complex one as [real, imag], any other as
    a float."""
    if v.dtype.kind == "c":
        z = complex(v.reshape(-1)[0])
        return [z.real, z.imag]
    return int(v[0]) if v.dtype.kind in "iu" else float(v.astype(np.float64)[0])


def _name(x) -> str:
    if isinstance(x, list):  # (a complex element: NaN if either part is)
        return "NaN" if any(np.isnan(x)) else format(complex(*x), ".8g")
    return "NaN" if np.isnan(x) else f"{x:.8g}"
