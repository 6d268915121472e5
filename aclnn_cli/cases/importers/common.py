"""What every importer shares: graph-op names, case names, and the collector that groups imported cases into our
case documents (one per op) or skips them (value ranges and seeds: ranges.py).

Importers only translate; they never validate what our case-file parser validates (dtypes per
product, dims, overflow of a generator...). The documents they build go through `cases_from_doc`
like any YAML file, so a foreign case gets exactly the checks and messages a YAML case gets.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ...tensor import dtypes as D
from ...values import yamlsafe
from ...errors import CaseError
from ...ops import OpSpec, find_graph_op, find_op
from ...ops.families import Channels
from ...values.fill import parse_fill
from ...ops.graphops import GRAPH_OPS, GraphOp

def show(value: Any) -> str:
    """A user value for an error message, bounded (a foreign file may hold megabytes in one cell)."""
    return yamlsafe.show(value)


def clip(text: Any) -> str:
    """A user string for an error message: one line, at most 60 characters (any other value: `show`)."""
    return yamlsafe.clip(text) if isinstance(text, str) else yamlsafe.show(text)


class Unsupported(CaseError):
    """A well-formed foreign case that aclnn-cli cannot express. --skip-unsupported skips (and counts) it."""

    def __init__(self, file: str, message: str, *, case: str | None = None, key: str | None = None) -> None:
        super().__init__(file, f"{message}; --skip-unsupported skips such cases", case=case, key=key)


# TTK/msOpST soc names -> our products (prefix match, lower case, most specific first).
SOCS = (("ascend950", "950"), ("ascend910_93", "A3"), ("ascend910b", "A2"), ("ascend910", "910"))
# Formats that are a plain row-major array of the given shape: for an elementwise op the same as ND.
PLAIN_FORMATS = {"ND", "NCHW", "NHWC", "NCDHW", "NDHWC", "NCL", "NCW", "NC", "HWCN", "CHWN", "DHWCN", "NDHWC"}


def graph_op(name: Any) -> GraphOp | None:
    """A graph op by CamelCase or snake_case name (SiluGrad, silu_grad), bundled or a user op's (ops/graphops.py:
    TTK kernel mode and msOpST name graph ops), or None."""
    return find_graph_op(name)


def known_ops() -> str:
    """The ops an import may name, briefly (the full list grows with every op: `aclnn-cli ops`)."""
    from ...ops import OPS

    return f"{len(OPS)} aclnn APIs and {len(GRAPH_OPS)} graph ops (TTK's op_name): `aclnn-cli ops`"


def resolve_op(name: Any, err: Callable[[str], CaseError]) -> tuple[OpSpec, GraphOp | None]:
    """The op an aclnn API name or a graph op name stands for; Unsupported (via err) when there is none."""
    graph = graph_op(name)
    try:
        return find_op(graph.api if graph else str(name)), graph
    except KeyError:
        raise err(f"op '{clip(name)}' is not supported ({known_ops()})") from None


def graph_reshape(graph: GraphOp | None, tensors: dict) -> None:
    """A graph op's own mapping of its tensors' shapes onto the API's (GraphOp.reshape), applied in place to the
    TensorIns given with a shape."""
    if graph is None or graph.reshape is None:
        return
    for name, shape in graph.reshape({n: t.shape for n, t in tensors.items() if t.shape is not None}).items():
        tensors[name].shape = tuple(shape)


def check_attrs(graph: GraphOp | None, op: OpSpec, attrs: dict, err: Callable[[str], CaseError]) -> dict:
    """The API's attribute values for a graph op's attributes (graphops.py maps them); Unsupported (via err)
    for one the API has not, or fixes to another value (HardSigmoidGrad's alpha, beta)."""
    fixed = dict(graph.fixed_attrs) if graph else {}
    mapped = dict(graph.attrs or {}) if graph else {}
    ignored = dict(graph.ignored or {}) if graph else {}
    listed = dict(graph.lists or {}) if graph else {}
    shaped = set((graph.shaped or {}).values()) | set((graph.valued or {}).values()) if graph else set()
    out: dict = {}
    for name, value in attrs.items():
        if name in ignored or name in shaped:  # (a shaped or valued input's attribute: `shaped_inputs` reads it)
            continue
        if name in mapped:
            api_name, convert = mapped[name]
            try:
                converted = convert(value)
            except ValueError as exc:
                raise err(f"attribute {clip(name)}={show(value)} is not supported: {exc}") from None
            if api_name is not None:
                out[api_name] = converted
            continue
        if name in listed:
            api_name, index, length = listed[name]
            if not isinstance(value, bool):
                raise err(f"attribute {clip(name)}={show(value)} is not supported: expected True or False")
            out.setdefault(api_name, [True] * length)[index] = value
            continue
        if graph is None and name in {a.name for a in op.attributes}:  # (an op named by its key: the API's names)
            out[name] = list(value) if isinstance(value, tuple) else value
            continue
        if name not in fixed:
            takes = ", ".join(a.name for a in op.attributes) or "no attributes"
            raise err(f"attribute '{clip(name)}' is not supported: {op.name} takes {takes}")
        try:
            ok = math.isclose(float(value), fixed[name], rel_tol=1e-6)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise err(f"attribute {clip(name)}={show(value)} is not supported: "
                      f"{op.name} computes with {name}={fixed[name]:.8g}")
    return out


def shaped_inputs(graph: GraphOp | None, attrs: dict, dtype: str | None, err: Callable[[str], CaseError]) -> dict:
    """The API inputs a graph op makes from a shape attribute (GraphOp.shaped): name -> TensorIn of that shape in
    `dtype` (the first graph input's), the op's own fill. Unsupported (via err) where the attribute is missing or not
    a list of sizes."""
    from .entry import TensorIn

    out = {}
    for api_input, attr in ((graph.shaped or {}) if graph else {}).items():
        value = attrs.get(attr)
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                          for v in value):
            raise err(f"attribute {clip(attr)}={show(value)} is not supported: it gives {api_input}'s shape, a list of "
                      f"sizes >= 0")
        out[api_input] = TensorIn(dtype, tuple(value))
    return out


def valued_inputs(graph: GraphOp | None, attrs: dict, tensors: dict, err: Callable[[str], CaseError]) -> None:
    """The API inputs whose values a graph attribute lists (GraphOp.valued) filled with them, in place: the TensorIn
    keeps its dtype and shape, and a list of another length than its elements is Unsupported (via err), as is a
    missing attribute or one that is not a list of integers."""
    for api_input, attr in ((graph.valued or {}) if graph else {}).items():
        value, tensor = attrs.get(attr), tensors.get(api_input)
        if tensor is None or tensor.shape is None:
            continue
        value = [value] if isinstance(value, int) and not isinstance(value, bool) else value
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise err(f"attribute {clip(attr)}={show(value)} is not supported: it lists {api_input}'s values, integers")
        if len(value) != math.prod(tensor.shape):
            raise err(f"attribute {clip(attr)} lists {len(value)} values; {api_input} of shape {list(tensor.shape)} has "
                      f"{math.prod(tensor.shape)}")
        tensor.fill = {"values": list(value)}


def api_attrs(op: OpSpec, attrs: dict, err: Callable[[str], CaseError]) -> dict:
    """Attributes given by the API's own names (TTK aclnn mode, ATK): each an attribute of the op."""
    out = {}
    for name, value in attrs.items():
        ours = api_name(op, str(name))
        if ours is None or ours not in [a.name for a in op.attributes]:
            takes = ", ".join(a.name for a in op.attributes) or "no attributes"
            raise err(f"attribute '{clip(name)}' is not supported: {op.name} takes {takes}")
        out[ours] = list(value) if isinstance(value, tuple) else value
    return out


def api_name(op: OpSpec, name: str) -> str | None:
    """The op's tensor or attribute a foreign name stands for: the same name, else the same name in another
    case (ATK's 'Output' for output), else an alias: the op's declared `aliases`, or one known here (ATK's 'input'
    for RmsNormGrad's x)."""
    names = [t.name for t in op.tensors] + [a.name for a in op.attributes]
    if name in names:
        return name
    folded = {n.lower(): n for n in names}
    alias = op.aliases.get(name) or ALIASES.get(op.name, {}).get(name)  # (the op's own `aliases`, then ours)
    return folded.get(name.lower()) or (alias if alias in names else None)


# Foreign spellings of an op's names (ops-nn's ATK suites), beyond a difference of case.
ALIASES = {
    "aclnnRmsNormGrad": {"input": "x"},
    # ops-nn's ATK suites of activation/leaky_relu_grad and softplus_v2_grad name self "x" (and LeakyRelu's
    # negativeSlope "a"), as the ops' forward does
    "aclnnLeakyReluBackward": {"x": "self", "a": "negativeSlope"},
    "aclnnThresholdBackward": {"x": "self"},  # (ops-nn's ATK file: gradOutput, x, threshold)
    "aclnnSoftplusBackward": {"x": "self"},
    # ops-nn's AvgPool2dBackward ATK (pooling/avg_pool3_d_grad/tests/st) spells the attributes as torch does
    "aclnnAvgPool2dBackward": {"kernel_size": "kernelSize", "ceil_mode": "ceilMode", "count_include_pad": "countIncludePad",
                               "divisor_override": "divisorOverride", "cube_math_type": "cubeMathType"},
    # ops-nn's BatchNormBackward ATK names its tensors by position; its executor passes input0..input6 to the API
    # in the API's order (norm/batch_norm_grad_v3/tests/st/aclnnBatchNormBackward/executor_aclnnBatchNormBackward.py)
    "aclnnBatchNormBackward": {f"input{i}": n for i, n in enumerate(
        ("gradOut", "input", "weight", "runningMean", "runningVar", "saveMean", "saveInvstd"))},
}

# Outputs a foreign case leaves untyped that take another tensor's dtype rather than the case's: ops-nn's
# BatchNormBackward ATK lists no outputs, and its executor returns gradWeight and gradBias in weight's dtype (the
# API takes float32 or weight's; the case's float16 beside a float32 weight is refused).
OUTPUT_DTYPES = {"aclnnBatchNormBackward": {"gradWeight": "weight", "gradBias": "weight"},
                 # ops-nn's BinaryCrossEntropyWithLogitsBackward ATK lists no output; the op_api requires out's dtype
                 # to be target's (OP_CHECK_DTYPE_NOT_MATCH), and its executor allocates it so
                 "aclnnBinaryCrossEntropyWithLogitsBackward": {"out": "target"}}


def product_for(soc: str, err: Callable[[str], CaseError]) -> str:
    key = str(soc).strip().lower()
    for prefix, product in SOCS:
        if key.startswith(prefix):
            return product
    if str(soc).strip() in ("A2", "A3", "910", "950"):
        return str(soc).strip()
    raise err(f"soc '{clip(soc)}' has no aclnn-cli product (known: Ascend950, Ascend910_93, Ascend910B, Ascend910)")


def check_format(fmt: Any, err: Callable[[str], CaseError]) -> None:
    """Plain formats are ND for an elementwise op; private ones (NC1HWC0, FRACTAL_NZ...) reorder and pad storage."""
    if fmt is not None and str(fmt).upper() not in PLAIN_FORMATS:
        raise err(f"format '{clip(fmt)}' is not supported (aclnn-cli writes ND storage; plain formats "
                  f"{', '.join(sorted(PLAIN_FORMATS))} are read as ND)")


# A channels op (ops/families.Channels: BatchNormBackward) reads the channel at axis 1 of its (N, C, ...) tensors, as
# the aclnn API does for NC, NCL, NCHW, NCDHW and ND. NHWC and NDHWC put it last (the op_api then takes C from the last
# axis): such a tensor is imported as the (N, C, ...) view of the same storage, its strides channels-last (PyTorch's
# channels_last), so every element sits where the channel-last storage holds it. Other formats with the channel
# elsewhere are unsupported for these ops.
CHANNEL_LAST = ("NHWC", "NDHWC")
CHANNEL_ELSEWHERE = ("HWCN", "CHWN", "DHWCN")


def channel_ops(op: OpSpec) -> bool:
    """Whether the op reads a channel axis (the channels family): formats then decide where the channel is."""
    return isinstance(op.family, Channels)


def channels_view(op: OpSpec, name: str, fmt: Any, shape: Sequence[int], strides: Sequence[int] | None,
                  err: Callable[[str], CaseError]) -> tuple[tuple[int, ...], list[int] | None]:
    """A channels op's (N, C, ...) tensor given in `fmt`: (view shape, strides), strides None when contiguous.
    NHWC / NDHWC (N, *S, C) -> view (N, C, *S) over the same storage (strides as given, else contiguous ones, with
    the channel's moved to axis 1); other formats as they are. Per-channel tensors (C,) and other ops: as they are."""
    shape = tuple(shape)
    if fmt is None or not channel_ops(op) or name in op.family.per_row:
        return shape, None if strides is None else list(strides)
    f = str(fmt).upper()
    if f in CHANNEL_ELSEWHERE:
        raise err(f"format {f} does not hold the channel at axis 1 or last; {op.name} takes (N, C, ...) "
                  "(NC, NCL, NCHW, NCDHW, ND) or channel-last NHWC, NDHWC")
    if f not in CHANNEL_LAST:
        return shape, None if strides is None else list(strides)
    if len(shape) != len(f):
        raise err(f"{name} has {len(shape)} dims in format {f}, which has {len(f)}")
    st = list(strides) if strides is not None else [math.prod(shape[i + 1:]) for i in range(len(shape))]
    return (shape[0], shape[-1], *shape[1:-1]), [st[0], st[-1], *st[1:-1]]


def dtype_name(raw: Any, err: Callable[[str], CaseError]) -> str:
    """Our dtype name for a foreign one (fp16, float, bf16...)."""
    try:
        return D.lookup(str(raw)).name
    except KeyError:
        raise err(f"dtype '{clip(raw)}' is not supported (aclnn-cli: {', '.join(D.DTYPES)})") from None


def safe_name(text: str) -> str:
    """A case name our files accept (^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$, no '..'), stable for a given text."""
    name = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9_.-]", "_", str(text))).lstrip("_.-") or "case"
    if len(name) > 100:
        name = name[:91] + "-" + hashlib.sha256(str(text).encode()).hexdigest()[:8]
    return name


@dataclass(frozen=True)
class Skipped:
    """A foreign case left out: where, which case, why."""

    file: str
    case: str
    reason: str


@dataclass
class Collector:
    """Gathers one file's cases into documents (one per op, in first-seen order), or skips the
    unsupported ones when asked to. With skipping on, every case is also validated on its own, so a case
    our parser would reject (a dtype a product lacks, an overflowing range...) is skipped, not fatal.
    A malformed foreign case (a plain CaseError from the importer) is always an error."""

    where: str
    skip: bool = False
    # With skipping on: the case files' own reader (loader.cases_from_doc, handed down by its caller: the loader
    # sits above the importers) that each case must pass to be kept.
    validate: Callable[[str, dict], list] | None = None
    docs: dict[str, list[dict]] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)

    labels: set[str] = field(default_factory=set)

    def add(self, label: str, build: Callable[[], tuple[OpSpec, dict]]) -> None:
        if label in self.labels:  # (two names that differ only in characters safe_name replaces)
            raise CaseError(self.where, "two cases of this file have this name (names must be unique: they name "
                            "the case directories)", case=label)
        self.labels.add(label)
        try:
            op, case = build()
        except Unsupported as exc:
            if not self.skip:
                raise
            self.skipped.append(Skipped(self.where, label, _reason(exc, self.where)))
            return
        if self.skip and self.validate is not None:
            try:
                problem = next(filter(None, map(outside_domain, self.validate(self.where, {"op": op.name,
                                                                                           "cases": [case]}))), None)
            except CaseError as exc:
                problem = _reason(exc, self.where)
            if problem:
                self.skipped.append(Skipped(self.where, label, problem))
                return
        self.docs.setdefault(op.name, []).append(case)

    def documents(self) -> list[dict]:
        return [{"op": op, "cases": cases} for op, cases in self.docs.items()]


def outside_domain(case) -> str | None:
    """Why an imported integer fill draws values the op does not define (NLL: a target outside [0, C - 1] that is
    not ignoreIndex), or None. The op's domain is its own default fill for the case (a callable default_fill:
    randint [lo, hi], optionally sprinkled with one value); gen would refuse such a case whole."""
    shapes = {t.name: tuple(t.layout.shape) for t in case.tensors}
    for spec, t in zip(case.op.tensors, case.tensors):
        if t.null or t.layout.numel == 0 or not t.dtype.is_integer or not callable(spec.default_fill):
            continue
        try:
            domain = parse_fill(spec.default_fill(shapes, case.attribute_values))
        except Exception:  # (the op's own function: its domain is then unknown here)
            continue
        if domain.kind != "randint" or t.fill.kind not in ("randint", "constant", "values"):
            continue
        lo, hi, *spr = domain.params
        drawn = (t.fill.params[:2] if t.fill.kind == "randint" else t.fill.params)
        bounds = range(int(drawn[0]), int(drawn[1]) + 1) if t.fill.kind == "randint" else None
        extra = set(spr[:1])
        if bounds is not None:
            bad = bounds.start < lo or bounds.stop - 1 > hi
            bad = bad and not (len(bounds) == 1 and bounds.start in extra)
        else:
            bad = any(not (lo <= v <= hi or v in extra) for v in drawn)
        if bad:
            takes = f"[{lo}, {hi}]" + (f" or {spr[0]}" if spr else "")
            return (f"{t.name} values {show(t.fill.describe())} reach outside what {case.op.name} defines for "
                    f"this case, {takes} (the op refuses such a case)")
    return None


def _reason(exc: CaseError, where: str) -> str:
    """The message without the file and case (they are in Skipped), and without the skip hint."""
    text = str(exc).removeprefix(where + ": ").removesuffix("; --skip-unsupported skips such cases")
    return re.sub(r"^case '.*?': ", "", text)


def errors(where: str, case: str | None) -> tuple[Callable[..., CaseError], Callable[..., CaseError]]:
    """(bad, unsupported): factories of the two errors for one case, each naming file, case and key."""
    def bad(msg: str, key: str | None = None) -> CaseError:
        return CaseError(where, msg, case=case, key=key)

    def unsupported(msg: str, key: str | None = None) -> CaseError:
        return Unsupported(where, msg, case=case, key=key)

    return bad, unsupported
