"""What an operator declares. The generator, emulator and checker all read this one object.

Adding an operator means writing one module in this package that builds an
`OpSpec` and calls `register` (see docs/adding-an-op.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np

from ..files.lazy import cached_attribute
from .families.base import ELEMENTWISE, Elementwise, Rows
from .mathfns import exp

if TYPE_CHECKING:  # (the exact values' types: the ops that compute them import fractions and decimal themselves)
    from decimal import Decimal
    from fractions import Fraction

Arrays = Mapping[str, np.ndarray]

# Error bounds of float64 evaluations are expressed in units of this.
F64_UNIT = 2.0**-53
# Outputs this far below the incoming gradient are beyond what a kernel with
# float32 intermediates can resolve: exp overflows at |x| ~ 88.7, i.e. e^-88.7 ~ 2^-128.
GRAD_RELATIVE_FLOOR = 2.0**-100


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of an op's signature: how a case fills, shapes and lays it out unless the case says otherwise."""

    name: str
    role: str  # "input" or "output"
    default_fill: Mapping  # a generator spec as written in YAML
    read_by_kernel: bool = True  # False for tensors the op takes but never reads (LogSigmoid's buffer)
    optional: bool = False  # the API accepts nullptr here (weightOptional; an output switched off by outputMask)
    # This tensor's own dtypes, not tied to the others' (fp32 rstd beside fp16 x; int64/int32 class
    # indices). None: one of the op's float dtypes on the product, related to the others as `contract` says.
    dtypes: tuple[str, ...] | None = None
    # The aclFormat the harness gives this tensor, by its number of dimensions (ACL_FORMATS' names); ND elsewhere.
    # BatchNorm's op_api refuses a 5-d ND input and reads the channel of an ND inference input along the last axis.
    formats: Mapping[int, str] = field(default_factory=dict)
    # The default fill where the tensor's dtype is an integer one (an op taking float and integer dtypes alike:
    # ThresholdBackward). None: default_fill for every dtype. A float default (uniform) draws non-integers, and a
    # case file's defaults may list float and integer dtypes together, so the choice is made per case's dtype.
    integer_fill: Mapping | None = None


# aclFormat values (acl/acl_base_rt.h) of the formats a declaration may name.
ACL_FORMATS = {"NCHW": 0, "NHWC": 1, "ND": 2, "NDHWC": 27, "NCDHW": 30, "NC": 35, "NCL": 47}
FLOATS = ("float32", "float16", "bfloat16")
COMPLEXES = ("complex64", "complex128")  # (an op declaring them needs complex_formula)
# The products a case file may name (device/run.py maps the SoC names the runtime reports onto them).
PRODUCTS = ("950", "A3", "A2", "910", "310P")

# ATTRIBUTE_KINDS (values/attrvalues.py): register accepts these only, and gen and verify read each (one reader per kind).


@dataclass(frozen=True)
class AttrSpec:
    """A non-tensor argument of the API, in the API's order after the inputs (before the outputs).

    kind: "scalar" (an aclScalar* of `scalar_dtype`), "bool", "string" (a char* from `choices`),
    "int_list" (an aclIntArray*), "int" (an int64_t), "bool_list" (an aclBoolArray*), "double" (a C
    double: BatchNormBackward's eps) or "float" (a C float). The op's functions receive the value in
    the same mapping as the tensors, under `name`: a scalar as the Python float the aclScalar holds
    (the case's value rounded to `scalar_dtype`, which is what the device sees), a bool, a str, an
    int, a tuple of ints or bools, a double as given, a float rounded to float32 (both Python floats).
    optional: the API accepts nullptr (the case writes `null`), and the op then uses `default`.
    default: the value when a case gives none (None: every case must give one).
    """

    name: str
    kind: str
    default: object = None
    optional: bool = False
    choices: tuple = ()
    scalar_dtype: str = "float32"


def defect(fn: Callable) -> Callable:
    """Declare a variant a defect: a broken kernel the gate must fail (emulate --defect, the defect matrix).
    Declared, not read from a docstring: `python -OO` strips docstrings."""
    fn.variant_kind = "defect"
    return fn


def legitimate(fn: Callable) -> Callable:
    """Declare a variant legitimate: another correct kernel (an order, a formula) the gate must pass."""
    fn.variant_kind = "legitimate"
    return fn


def narrow_blocks(fn: Callable) -> Callable:
    """Declare a golden_reference or exact_at that takes gen's blocks with their float values as stored (float16,
    bfloat16, float32: each exact in float64) and widens what it reads itself: a case-sized block's float64 copies
    are what it spares (ConvolutionBackward's one block, a ResNet-50 layer: 400 MB). Where an input is not finite
    the golden_reference's blocks go the widened way (golden/rows.reference_blocks). Such a golden_reference may
    return a Mapping that computes each output when it is read: gen reads each once (golden/rowsgen), so one
    output's float64 value and bound are alive at a time; a Mapping with `tiles(name)` -> (the block's shape, an
    iterable of (flat positions in the block, Reference of value and bound there)) is settled tile by tile
    (rowsgen._settled_tiles: one tile's float64 arrays alive, ConvolutionBackward's). A reference_at so marked takes verify's relief blocks as
    stored too (judge/rowrelief: finite blocks only), widening only the terms of the elements it is asked for."""
    fn.narrow_blocks = True
    return fn


def products(*names: str, dtypes: tuple[str, ...] = FLOATS,
             overrides: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, tuple[str, ...]]:
    """Product -> dtypes table: every listed product supports `dtypes`, except as `overrides` says."""
    return {name: tuple((overrides or {}).get(name, dtypes)) for name in names}


def grad_signature(output: str, self_range: tuple[float, float] = (-8.0, 8.0),
                   extra_inputs: tuple["TensorSpec", ...] = ()) -> tuple["TensorSpec", ...]:
    """(gradOutput, self, *extra_inputs, output): the signature of activation backward ops."""
    return (
        TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
        TensorSpec("self", "input", {"uniform": list(self_range)}),
        *extra_inputs,
        TensorSpec(output, "output", {"constant": 0}),
    )


@dataclass(frozen=True)
class Reference:
    """A float64 evaluation of the exact result.

    value: the float64 result; bound: a safe bound on |value - exact|, so the
    rounding into the output dtype can be certified; scale: the magnitude of
    the terms the result is made of (>= |exact|), i.e. what rounding error in
    a float32 kernel is proportional to. Where terms cancel, scale >> |exact|.
    """

    value: np.ndarray
    bound: np.ndarray
    scale: np.ndarray
    # A sum over a row or channel (BatchNorm's gradBias): how far a correct float32 kernel's sum may stand from
    # the exact one (ops/accumulation.py, sum_allowance). Given, verify judges the element against
    # max(|golden|, allowance / T) instead of the term scale, which at many terms swallows the result.
    allowance: np.ndarray | None = None
    # The part of an element's error a correct kernel shares with other elements: its row's sums' allowance carried
    # to the element (BatchNorm's gradInput through sum(dy) / M). A shared error leans every element of the row
    # one way, so the error balance does not count it (judge/comparison.py); each element's error still does.
    shared: np.ndarray | None = None
    # The signed part of a correct kernel's error its source fixes, in the output's units, positive where it moves
    # |result| away from zero: its float32 literals' roundings (SELU's alpha * scale), the same for every element of
    # a branch. The error balance counts each element's lean less it (an element-local op's, judge/comparison.py);
    # the element's own error is judged as ever.
    lean: np.ndarray | None = None
    # A golden_reference's better bound, made only when asked (a second product: dots.certified): gen asks where
    # `bound`, cheap and looser, leaves many elements uncertain (golden/rowsgen._settled).
    tighter: Callable[[], np.ndarray] | None = None


@dataclass(frozen=True)
class Contract:
    """Which relations between tensors phase one accepts, beyond dtype-per-product and dims.

    dtypes: "same" (all identical) or "promote" (inputs promoted; the output may be any float).
    broadcast_on: products where inputs may broadcast (the output takes the broadcast shape).
    mixed_fp32_on: products where gradOutput and self may differ if the output is float32.
    """

    dtypes: str = "same"
    broadcast_on: tuple[str, ...] = ()
    mixed_fp32_on: tuple[str, ...] = ()
    # dtypes phase one also accepts (e.g. float64 computed in float32) that cases are never generated in:
    # no "unsupported dtype" rejection is made of them.
    also_accepts: tuple[str, ...] = ()
    out_is_promoted: bool = False  # "promote": the output's dtype must be the promoted input dtype
    checks_dims: bool = True  # False: phase one has no dims check (the source's, whatever the doc says)
    # False: phase one ties neither the output's dtype nor its shape to the inputs' (HardtanhBackward's op_api checks
    # only that the output's dtype is in the list; its kernel's tiling refuses another at launch, in phase two).
    out_checked: bool = True
    # Rejections that depend on attribute values: attrs -> the rule broken (161002), or None.
    attribute_rule: Callable[[Mapping], str | None] | None = None
    # Rejections that depend on the shapes together (gamma = trailing dims of x, mean numel = rows):
    # (name -> TensorDesc of every tensor, attrs with defaults applied) -> the rule broken (161002), or None.
    shape_rule: Callable[[Mapping, Mapping], str | None] | None = None
    # Rejections by dtype beyond the product's list (SoftplusBackward: an integer self, but float gradients):
    # name -> TensorDesc of every tensor -> the rule broken (161002), or None.
    dtype_rule: Callable[[Mapping], str | None] | None = None
    # Rejections of a listed dtype that depend on an attribute's value, checked with the product's list
    # (ThresholdBackward's INT64 on the 950, taken at threshold 0 only): (name -> TensorDesc, attrs with defaults)
    # -> the rule broken (161002), or None.
    dtype_attribute_rule: Callable[[Mapping, Mapping], str | None] | None = None
    # Null pointers phase one refuses for these attributes (an output its mask switches on, null: 161001), checked
    # after the required tensors' nulls: (name -> TensorDesc of every tensor, attrs with defaults) -> the rule, or None.
    null_rule: Callable[[Mapping, Mapping], str | None] | None = None


FIND: list[Callable[[str], "OpSpec"]] = []  # the registry's lookup by name (ops/registry.py, which imports this module)


def _by_name(name: str) -> "OpSpec":
    """An unpickled op: the registry's (importing this module imports the ops package, which loads the registry)."""
    return FIND[0](name)


@dataclass(frozen=True)
class OpSpec:
    """One operator's declaration: its signature, contract, reference and kernels, read by every stage."""

    name: str  # the aclnn API name, e.g. "aclnnSiluBackward"
    key: str  # short snake_case name used in case ids, e.g. "silu_backward"
    summary: str
    formula: str
    tensors: tuple[TensorSpec, ...]
    products: Mapping[str, tuple[str, ...]]  # product -> dtypes supported there
    dims: tuple[int, int]
    empty_ok: bool
    reference: Callable[[Arrays], Reference]  # finite inputs, float64, numerically stable
    # One element, to >= 150 bits. None (a user op that gives only `reference`): goldens are the
    # float64 value rounded once, not certified (the manifest says so).
    exact: Callable[[Mapping[str, Fraction]], Fraction | Decimal] | None = None
    # A Rows op's exact values of a few elements of whole blocks, where `exact` on a long block costs a Fraction
    # per element: (t as `reference` receives it, float64 widened exactly; {output: flat positions in the
    # blocks}) -> {output: object array of Fraction/Decimal, one per position}. gen uses it, when given, for
    # the elements the float64 bound leaves open (BatchNorm's channels of 200,000 elements).
    exact_at: Callable[[Arrays, Mapping[str, np.ndarray]], Mapping[str, np.ndarray]] | None = None
    # The reference of a few elements of whole blocks, where a block is a whole contraction (every output element a
    # dot product of its own): (t as `reference` receives it; {output: flat positions in the blocks}) -> {output:
    # Reference of 1-d arrays, one value per position}. verify's relief uses it, when given, for the few elements a
    # correct kernel's rounding flags, instead of `reference` on the blocks (the whole tensor).
    reference_at: Callable[[Arrays, Mapping[str, np.ndarray]], Mapping[str, Reference]] | None = None
    # `edge` at those elements, for an op with an `edge` (same arguments; {output: (where, device value), 1-d}): without
    # it, relief of an op with an edge evaluates `edge` on the whole blocks, and reference_at goes unused.
    edge_at: Callable[[Arrays, Mapping[str, np.ndarray]], Mapping[str, tuple]] | None = None
    # Up to which share of the blocks' elements relief takes reference_at: a contraction's elements each walk their
    # dot product, and beyond 1/16 the blocks' BLAS is faster; an element that costs what the blocks' reference costs
    # per element (a channel's: BatchNormElemtBackward) takes 1, reference_at whatever is flagged.
    reference_at_share: float = 1 / 16
    # What gen certifies a golden's rounding with, where `reference` also computes what only verify needs: as
    # `reference`, with value and bound (and a scale) but no allowance. A contraction's reference walks K in chunks
    # for its allowance's prefix bounds; gen needs only the value and the bound, two matmuls. Not used for outputs
    # summed across rows (their allowance file is gen's).
    golden_reference: Callable[[Arrays], Reference] | None = None
    # How the device computes, in the inputs' float type (float32). None: emulate plays the
    # float64 reference rounded to float32 (an ideal device).
    kernel: Callable[[Arrays], np.ndarray] | None = None
    special_values: str = ""  # documented semantics at inf/nan
    # The op's computation on complex inputs, as its AI CPU kernel writes it: formula(t), t the inputs and the
    # attributes, using +, -, * and .conj() only. Called with NumPy complex arrays in T (the emulated kernel: complex64
    # arithmetic for complex64) and with golden/complexes.Dyadic values (the exact golden). Needed by an op whose
    # products list complex64 or complex128; their outputs are judged by the `complex` standard.
    complex_formula: Callable[[Mapping[str, object]], object] | None = None
    # The formula in IEEE float64 where an input is inf/NaN (default: the kernel in float64).
    ieee: Callable[[Arrays], np.ndarray] | None = None
    cast_mode: Mapping[str, str] = field(default_factory=dict)  # output dtype -> "rint" | "round"
    # Outputs the device rounds through a dtype narrower than their own where the attributes say so (cubeMathType 2:
    # the cube's results leave as float16): (attribute values, {tensor: dtype}, {tensor: shape}) -> {output: that
    # dtype}. Its thresholds judge the output (judge/judgeddtype.py), as a promoting op's compute dtype does.
    rounded_through: Callable[[Mapping, Mapping, Mapping], Mapping[str, object]] | None = None
    # Where a float32 kernel legitimately differs from the exact result (a discontinuity it
    # places one float32 step away, an intermediate that overflows float32): (where, device value).
    edge: Callable[[Arrays], tuple[np.ndarray, np.ndarray]] | None = None
    contract: Contract = Contract()
    # Named alternative kernels (same calling convention as `kernel`): realistic defects and
    # legitimate variants of this op, used by `emulate --defect` (see defects.py).
    variants: Mapping[str, Callable[[Arrays], np.ndarray]] = field(default_factory=dict)
    # The public header declaring the API, as the device harness includes it (default aclnnop/aclnn_<key>.h).
    header: str = ""
    attributes: tuple[AttrSpec, ...] = ()  # scalars, bools, strings: see AttrSpec
    # The doc's formula for the tests' exhaustive oracle (tests/test_golden_exhaustive.py); the tool never
    # calls it. textbook(x, attrs, mp): the factor the gradient is multiplied by at x (an mpf value of
    # the second input), with mp the mpmath module (a test dependency, passed in, never imported here).
    textbook: Callable[[object, Mapping, object], object] | None = None
    oracle_attributes: tuple[Mapping, ...] = ({},)  # attribute sets the oracle covers, as the device receives them
    # How the pipeline cuts a case (ops/families/): Elementwise (flat pieces), Rows (whole rows along the
    # reduced axes). With several outputs, reference/kernel/variants return {output name: result}.
    family: Elementwise | Rows = ELEMENTWISE
    # Values the functions receive beside the attributes, from the case's shapes (MSE's numel(self)):
    # {tensor name: view shape} -> {name: int}.
    case_values: Callable[[Mapping[str, tuple[int, ...]]], Mapping[str, int]] | None = None
    # Values the functions receive beside the attributes, from the case's dtypes (LayerNormGrad's epsilon, which
    # the tiling picks by x's dtype): {tensor name: dtype name} -> {name: value}.
    case_dtypes: Callable[[Mapping[str, str]], Mapping[str, object]] | None = None
    # The API's arguments before workspaceSize, in the header's order (tensor and attribute names).
    # Empty: the inputs, then the attributes, then the outputs.
    signature: tuple[str, ...] = ()
    # The graph (GE) ops this API computes, as TTK kernel mode and msOpST name them: graph op name -> GraphOp
    # (ops/graphops.py; its `api` is this op's name). register adds them to the importers' one table, GRAPH_OPS.
    graph_ops: Mapping[str, object] = field(default_factory=dict)
    # Foreign spellings of this op's tensors and attributes (ATK's `x` for self): foreign name -> ours.
    aliases: Mapping[str, str] = field(default_factory=dict)
    # Inputs the op computes from its other inputs, where a case gives them no values (their default_fill is
    # {derived: true}): input name -> function(t) of the family's blocks of the other inputs and the attributes,
    # returning that input's blocks (its own geometry's shape), integers or floats of its dtype. MaxPool's indices:
    # the forward's argmax of self. gen writes them after the inputs they are made from (golden/derived.py); a case
    # may still give explicit values (a fill), and a negative case writes zeros. Not for an Elementwise op.
    derived: Mapping[str, Callable[[Arrays], np.ndarray]] = field(default_factory=dict)
    # Inputs whose values ops-nn's ATK executor draws itself from the op's domain, whatever the file's range_values
    # (EmbeddingDenseBackward's indices: `np.random.randint(0, numWeights)` in its init_by_input_data): the ATK
    # importer keeps the file's dtype and shape and takes the op's default fill for them.
    redrawn: tuple[str, ...] = ()

    def __reduce__(self):
        """Pickle by name: worker processes look the op up in their own registry."""
        return (_by_name, (self.name,))

    @property
    def api_params(self) -> tuple[tuple[str, str], ...]:
        """(name, kind) of the API's arguments before workspaceSize: the inputs, the attributes, the outputs.

        kind is "tensor" or the attribute's kind. The harness passes them in this order.
        """
        default = (*((t.name, "tensor") for t in self.inputs), *((a.name, a.kind) for a in self.attributes),
                   *((t.name, "tensor") for t in self.tensors if t.role == "output"))
        if not self.signature:
            return default
        kinds = dict(default)
        return tuple((name, kinds[name]) for name in self.signature)

    def _reference_value(self, t: Arrays) -> np.ndarray:
        return self.reference(t).value

    @property
    def certified(self) -> bool:
        """Goldens are certified correctly rounded (the op has an exact path), not only rounded once."""
        return self.exact is not None

    def attribute_values(self, values: Mapping) -> dict:
        """The attributes and case values among the values an op function receives (the rest are tensors)."""
        return {k: v for k, v in values.items() if k not in {t.name for t in self.tensors}}

    @property
    def api_header(self) -> str:
        return self.header or f"aclnnop/aclnn_{self.key}.h"

    @cached_attribute  # (asked per case: thousands of small cases share one op)
    def gradient(self) -> str:
        """The incoming gradient's name: the first input, whatever the header calls it (gradOutput, dy, gradOut)."""
        return self.inputs[0].name

    @cached_attribute
    def inputs(self) -> tuple[TensorSpec, ...]:
        return tuple(t for t in self.tensors if t.role == "input")

    @cached_attribute
    def outputs(self) -> tuple[TensorSpec, ...]:
        return tuple(t for t in self.tensors if t.role == "output")

    @cached_attribute
    def read_inputs(self) -> tuple[str, ...]:
        """The names of the inputs the kernel reads (not those only their shape or dtype matters for)."""
        return tuple(t.name for t in self.inputs if t.read_by_kernel)

    @property
    def output(self) -> TensorSpec:
        """The first output (the only one of most ops)."""
        return next(t for t in self.tensors if t.role == "output")

    def by_output(self, result) -> dict:
        """A function's result as {output name: result} (ops with one output may return it bare)."""
        if isinstance(result, Mapping):
            return dict(result)
        return {self.output.name: result}

    @property
    def dtypes(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for dts in self.products.values():
            seen.update(dict.fromkeys(dts))
        return tuple(seen)

    def device_edges(self, inputs: Arrays) -> tuple[np.ndarray, np.ndarray]:
        """Where a correct float32 kernel may differ from the golden, and its value there.

        The op's own `edge`, plus one rule every op of the form dy * f(x) shares: with an
        infinite gradient and |f(x)| below GRAD_RELATIVE_FLOOR (2^-100, under float32's reach),
        the kernel's f(x) may underflow to 0 and inf * 0 gives NaN, while the exact limit
        (the golden) is an infinity.
        """
        shape = np.shape(next(iter(inputs.values())))
        where, device = np.zeros(shape, dtype=bool), np.full(shape, np.nan)
        if self.edge is not None:
            where, device = (np.array(a) for a in self.edge(inputs))
            where, device = where.astype(bool), device.astype(np.float64)
        grad = self.gradient
        dy = inputs.get(grad)
        if dy is not None:
            inf_grad = np.isinf(dy) & ~where
            for t in self.inputs:
                if t.read_by_kernel and t.name != grad and t.name in inputs:  # (a null optional input is absent)
                    inf_grad &= np.isfinite(inputs[t.name])
            if inf_grad.any():
                attrs = self.attribute_values(inputs)
                unit = {**{k: v[inf_grad] for k, v in inputs.items() if k not in attrs}, **attrs}
                unit[grad] = np.ones(int(inf_grad.sum()))
                with np.errstate(all="ignore"):
                    factor = self.golden_f64(unit).value
                tiny = np.zeros(shape, dtype=bool)
                tiny[inf_grad] = (factor != 0) & (np.abs(factor) < GRAD_RELATIVE_FLOOR)  # exact zeros stay zero
                where |= tiny
                device[tiny] = np.nan
        return where, device

    def golden_f64(self, inputs: Arrays) -> Reference:
        """The reference on any inputs: stable math where all are finite, IEEE formula elsewhere."""
        finite = np.ones(np.shape(next(iter(inputs.values()))), dtype=bool)
        for t in self.inputs:
            if t.read_by_kernel and t.name in inputs:  # (a null optional input is absent)
                finite &= np.isfinite(inputs[t.name])
        if finite.all():
            return self.reference(inputs)
        attrs = self.attribute_values(inputs)
        ok = {k: np.where(finite, v, 0.0) for k, v in inputs.items() if k not in attrs}
        ref = self.reference({**ok, **attrs})
        with np.errstate(all="ignore"):
            special = (self.ieee or self.kernel or self._reference_value)({**{k: np.asarray(inputs[k])[~finite] for k in ok}, **attrs})
        value = ref.value.copy()
        value[~finite] = special
        bound, scale = ref.bound.copy(), ref.scale.copy()
        bound[~finite] = 0.0
        scale[~finite] = np.abs(special)
        shared, lean = (None if r is None else np.where(finite, r, 0.0) for r in (ref.shared, ref.lean))
        return Reference(value, bound, scale, shared=shared, lean=lean)


def grad_linear_reference(dy: np.ndarray, factor: np.ndarray, terms: np.ndarray, rel_bound: np.ndarray | float) -> Reference:
    """Reference for ops of the form dy * factor(x).

    terms: magnitude of the parts factor is summed from (>= |factor|);
    rel_bound: error of factor in units of F64_UNIT * terms.
    """
    abs_dy = np.abs(dy)
    value = dy * factor
    bound = F64_UNIT * rel_bound * abs_dy * terms + abs_dy * 2.0**-1060
    scale = abs_dy * np.maximum(terms, GRAD_RELATIVE_FLOOR)
    return Reference(value, bound, scale)


def sigmoid_pair(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sigmoid(z) and sigmoid(-z), each to a few float64 ulps for every finite z (no overflow)."""
    e = exp(-np.abs(z))
    inv = 1.0 / (1.0 + e)
    pos = z >= 0
    return np.where(pos, inv, e * inv), np.where(pos, e * inv, inv)
