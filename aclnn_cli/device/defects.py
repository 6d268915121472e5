"""Broken kernels and legitimate variants, to prove what the gate catches (emulate --defect NAME).

A variant changes one step of the emulated device: the kernel formula (an op's
own named variant, see OpSpec.variants), the compute dtype, the inputs, the
final cast, or how the result is written into the output storage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..tensor import dtypes as D
from ..errors import UserError
from ..tensor.layout import Layout
from ..ops import OPS
from ..ops.registry import DECLARED_IN
from ..ops.user import load_configured
from ..tensor.storage import view_positions, write_view

TILE = 256  # elements per tile of the "last partial tile" defect


@dataclass(frozen=True)
class Variant:
    name: str
    legit: bool
    description: str
    op_kernel: bool = False  # the op's own variant kernel of this name (ops without one: unchanged)
    compute: str | None = None  # "float16-native": 16-bit fp16 inputs are not widened; "float64": wider
    swap_inputs: bool = False
    post: Callable[[np.ndarray], np.ndarray] | None = None  # on the kernel's result
    cast: Callable[[np.ndarray, D.DType, str], np.ndarray] | None = None  # float32 -> output dtype
    write: Callable[[np.ndarray, Layout, int, int, np.ndarray], None] | None = None

    def __reduce__(self):
        """Pickle by name: worker processes look the variant up in their own catalogue."""
        return (find_variant, (self.name,))


def _truncate_bf16(x32: np.ndarray, dtype: D.DType, mode: str) -> np.ndarray:
    if dtype is not D.BFLOAT16:
        return D.round_from_f32(x32, dtype, mode)
    bits = (x32.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return bits.view(D.BFLOAT16.np_dtype)


def _flush(x32: np.ndarray, dtype: D.DType, mode: str) -> np.ndarray:
    out = D.round_from_f32(x32, dtype, mode)
    wide = out.astype(np.float32)
    return np.where(np.abs(wide) < dtype.smallest_normal, np.copysign(np.float32(0), wide), wide).astype(dtype.np_dtype)


def _packed(storage: np.ndarray, layout: Layout, start: int, stop: int, values: np.ndarray) -> None:
    storage[start:stop] = values  # ignores strides and offset


def _past_view(storage: np.ndarray, layout: Layout, start: int, stop: int, values: np.ndarray) -> None:
    write_view(storage, layout, start, stop, values)
    if stop == layout.numel:
        last = int(np.asarray(view_positions(layout, stop - 1, stop)).reshape(-1)[0]) if not layout.is_contiguous else stop - 1
        if last + 1 < storage.size:
            storage[last + 1] = values[-1]


def _skip_last_tile(storage: np.ndarray, layout: Layout, start: int, stop: int, values: np.ndarray) -> None:
    end = min(stop, layout.numel - layout.numel % TILE) if layout.numel % TILE else stop
    if end > start:
        write_view(storage, layout, start, end, values[:end - start])


CATALOGUE: dict[str, Variant] = {v.name: v for v in (
    Variant("bf16-truncate", False, "bfloat16 outputs cast by truncation instead of rounding", cast=_truncate_bf16),
    Variant("fp16-no-upcast", False, "float16 computed natively, without the float32 upcast", compute="float16-native"),
    Variant("exp-overflow", False, "sigmoid as e^z/(1+e^z): NaN once e^z overflows", op_kernel=True),
    Variant("sign-slip", False, "one term's sign flipped", op_kernel=True),
    Variant("half-constant", False, "FastGelu with 1.702/2 instead of 1.702", op_kernel=True),
    Variant("inclusive-bounds", False, "hardsigmoid window inclusive at -3 and 3", op_kernel=True),
    Variant("reads-buffer", False, "LogSigmoid reads the forward buffer it must ignore", op_kernel=True),
    Variant("expanded-formula", False, "1 + z(1-s) expanded to 1 + z - z s (cancels for large |z|)", op_kernel=True),
    Variant("nan-to-zero", False, "NaN results replaced by 0", post=lambda r: np.where(np.isnan(r), 0.0, r).astype(r.dtype)),
    Variant("swapped-inputs", False, "gradOutput and self swapped", swap_inputs=True),
    Variant("ignore-output-strides", False, "output written packed from storage index 0", write=_packed),
    Variant("write-past-view", False, "one element written past the end of the output view", write=_past_view),
    Variant("partial-tile-unwritten", False, f"the last partial tile of {TILE} elements never written",
            write=_skip_last_tile),
    Variant("round-half-away", True, "output cast rounds half away from zero instead of half to even",
            cast=lambda x, d, mode: D.round_from_f32(x, d, "round")),
    Variant("flush-subnormals", True, "subnormal results flushed to zero", cast=_flush),
    Variant("stable-formula", True, "a different, numerically stable formula", op_kernel=True),
    Variant("fp64-compute", True, "computed in float64, rounded to float32, then to the output dtype",
            compute="float64"),
)}


STATIC_NAMES = frozenset(CATALOGUE)  # the catalogue's own entries; the rest come from the ops' declarations


def variant_kind(name: str, fn) -> bool | None:
    """Whether an op's variant is legitimate (True) or a defect (False), as declared (`@defect`,
    `@legitimate`: ops/base.py); None when undeclared and the catalogue has no entry of that name."""
    if name in STATIC_NAMES:
        return CATALOGUE[name].legit
    return _declared_kind(fn)


_ADDED: dict[str, object] = {}  # op name -> the OpSpec whose variants are in CATALOGUE


def catalogue() -> dict[str, Variant]:
    """CATALOGUE with the own variants of every op registered so far (user ops too), so that adding an op
    touches only its module. The ops do not push their variants here: the registry sits below the device.
    A variant without its kind is one line (UserError), as the CLI checks it when user ops load."""
    load_configured()
    new = [op for name, op in OPS.items() if _ADDED.get(name) is not op]
    try:
        add_op_variants(new)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    _ADDED.update((op.name, op) for op in new)
    return CATALOGUE


def add_op_variants(ops) -> None:
    """Add these ops' own variants to the catalogue.

    A variant the catalogue does not define needs its kind declared (`@defect` or `@legitimate`): without
    it, `emulate --defect` could not say which it is.
    """
    for op in ops:
        module = f"{DECLARED_IN[op.name]}: " if op.name in DECLARED_IN else ""  # (the file to change)
        for name, fn in op.variants.items():
            kind = variant_kind(name, fn)
            if kind is None:
                raise ValueError(f"{module}{op.name}: variant '{name}' needs its kind declared: decorate it with "
                                 f"@defect or @legitimate (from aclnn_cli.ops)")
            said = _declared_kind(fn)
            if name in CATALOGUE and said is not None and said != CATALOGUE[name].legit:
                raise ValueError(f"{module}{op.name}: variant '{name}' is {_KIND[said]} here but {_KIND[not said]} in the "
                                 f"catalogue ({CATALOGUE[name].description}): give it another name")
            if name in CATALOGUE:
                continue
            summary = (fn.__doc__ or "").strip().split("\n")[0]
            description = summary.split(":", 1)[1].strip() if ":" in summary else summary
            CATALOGUE[name] = Variant(name, kind, f"{description} ({op.name})", op_kernel=True)


_KIND = {True: "Legitimate", False: "a Defect"}


def _declared_kind(fn) -> bool | None:
    kind = getattr(fn, "variant_kind", None)
    return True if kind == "legitimate" else False if kind == "defect" else None


def ops_with_kernel(variant: Variant, ops) -> list[str]:
    """The ops (API names) that define this op-kernel variant; cases of other ops run the correct kernel."""
    return sorted(op.name for op in ops if variant.name in op.variants)



def find_variant(name: str) -> Variant:
    if name not in catalogue():
        import difflib  # (only a wrong name pays for it)

        near = difflib.get_close_matches(str(name), list(CATALOGUE), n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(repr(n) for n in near)}? " if near else ""
        raise KeyError(f"unknown defect '{name}' ({hint}'aclnn-cli defects' lists all {len(CATALOGUE)})")
    return CATALOGUE[name]


try:  # the variants of the ops registered so far (every bundled op): CATALOGUE as complete as before
    add_op_variants(list(OPS.values()))
    _ADDED.update(OPS)
except ValueError:  # (a user op's variant without its kind: catalogue() says so, in one line)
    pass
