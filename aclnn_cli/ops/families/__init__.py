"""Operator families: what the pipeline must know about an op beyond its functions.

Like OpInfo's UnaryUfuncInfo / ReductionOpInfo, or benchdnn's one driver per family. The family decides how gen,
emulate and verify cut a case into pieces the op's functions can take whole, how its tensors' shapes relate, and
how its errors grow; the pipeline asks it and never tests its name (docs/families.md).

- `Elementwise` (the default) and `Rows` (base.py): flat pieces; whole rows along reduced axes.
- `Channels` (channels.py): an (N, C, ...) driver reduced over N and the spatial axes (BatchNorm).
- `Split` (split.py): an input split in halves along `dim`; the half-size tensors cut from their own shape (GLUs).
- `Segments` (segments.py): runs along one axis each summed into one output position (RepeatInterleaveGrad).
- `Classes` (classes.py): an (N, C, *spatial) driver's class rows beside per-position labels (NLLLoss2dBackward).
- `Scatter` (scatter.py): rows added into the output rows an index names (EmbeddingDenseBackward).
- `Groups` (groups.py): groups of channels over every sample (GroupNorm).
- `Contraction` (contraction.py): out[b] = left[b] @ right[b], each operand cut from its own shape (BatchMatMul).
- `Window` and `Adaptive` (window.py): pooling's windows per (n, c) plane, by attributes or by the two shapes.
- `Convolution` (convolution.py): a convolution's gradients, a case one block (ConvolutionBackward).

Op declarations import the family they use from here (`from aclnn_cli.ops.families import Rows`).
"""

from importlib import import_module

from .base import ELEMENTWISE, Elementwise, Geometry, Rows, Shapes, broadcast_shape, dim_axis, trailing_axes

# The drivers beyond Elementwise and Rows are imported when first named (PEP 562): a command whose cases are
# elementwise does not pay for the window, contraction and convolution modules at its start.
_LAZY = {"Channels": "channels", "Classes": "classes", "Contraction": "contraction", "Convolution": "convolution", "Groups": "groups",
         "Scatter": "scatter", "Segments": "segments", "Split": "split", "Window": "window", "Adaptive": "window"}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ELEMENTWISE", "Adaptive", "Channels", "Classes", "Contraction", "Convolution", "Elementwise", "Geometry", "Groups", "Rows",
           "Scatter", "Segments", "Shapes", "Split", "Window",
           "broadcast_shape", "dim_axis", "trailing_axes"]
