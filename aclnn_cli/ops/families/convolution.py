"""The Convolution family (docs/families.md): a convolution's gradients, every output element a dot product.

input (N, Cin, *S), gradOutput (N, Cout, *So), weight (Cout, Cin / groups, *Kk) with one to three spatial axes (NCL,
NCHW, NCDHW); along each axis the forward's output position o reads the input positions o s - p + j d (j < k) that
lie inside [0, n) (the padding's positions are zeros), So the forward's size (the Window family's pooled size without
ceil mode, each side's padding counted: a 2-D padding may give 4 values). gradInput has input's shape, gradWeight weight's, gradBias (Cout,). Transposed (`transposed` true), weight
is (Cin, Cout / groups, *Kk) and gradOutput (N, Cout, *So) with So = (n - 1) s - 2 p + d (k - 1) + outputPadding + 1:
the roles of input and gradOutput in the relation exchanged.

gradInput mixes every output channel of a group and gradWeight and gradBias every sample, so no part of a case is
independent of the rest: **a case is one block**. Every tensor is cut from its own shape into that one block and
arrives as (1, R, last axis); the op's `case_values` (`shape_values`) carry the full shapes, and
ops/convolution/conv_lowering.py unfolds them. Memory stays bounded there: the lowering to dot products gathers a range of
K and of output columns at a time.

Each output element is a sum of products rounded once from float32; its allowance is the op's `Reference.allowance`
(docs/allowances.md, "Convolutions").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from .base import Geometry, Rows, Shapes
from .exact import exact_fills, precision

RANK = "Rank"
WIDE_OPERANDS = "wide_operands"  # block_values: 1 where an operand is not float16 (cubeMathType 2 casts it to float16)
# Elements a tensor of one block may hold: gen's reference keeps about ten float64 arrays of each output's size (its
# value, bound, scale, allowance, the prefix bounds) beside the inputs, about 120 bytes per element of the largest
# tensor (ResNet-50's [32, 256, 56, 56] layer, 25.7M: 3.0 GB at gen's peak), so 2^25 is about 4 GB. Larger cases are
# refused when they load (cutting a case into blocks is not done yet: decision 160).
BLOCK_LIMIT = 1 << 25  # case_values: f"{tensor}{RANK}" and f"{tensor}Dim{i}" carry a tensor's shape


def shape_values(*names: str):
    """An op's `case_values`: the shapes of tensors `names` as ints (f"{name}Rank", f"{name}Dim{i}")."""
    def values(shapes) -> dict:
        out = {}
        for name in names:
            s = tuple(shapes.get(name) or ())
            out[f"{name}{RANK}"] = len(s)
            out.update({f"{name}Dim{i}": int(v) for i, v in enumerate(s)})
        return out
    return values


def shape_of(t: Mapping, name: str) -> tuple[int, ...]:
    """The full shape of tensor `name` from the case values `shape_values` gave."""
    return tuple(int(t[f"{name}Dim{i}"]) for i in range(int(t[f"{name}{RANK}"])))


def spatial_list(values, n: int, fill: int) -> tuple[int, ...] | None:
    """An aclIntArray of the spatial axes: n values (None: another length); empty or None: `fill` each."""
    v = tuple(int(x) for x in (values or ()))
    if not v:
        return (fill,) * n
    return v if len(v) == n else None


def padding_sides(values, n: int) -> tuple[tuple[int, int], ...] | None:
    """The padding before and after each spatial axis: n values (both sides alike), or in 2-D 4 values (up, down,
    left, right: convolution_backward_checker.h kPadding4UpIdx ... kPadding4RightIdx); empty: 0; None otherwise."""
    v = tuple(int(x) for x in (values or ()))
    if not v:
        return ((0, 0),) * n
    if len(v) == n:
        return tuple((p, p) for p in v)
    return ((v[0], v[1]), (v[2], v[3])) if n == 2 and len(v) == 4 else None


def conv_output_sizes(sizes, kernel, stride, sides, dilation) -> tuple[int, ...]:
    """The forward's output size per axis (the doc's formula, each side's padding counted): `sides` as
    padding_sides gives them, or one int per axis for both sides."""
    return tuple((n + _both(p) - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in zip(sizes, kernel, stride, sides, dilation))


def transposed_output_sizes(sizes, kernel, stride, sides, dilation, output_padding) -> tuple[int, ...]:
    """A transposed convolution's output size per axis: (n - 1) s - 2 p + d (k - 1) + outputPadding + 1."""
    return tuple((n - 1) * s - _both(p) + d * (k - 1) + op + 1
                 for n, k, s, p, d, op in zip(sizes, kernel, stride, sides, dilation, output_padding))


def _both(p) -> int:
    return sum(p) if isinstance(p, tuple) else 2 * int(p)


@dataclass(frozen=True)
class Convolution(Rows):
    """input (driver), gradOutput, weight and the three gradients, each cut from its own shape into one block."""

    axes: Callable[[Shapes, Mapping], tuple[int, int]] = lambda shapes, attrs: (0, 0)  # (unused: one block)
    grad: str = "gradOutput"
    weight: str = "weight"
    grad_input: str = "gradInput"
    grad_weight: str = "gradWeight"
    grad_bias: str = "gradBias"
    stride: str = "stride"
    padding: str = "padding"
    dilation: str = "dilation"
    groups: str = "groups"
    transposed: str = "transposed"
    output_padding: str = "outputPadding"
    row_sums: bool = False  # (its elements sum other terms than a row's: Rows.relief_terms)
    name: str = "convolution"
    term_roundings: int = 0  # (no across-rows output: each element's allowance is the op's Reference.allowance)

    @property
    def own(self) -> tuple[str, ...]:
        return (self.grad, self.weight, self.grad_input, self.grad_weight, self.grad_bias)

    def parameters(self, attrs: Mapping, spatial: int):
        """(stride, padding sides, dilation) per spatial axis (None where a list has another length)."""
        return (spatial_list(attrs.get(self.stride), spatial, 1), padding_sides(attrs.get(self.padding), spatial),
                spatial_list(attrs.get(self.dilation), spatial, 1))

    def relation(self, x, w, attrs: Mapping) -> tuple[tuple[int, ...], int] | None:
        """(gradOutput's shape, gradBias's length) for input x and weight w: the forward's output (transposed: the
        transposed convolution's, (N, w[1] groups, ...)); None where the attributes give none."""
        sp = len(x) - 2
        s, p, d = self.parameters(attrs, sp)
        op = spatial_list(attrs.get(self.output_padding), sp, 0)
        if sp < 1 or None in (s, p, d, op) or len(w) != len(x) or min(s + d) < 1:
            return None
        if attrs.get(self.transposed):
            if any(lo != hi for lo, hi in p):
                return None  # (a transposed convolution padded unequally: not cut yet)
            cout = w[1] * max(int(attrs.get(self.groups) or 1), 1)
            return (x[0], cout, *transposed_output_sizes(x[2:], w[2:], s, p, d, op)), cout
        return (x[0], w[0], *conv_output_sizes(x[2:], w[2:], s, p, d)), w[0]

    def default_shapes(self, shape: tuple[int, ...], attrs: Mapping, names: tuple[str, ...]) -> dict:
        """input the case's shape; weight (C, C / groups, 3, ...) unless given; the rest follow (`derived`)."""
        shape = tuple(shape)
        groups = max(int(attrs.get(self.groups) or 1), 1)
        c = shape[1] if len(shape) > 1 else 1
        weight = (c, max(c // groups, 1), *(3,) * max(len(shape) - 2, 0))
        return self.derived({n: shape for n in names} | {self.driver: shape, self.weight: weight}, attrs, ())

    def derived(self, shapes: dict, attrs: Mapping, given) -> dict:
        """gradOutput from input, weight and the attributes; gradInput input's, gradWeight weight's, gradBias
        (Cout,); each only where the case does not give it."""
        x, w = tuple(shapes[self.driver]), tuple(shapes[self.weight])
        try:
            got = self.relation(x, w, attrs)
        except (TypeError, ValueError, ZeroDivisionError):
            got = None
        if got is not None and self.grad not in given:
            shapes[self.grad] = got[0]
        cout = tuple(shapes[self.grad])[1:2] if len(shapes.get(self.grad) or ()) > 1 else w[:1]
        for name, want in ((self.grad_input, x), (self.grad_weight, w), (self.grad_bias, cout)):
            if name not in given:
                shapes[name] = want
        return shapes

    def case_shapes(self, op, shape: tuple[int, ...], attrs: Mapping, given: Mapping[str, tuple[int, ...]]) -> dict:
        """The defaults, the shapes given, then the dependent shapes not given."""
        shapes = {**self.default_shapes(shape, attrs, tuple(t.name for t in op.tensors)),
                  **{n: tuple(s) for n, s in given.items()}}
        return self.derived(shapes, attrs, given)

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """Why the shapes are not a convolution's (None: they are); the contract's rule refuses these first."""
        for name in (self.driver, self.grad, self.weight):
            if name not in shapes:
                return f"{name} is null"
        x, g, w = (tuple(shapes[n]) for n in (self.driver, self.grad, self.weight))
        if not 3 <= len(x) <= 5 or len(g) != len(x) or len(w) != len(x):
            return f"input {list(x)}, gradOutput {list(g)}, weight {list(w)}: the convolution family needs 3-d to 5-d, alike"
        big = max((math.prod(shapes[n]), n) for n in shapes)
        if big[0] > BLOCK_LIMIT:
            return (f"{big[1]} has {big[0]:,} elements: the convolution family takes a case as one block, of at most "
                    f"{BLOCK_LIMIT:,} elements per tensor (a larger case is not cut yet)")
        got = self.relation(x, w, attrs)
        if got is None:
            return (f"stride, padding, dilation, outputPadding {attrs.get(self.stride)}, {attrs.get(self.padding)}, "
                    f"{attrs.get(self.dilation)}, {attrs.get(self.output_padding)}: the convolution family takes one "
                    f"value per spatial axis (and a 2-D padding of 4 values only when transposed is false)")
        groups = int(attrs.get(self.groups) or 1)
        inner, outer = (g, x) if attrs.get(self.transposed) else (x, g)
        if groups < 1 or w[1] * groups != inner[1] or w[0] % groups or outer[1] != w[0] or g[0] != x[0]:
            return f"input {list(x)}, weight {list(w)}, gradOutput {list(g)} and groups {groups} do not relate"
        if g != got[0]:
            return f"gradOutput {list(g)} is not the forward's output size {list(got[0])}"
        for name, want in ((self.grad_input, x), (self.grad_weight, w), (self.grad_bias, (got[1],))):
            if name in shapes and tuple(shapes[name]) != want:
                return f"{name} has shape {list(shapes[name])}; the convolution family needs {list(want)}"
        return None

    def exact_fills(self, op, shapes: Shapes, values: Mapping, dtypes: Mapping) -> dict | str:
        """gradOutput's, input's and weight's fills for the three sums: gradInput's K = taps x Cout / groups products
        (transposed, the forward's Cin / groups x taps), gradWeight's N x the positions of gradOutput (transposed, of
        input) and gradBias's N x gradOutput's positions of gradOutput alone; each within the precision its result
        keeps (families/exact.precision: float16's for the cube gradients under cubeMathType 2 on wider operands)."""
        x, g, w = (tuple(shapes[n]) for n in (self.driver, self.grad, self.weight))
        groups = max(int(values.get(self.groups) or 1), 1)
        taps, per = math.prod(w[2:]), math.prod(g[2:])
        if values.get(self.transposed):
            k = {self.grad_input: g[1] // groups * taps, self.grad_weight: x[0] * math.prod(x[2:])}
        else:
            k = {self.grad_input: taps * (w[0] // groups), self.grad_weight: x[0] * per}
        sums = {n: (k[n], 2, precision(op, n, shapes, values, dtypes), dtypes[n].name) for n in k if n in shapes}
        if self.grad_bias in shapes:
            sums[self.grad_bias] = (g[0] * per, 1, precision(op, self.grad_bias, shapes, values, dtypes),
                                    dtypes[self.grad_bias].name)
        return exact_fills((self.grad, self.driver, self.weight), sums, dtypes)

    def block_values(self, m, b0: int, b1: int) -> dict:
        """Whether an operand (gradOutput, input, weight) is not float16, (k, 1, 1): what float values cannot tell the
        op, and what cubeMathType 2 (USE_FP16) acts on (the op_api casts every operand to float16)."""
        wide = any(t.dtype.name != "float16" for t in m.tensors if t.name in (self.driver, self.grad, self.weight))
        return {WIDE_OPERANDS: np.full((b1 - b0, 1, 1), int(wide), dtype=np.int64)}

    def geometry(self, shapes: Shapes, attrs: Mapping) -> Geometry:
        """One block: the whole input, rows of its last axis."""
        return _whole(tuple(shapes[self.driver]))

    def own_geometry(self, name: str, shapes: Shapes, attrs: Mapping, geo: Geometry) -> Geometry | None:
        """Every other tensor's one block: its whole self."""
        return _whole(tuple(shapes[name])) if name in self.own and name in shapes else None


def _whole(shape: tuple[int, ...]) -> Geometry:
    return Geometry(1, math.prod(shape[:-1]) if shape else 1, shape[-1] if shape else 1)


TBC_TO_NCL = (1, 2, 0)  # (T, B, C) -> (B, C, T): the op_api's Permute of self and input on the A2 and A3
WEIGHT_TO_NCL = (2, 1, 0)  # (K, Cin, Cout) -> (Cout, Cin, K), its own inverse


@dataclass(frozen=True)
class Tbc(Convolution):
    """The Tbc family, the Convolution family over aclnnConvTbcBackward's tensors: input (T, B, Cin), self (To, B, Cout) (the forward output's gradient), weight
    (K, Cin, Cout), bias (Cout,), `pad` on both sides of T, stride and dilation 1, one group. Every shape question is
    put to the plain family as the NCL convolution the op_api lowers the call to on the A2 and A3 (self and input permuted
    (1, 2, 0), weight (2, 1, 0): aclnnConvTbcBackwardGetWorkspaceSize) and its answer permuted back, so the two
    layouts cannot disagree on a size."""

    grad: str = "self"
    bias: str = "bias"
    pad: str = "pad"
    name: str = "convolution_tbc"

    @property
    def own(self) -> tuple[str, ...]:
        return (*super().own, self.bias)

    def plain(self) -> Convolution:
        """The NCL convolution's family, the same tensors' names (its methods call its own relation)."""
        return Convolution(driver=self.driver, grad=self.grad, weight=self.weight, grad_input=self.grad_input,
                           grad_weight=self.grad_weight, grad_bias=self.grad_bias)

    def ncl_attrs(self, attrs: Mapping) -> dict:
        """The NCL convolution's attributes: the op_api's newStride {1}, newPadding {pad}, newDilation {1}, groups 1."""
        return {self.stride: (1,), self.padding: (int(attrs.get(self.pad) or 0),), self.dilation: (1,),
                self.groups: 1, self.transposed: False, self.output_padding: (0,)}

    def ncl(self, shapes: Mapping) -> dict:
        """The TBC shapes as the NCL convolution's (3-d ones; the 1-d bias and gradBias as they are)."""
        perm = {n: TBC_TO_NCL for n in (self.driver, self.grad, self.grad_input)}
        perm |= {n: WEIGHT_TO_NCL for n in (self.weight, self.grad_weight)}
        return {n: tuple(tuple(s)[i] for i in perm[n]) if n in perm and len(s) == 3 else tuple(s)
                for n, s in shapes.items()}

    def relation(self, x, w, attrs: Mapping) -> tuple[tuple[int, ...], int] | None:
        """(self's shape, gradBias's length): the NCL convolution's gradOutput, (B, Cout, To), as (To, B, Cout)."""
        if len(x) != 3 or len(w) != 3:
            return None
        got = self.plain().relation(tuple(x[i] for i in TBC_TO_NCL), tuple(w[i] for i in WEIGHT_TO_NCL),
                               self.ncl_attrs(attrs))
        return None if got is None else ((got[0][2], got[0][0], got[0][1]), got[1])

    def default_shapes(self, shape: tuple[int, ...], attrs: Mapping, names: tuple[str, ...]) -> dict:
        """input the case's shape; weight (3, C, C) unless given; the rest follow (`derived`)."""
        shape = tuple(shape)
        c = shape[-1] if shape else 1
        return self.derived({n: shape for n in names} | {self.driver: shape, self.weight: (3, c, c)}, attrs, ())

    def derived(self, shapes: dict, attrs: Mapping, given) -> dict:
        """self from input, weight and pad; gradInput input's, gradWeight weight's, bias and gradBias (Cout,) =
        (weight[2],) (the checker's bias[0] == weight[2], gradBias == bias); each only where the case does not give
        it."""
        x, w = tuple(shapes[self.driver]), tuple(shapes[self.weight])
        got = self.relation(x, w, attrs)
        if got is not None and self.grad not in given:
            shapes[self.grad] = got[0]
        cout = w[-1:]
        for name, want in ((self.grad_input, x), (self.grad_weight, w), (self.bias, cout), (self.grad_bias, cout)):
            if name not in given:
                shapes[name] = want
        return shapes

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """The NCL convolution's problem, or bias and gradBias not (weight[2],)."""
        got = self.plain().shape_problem(op, self.ncl({n: s for n, s in shapes.items() if n != self.bias}),
                                    self.ncl_attrs(attrs))
        cout = tuple(shapes[self.weight])[-1:]
        for name in (self.bias, self.grad_bias):
            if got is None and name in shapes and tuple(shapes[name]) != cout:
                got = f"{name} has shape {list(shapes[name])}; weight {list(shapes[self.weight])} needs {list(cout)}"
        return got

    def exact_fills(self, op, shapes: Shapes, values: Mapping, dtypes: Mapping) -> dict | str:
        """The NCL convolution's fills of self, input and weight (bias is never read)."""
        return self.plain().exact_fills(op, self.ncl({n: s for n, s in shapes.items() if n != self.bias}),
                                   {**values, **self.ncl_attrs(values)}, dtypes)
