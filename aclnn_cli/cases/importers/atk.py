"""ATK JSON (the aclnn test kit's case list) -> our case documents.

A file is a JSON list of cases: {id, name, aclnn_name, api_type, standard, inputs: [{name, type,
required, dtype, shape, range_values, backward, align_32B, outlier_values}]}. Inputs carry aclnn
names (gradOutput, self, buffer), so they map by name (common.api_name: any case, a few aliases). An
input of type "attr" is an attribute (range_values its value); a list of "attrs" entries one int or bool
array (normalizedShape, outputMask); an optional tensor with required false or shape null is nullptr.
docs/importing.md has the field-by-field table.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from pathlib import Path
from typing import Any, Callable

from ...errors import CaseError
from ...ops import OpSpec
from .common import Collector, api_name, channels_view, check_format, dtype_name, errors, resolve_op, safe_name, show
from .ranges import range_fill, seed_for, unit
from .entry import TensorIn, case_entry
from .fields import (MAX_INT64, as_number, check_keys, check_types, field, int_in, int_list, interval, numbers,
                     text)
from .source import json_cases, json_head

NAME = "ATK JSON"
# Case keys: the ones that matter, and the ones that describe ATK's own run (benchmark, accuracy
# standard, API wrapper names), which we read past on purpose (docs/importing.md says why). ATK's later schema
# (ops-nn's files with "version": "v2.1" or "v1.11": SituGluGrad, EmbeddingBag, ScatterReduce) adds RUN_KEYS, read
# past as well, and more NULL_ONLY keys.
CASE_KEYS = ("id", "aclnn_name", "inputs", "name", "api_type", "aclnn_api_type", "standard", "is_boundary")
# Labels of ATK's run: its schema version, the benchmark framework, its wrappers for other back ends (Triton,
# fusion, distributed, kernel-level runs), where it saves or fetched a case, how often it times it.
RUN_KEYS = ("version", "api", "triton_api_type", "fusion_api_type", "dist_api_type", "kernel_api_type", "acl_json",
            "save_name", "uuid", "downloaded", "xrun_cs_name", "compute_times")
# Case keys whose null (false for backward) means "the case as its inputs describe it": anything else asks for a
# run aclnn-cli does not make, so that case is unsupported (skipped with the reason), the file's others still
# import. Each with what it would ask for.
NULL_ONLY = {
    "strategy": "ATK's own data strategy, which aclnn-cli cannot reproduce",
    "default_seed": "a fixed seed of ATK's own generator, which aclnn-cli cannot reproduce",
    "expected_error_msg": "a case that expects the API to fail with this message (aclnn-cli's contract cases "
                          "expect a status: write it as a case file with expect_status)",
    "outputs": "ATK's own description of the outputs (aclnn-cli derives them from the op and its inputs)",
    "backward": "ATK's autograd run of the forward API, another test than the backward API's own",
    "method_inputs": "inputs for a method call of ATK's benchmark",
    "tensor_input": "ATK's own input tensor",
    "xrun_data": "data of ATK's own",
    "fusion_mode": "a fused run of ATK's",
    "triton_name": "a Triton kernel's run",
    "kernel_name": "a kernel-level run, not the aclnn API's",
}
INPUT_KEYS = ("name", "type", "dtype", "shape", "range_values", "required", "backward", "align_32B",
              "outlier_values", "format")
ND_KEYS = ("name", "mean", "std")
# Ops whose suites' outputMask entries switch outputs off: an output whose entry is false is imported as nullptr
# (ConvolutionBackward's file masks one or more outputs in 182 of its 215 cases). Others keep a masked output as a
# tensor (BatchNormBackward's executor allocates every output, typed from weight: tests/test_importers_batchnorm.py).
MASKED_OUTPUTS_NULL = ("aclnnConvolutionBackward",)
# Ops whose suites mark an input the API requires `"required": false` while giving it (ops-nn's BatchNormElemtBackward
# file: counter, in all 218 cases; its executor reads it): such an input, with a shape, is imported as given.
REQUIRED_FALSE_GIVEN = ("aclnnBatchNormElemtBackward",)
# ATK's names for the type of a C double or float argument (in "type" or "dtype").
FLOAT_NAMES = ("float", "double", "float32", "float64", "fp32", "fp64")
# The types ops-nn's suites give the fields we read past (and the ones we read, before their own checks).
CASE_TYPES = {"name": (str,), "api_type": (str,), "aclnn_api_type": (str,), "standard": (dict, str),
              "is_boundary": (bool,), "aclnn_name": (str,), "inputs": (list,),
              **{k: (str, type(None)) for k in RUN_KEYS if k not in ("downloaded", "compute_times")},
              "downloaded": (bool, type(None)), "compute_times": (int, type(None))}
INPUT_TYPES = {"name": (str, type(None)), "type": (str,), "dtype": (str, type(None)), "required": (bool,),
               "backward": (bool, type(None)),
               "align_32B": (bool, type(None)), "outlier_values": (list, type(None)), "format": (str, type(None))}


def sniff(head: bytes) -> bool:
    return json_head(head, b'"aclnn_name"', b'"range_values"')


def read(where: str, basename: str, data: bytes, out: Collector) -> None:
    """Every case of one ATK file into `out`. Each case has an integer id (ops-nn's suites number them
    0, 1, ...), unique in the file: it names and seeds the case."""
    stem = Path(basename).stem
    seen: dict[int, int] = {}
    for i, raw in enumerate(json_cases(where, data, NAME)):
        bad, _ = errors(where, f"#{i + 1}")
        if "id" not in raw:
            raise bad("an ATK case needs an id (an integer)", "id")
        key = str(field(bad, "id", int_in, raw["id"], "id"))
        if raw["id"] in seen:
            raise bad(f"id {key} is also case #{seen[raw['id']] + 1}'s: ids name and seed cases, so they are unique",
                      "id")
        seen[raw["id"]] = i
        name = safe_name(f"{stem}-{key}")
        out.add(name, lambda raw=raw, name=name, key=key: _case(where, stem, raw, name, key))


def _case(where: str, stem: str, raw: dict, name: str, key: str) -> tuple[OpSpec, dict]:
    bad, unsupported = errors(where, name)
    check_keys(raw, CASE_KEYS + RUN_KEYS + tuple(NULL_ONLY), "ATK case", bad)
    check_types(raw, CASE_TYPES, bad)
    for k, what in NULL_ONLY.items():
        if not (raw.get(k) is None or (k == "backward" and raw[k] is False)):
            raise unsupported(f"{k} {show(raw[k])}: {what} (null{', or false,' if k == 'backward' else ''} "
                              f"is accepted)", k)
    op, _ = resolve_op(field(bad, "aclnn_name", text, raw.get("aclnn_name"), "aclnn_name"),
                       lambda m: unsupported(m, "aclnn_name"))
    inputs = raw.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise bad("'inputs' must be a non-empty list", "inputs")
    names = tuple(t.name for t in op.inputs)
    outputs = {t.name for t in op.outputs}
    kinds = {a.name: a.kind for a in op.attributes}
    tensors: dict[str, TensorIn] = {}
    attrs: dict[str, Any] = {}
    layouts: list[tuple[str, Any]] = []  # (where, value) of "format" entries of dtype non_param
    for j, inp in enumerate(inputs):
        where_key = f"inputs[{j}]"
        if isinstance(inp, dict) and inp.get("name") == "format" and inp.get("dtype") == "non_param" \
                and "format" not in kinds:  # (ConvolutionBackward's suite: the tensors' layout, an ATK setting)
            layouts.append((where_key, inp.get("range_values")))
            continue
        if isinstance(inp, list):  # a list of "attrs" entries: one aclIntArray / aclBoolArray
            n, value = _array(op, inp, where_key, bad, unsupported)
        elif not isinstance(inp, dict):
            raise bad(f"an input is an object, got {show(inp)}", where_key)
        else:
            check_keys(inp, INPUT_KEYS, "ATK input", bad, f"{where_key}.")
            check_types(inp, INPUT_TYPES, bad, f"{where_key}.")
            if inp.get("name") is None:  # (ops-nn's SoftshrinkBackward file: unnamed, the API's arguments in order)
                n = _by_position(op, j, where_key, bad)
            else:
                given = field(bad, f"{where_key}.name", text, inp.get("name"), "an input's name")
                n = api_name(op, given)
            if n is not None and n in outputs:  # (ops-nn's Matmul file lists out among its inputs: its executor
                tensors[n] = _output(op, inp, n, lambda m, k: bad(m, f"{n}.{k}"),  # moves it to the outputs)
                                     lambda m, k: unsupported(m, f"{n}.{k}"))
                continue
            if n is None or (n not in names and n not in kinds):
                raise unsupported(f"{show(given)} is not an input of {op.name} (inputs: "
                                  f"{', '.join(names + tuple(kinds))})", f"{where_key}.name")
            if n not in kinds and inp.get("type", "tensor") == "attr":
                raise bad(f"{n} is a tensor of {op.name}, given as ATK type 'attr'", f"{where_key}.type")
            if n in kinds:
                value = _attr(op, n, inp, stem, key, lambda m, k: bad(m, f"{n}.{k}"),
                              lambda m, k: unsupported(m, f"{n}.{k}"))
        if n in tensors or n in attrs:
            raise bad(f"input {show(n)} appears twice", f"{where_key}.name")
        if n in kinds:
            attrs[n] = value
            continue
        tensors[n] = _tensor(op, inp, stem, key, n, lambda m, k: bad(m, f"{n}.{k}"),
                             lambda m, k: unsupported(m, f"{n}.{k}"))
    _check_layouts(op, tensors, layouts, unsupported)
    _masked_outputs_null(op, tensors, attrs, unsupported)
    return op, case_entry(op, name, seed_for(stem, key), tensors, attributes=attrs)


def _check_layouts(op: OpSpec, tensors: dict[str, TensorIn], layouts: list, unsupported) -> None:
    """A "format" entry (dtype non_param) names the layout of the op's tensors: accepted where it is the format the
    op declares for the first input's rank (TensorSpec.formats: the harness gives the tensors that one), else the
    case is unsupported."""
    first = next((tensors[t.name] for t in op.inputs if t.name in tensors and tensors[t.name].shape is not None), None)
    want = op.inputs[0].formats.get(len(first.shape)) if first is not None else None
    for where_key, value in layouts:
        if value != want:
            raise unsupported(f"format {show(value)}: {op.name} gives its tensors "
                              f"{want or 'no format'} at this rank", f"{where_key}.range_values")


def _masked_outputs_null(op: OpSpec, tensors: dict[str, TensorIn], attrs: dict, unsupported) -> None:
    """An op of MASKED_OUTPUTS_NULL whose outputMask has one entry per output: an output whose entry is false and that
    the API takes as nullptr is made null. The device leaves it unwritten, and the pipeline judges every non-null
    output. A mask of all false makes every output null: the API accepts the call and writes nothing
    (ConvolutionBackward's OutputViewProcess copies only the outputs the mask asks for), so the case is judged by its
    status alone (verify: a positive case with no output to compare)."""
    mask = attrs.get("outputMask")
    outs = op.outputs
    if op.name not in MASKED_OUTPUTS_NULL or not isinstance(mask, (list, tuple)) or len(mask) != len(outs):
        return
    for on, t in zip(mask, outs):
        if not on and t.optional:
            tensors[t.name] = TensorIn(null=True)


def _by_position(op: OpSpec, j: int, where_key: str, bad: Callable[..., CaseError]) -> str:
    """An input without a name is the API's j-th argument (the header's order, outputs excluded)."""
    args = [name for name, _ in op.api_params if name not in {t.name for t in op.outputs}]
    if j >= len(args):
        raise bad(f"an unnamed input at position {j}: {op.name} takes {len(args)} ({', '.join(args)})",
                  f"{where_key}.name")
    return args[j]


def _attr(op: OpSpec, n: str, inp: dict, stem: str, key: str, bad: Callable[..., CaseError],
          unsupported: Callable[..., CaseError]) -> Any:
    """An ATK "attr" entry: its range_values is the value; for an int, [lo, hi] is one integer of that range,
    drawn per case (as ATK draws it) from the file's name and the case's id."""
    kind = next(a.kind for a in op.attributes if a.name == n)
    if kind in ("double", "float"):
        return _number_attr(op, n, kind, inp, unit(stem, f"{key}\0{n}", "attr"), bad, unsupported)
    if kind == "scalar" and inp.get("type") == "scalar":  # (ATK writes an aclScalar* argument as type "scalar")
        return _scalar_attr(op, n, inp, lambda what: unit(stem, f"{key}\0{n}", what), bad, unsupported)
    if inp.get("type") not in ("attr", None):
        raise unsupported(f"{n} is an attribute of {op.name}, given as ATK type {show(inp.get('type'))}", "type")
    rv = inp.get("range_values")
    if kind == "int" and isinstance(rv, list):
        if len(rv) not in (1, 2):
            raise bad(f"an int attribute's range_values is a value or [lo, hi], got {show(rv)}", "range_values")
        lo, hi = (field(bad, "range_values", int_in, v, "an int attribute's bound", -MAX_INT64 - 1) for v in
                  (rv * 2 if len(rv) == 1 else rv))
        if lo > hi:
            raise bad(f"an int attribute's range_values [lo, hi] needs lo <= hi, got {show(rv)}", "range_values")
        return lo + min(int(unit(stem, f"{key}\0{n}", "attr") * (hi - lo + 1)), hi - lo)
    if kind == "scalar":
        return field(bad, "range_values", as_number, rv)
    return rv  # (int, bool, string: validation checks the value as a case file's)


def _number_attr(op: OpSpec, n: str, kind: str, inp: dict, u: float, bad: Callable[..., CaseError],
                 unsupported: Callable[..., CaseError]) -> float | int:
    """A C double or float argument (eps): ATK writes it as an "attr" of dtype double/float (ops-nn's
    BatchNormBackward: `"dtype": "double", "range_values": [0.0, 1.0]`), or as a "scalar". range_values is
    the value, or [lo, hi] drawn per case (as for an int); the case reader rounds a float to float32."""
    if inp.get("type") not in ("attr", "scalar", None, *FLOAT_NAMES):
        raise unsupported(f"{n} is a C {kind} of {op.name}, given as ATK type {show(inp.get('type'))}", "type")
    if inp.get("dtype") not in (None, *FLOAT_NAMES):
        raise unsupported(f"{n} is a C {kind} of {op.name}, given as ATK dtype {show(inp.get('dtype'))} "
                          f"(expected one of {', '.join(FLOAT_NAMES)})", "dtype")
    rv = inp.get("range_values")
    if isinstance(rv, list) and len(rv) == 2:
        return _draw(rv, u, bad, "range_values")
    if isinstance(rv, list) and len(rv) == 1:
        rv = rv[0]
    elif isinstance(rv, list):
        raise bad(f"a {kind} attribute's range_values is a value or [lo, hi], got {show(rv)}", "range_values")
    return field(bad, "range_values", _quoted_number, rv)


def _scalar_attr(op: OpSpec, n: str, inp: dict, units: Callable[[str], float], bad: Callable[..., CaseError],
                 unsupported: Callable[..., CaseError]) -> float | int:
    """An aclScalar* argument ATK writes as type "scalar" (SwishBackward's betaOptional, SoftplusBackward's beta):
    range_values is the value ("nan" and "inf" as strings too), [lo, hi] drawn per case as for an int, or an "nd"
    distribution (ops-nn's SoftplusBackward: {"name": "nd", "mean": [-100, 100], "std": [1, 25]}): its mean and
    std drawn per case as a tensor's are, then one value of that normal at the case's own quantile. The case
    reader rounds it to the op's scalar dtype."""
    rv = inp.get("range_values")
    if isinstance(rv, dict):
        if rv.get("name") != "nd":
            raise unsupported(f"{n} is an aclScalar of {op.name}, given a distribution {show(rv.get('name'))} (only "
                              "'nd' is supported)", "range_values.name")
        check_keys(rv, ND_KEYS, "nd distribution", unsupported, "range_values.")
        mean = _draw(rv.get("mean"), units("mean"), bad, "range_values.mean")
        std = _draw(rv.get("std"), units("std"), bad, "range_values.std")
        if std < 0:
            raise bad(f"a standard deviation is not negative, got {show(rv.get('std'))}", "range_values.std")
        if std == 0:
            return mean
        q = min(max(units("attr"), 2.0**-53), 1 - 2.0**-53)  # (a quantile strictly inside (0, 1))
        return float(f"{NormalDist(mean, std).inv_cdf(q):.6g}")
    if isinstance(rv, list) and len(rv) == 2:
        return _draw(rv, units("attr"), bad, "range_values")
    if isinstance(rv, list) and len(rv) == 1:
        rv = rv[0]
    return field(bad, "range_values", _quoted_number, rv)


def _quoted_number(v: Any) -> float | int:
    """as_number, or a number written as a string: ops-nn's DeepNorm suite writes `"range_values": "1e-6"`."""
    if isinstance(v, str) and "_" not in v:
        try:
            return float(v)
        except ValueError:
            pass
    return as_number(v)


def _array(op: OpSpec, entries: list, where_key: str, bad: Callable[..., CaseError],
           unsupported: Callable[..., CaseError]) -> tuple[str, list]:
    """A list of ATK "attrs" entries of one name: the elements of an aclIntArray / aclBoolArray, in order (an
    entry's value or a one-element list of it)."""
    if not entries or not all(isinstance(e, dict) for e in entries):
        raise bad("an attribute list is a non-empty list of objects", where_key)
    given = {e.get("name") for e in entries}
    if len(given) != 1:
        raise bad(f"an attribute list holds one name, got {show(sorted(map(str, given)))}", where_key)
    n = api_name(op, str(given.pop()))
    kinds = {a.name: a.kind for a in op.attributes}
    if n not in kinds or kinds[n] not in ("int_list", "bool_list"):
        raise unsupported(f"a tensor or value list {show(entries[0].get('name'))} is not supported "
                          f"({op.name} takes {', '.join(kinds) or 'no list'})", where_key)
    for i, e in enumerate(entries):
        check_keys(e, INPUT_KEYS, "ATK input", bad, f"{where_key}[{i}].")
        if e.get("type") not in ("attrs", "attr_tuple"):  # (AvgPool3dBackward's file: attr_tuple)
            raise bad(f"an attribute list's entries have type 'attrs', got {show(e.get('type'))}", f"{where_key}[{i}].type")
    # an entry's range_values is the element, or a one-element list of it (ops-nn's BatchNormBackward writes
    # each outputMask entry as `"range_values": [true]`)
    values = [e.get("range_values") for e in entries]
    return n, [v[0] if isinstance(v, list) and len(v) == 1 else v for v in values]


def _tensor(op: OpSpec, inp: dict, stem: str, key: str, n: str, bad: Callable[..., CaseError],
            unsupported: Callable[..., CaseError]) -> TensorIn:
    if inp.get("type", "tensor") != "tensor":
        raise unsupported(f"ATK input type {show(inp.get('type'))} is not supported for {n} (a tensor)", "type")
    given = op.name in REQUIRED_FALSE_GIVEN and inp.get("shape", ()) is not None
    if (inp.get("required") is False and not given) or inp.get("shape", ()) is None:  # an optional tensor left out
        if not next(t for t in op.inputs if t.name == n).optional:
            raise unsupported(f"{n} is left out (required false or shape null), but {op.name} needs it", "required")
        return TensorIn(null=True)
    if inp.get("align_32B") not in (None, False):
        raise unsupported(f"align_32B {show(inp['align_32B'])} is not supported (aclnn-cli writes packed storage)",
                          "align_32B")
    if inp.get("outlier_values") not in (None, []):
        raise unsupported("outlier_values are not supported: write the outliers as a separate case with "
                          "a values generator", "outlier_values")
    check_format(inp.get("format"), lambda m: unsupported(m, "format"))
    if "dtype" not in inp or "shape" not in inp or "range_values" not in inp:
        raise bad("an ATK tensor input needs dtype, shape and range_values", "dtype")
    dtype = dtype_name(inp["dtype"], lambda m: unsupported(m, "dtype"))
    if n in op.derived:  # (its shape and range are stand-ins: the executor derives it, as gen does)
        return TensorIn(dtype)
    shape = field(bad, "shape", int_list, inp["shape"])
    redrawn = n in op.redrawn  # (its executor draws the values from the op's domain: the op's default fill)
    fill = None if redrawn else _fill(inp["range_values"], dtype, stem, f"{key}\0{n}", bad, unsupported)
    shape, strides = channels_view(op, n, inp.get("format"), shape, None, lambda m: unsupported(m, "format"))
    return TensorIn(dtype, shape, fill, None if strides is None else {"strides": strides})


def _output(op: OpSpec, inp: dict, n: str, bad: Callable[..., CaseError],
            unsupported: Callable[..., CaseError]) -> TensorIn:
    """An output the file lists among its inputs (its executor hands that argument to the outputs): its dtype and
    shape, as a TTK row's output; its range_values (what the buffer holds before the call) is not ours to keep:
    gen fills an output's storage with its canary."""
    if inp.get("type", "tensor") != "tensor":
        raise unsupported(f"ATK input type {show(inp.get('type'))} is not supported for {n} (an output)", "type")
    check_format(inp.get("format"), lambda m: unsupported(m, "format"))
    if "dtype" not in inp or "shape" not in inp:
        raise bad("an ATK tensor input needs dtype and shape", "dtype")
    return TensorIn(dtype_name(inp["dtype"], lambda m: unsupported(m, "dtype")), field(bad, "shape", int_list, inp["shape"]))


def _fill(rv: Any, dtype: str, stem: str, key: str, bad: Callable[..., CaseError],
          unsupported: Callable[..., CaseError]) -> dict:
    """range_values -> our generator: a list is a range or values (ranges.range_fill), an interval string ("(0, 1)")
    a range, a single number (ops-nn writes `"range_values": 0` or `"inf"`) a constant; {"name": "nd", "mean": [a, b], "std":
    [c, d]} is a normal whose mean and std are drawn per case from [a, b] and [c, d]."""
    if rv == ["null"] or rv == "null":
        raise unsupported("range_values 'null' is not supported (give a range)", "range_values")
    if isinstance(rv, (list, int, float, str)) and not isinstance(rv, bool):
        if isinstance(rv, list):
            return range_fill(field(bad, "range_values", numbers, rv, "range_values"), dtype)
        if isinstance(rv, str) and rv.strip()[:1] in ("(", "["):
            return range_fill(field(bad, "range_values", interval, rv), dtype)
        return range_fill([field(bad, "range_values", as_number, rv)], dtype)
    if isinstance(rv, dict):
        if rv.get("name") != "nd":
            raise unsupported(f"distribution {show(rv.get('name'))} is not supported (only 'nd')", "range_values.name")
        check_keys(rv, ND_KEYS, "nd distribution", unsupported, "range_values.")
        mean = _draw(rv.get("mean"), unit(stem, key, "mean"), bad, "range_values.mean")
        std = _draw(rv.get("std"), unit(stem, key, "std"), bad, "range_values.std")
        if std < 0:
            raise bad(f"a standard deviation is not negative, got {show(rv.get('std'))}", "range_values.std")
        return {"normal": [mean, std]}
    raise bad(f"range_values must be a list, a number or an nd distribution, got {show(rv)}", "range_values")


def _draw(span: Any, u: float, bad: Callable[..., CaseError], key: str) -> float | int:
    """A point of [lo, hi] at fraction u, to 6 significant digits (readable YAML, still inside the span)."""
    if isinstance(span, (int, float)) and not isinstance(span, bool):
        span = [span, span]
    if not isinstance(span, list) or len(span) != 2:
        raise bad(f"expected [lo, hi], got {show(span)}", key)
    lo, hi = field(bad, key, numbers, span, key.rsplit(".", 1)[-1])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise bad(f"expected finite [lo, hi], got {show(span)}", key)
    if not lo <= hi:
        raise bad(f"expected [lo, hi] with lo <= hi, got {show(span)}", key)
    if lo == hi:
        return lo
    return min(max(float(f"{lo + (hi - lo) * u:.6g}"), lo), hi)
