"""msOpST JSON (CANN's operator ST "test case definition file") -> our case documents.

A file is a JSON list of cases: {case_name, op (graph op type), input_desc: [{format, type, shape,
data_distribute, value_range, value, ...}], output_desc: [{format, type, shape}], attr: [{name, type,
value}], calc_expect_func_file, ...}. A desc may list several formats, types, shapes, value ranges or
distributions; msOpST requires every such list in a case to have the same length, and entry i of each
forms sub-case i (a one-entry list serves every sub-case). docs/importing.md maps every field.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

from ...errors import CaseError
from ...ops import OpSpec
from .common import (Collector, GraphOp, api_attrs, api_name, check_attrs, check_format, dtype_name, errors,
                     graph_reshape, resolve_op, safe_name, shaped_inputs, show, clip, valued_inputs)
from .ranges import range_fill, seed_for, yaml_number
from .entry import TensorIn, case_entry
from .fields import check_keys, check_types, field, int_list, numbers, text
from .source import json_cases, json_head

NAME = "msOpST JSON"
CASE_KEYS = ("case_name", "op", "input_desc", "output_desc", "attr", "calc_expect_func_file", "error_threshold",
             "st_mode", "run_torch_api", "expect", "fuzz_impl", "fuzz_case_num")
DESC_KEYS = ("name", "format", "ori_format", "type", "shape", "ori_shape", "typical_shape", "shape_range", "is_const",
             "data_distribute", "value_range", "value", "param_type")
LISTED = ("format", "ori_format", "type", "shape", "ori_shape", "typical_shape", "value_range", "data_distribute")
SHAPES = ("shape", "ori_shape", "typical_shape")
# The types CANN's documentation gives the fields we read past (and the ones we read, before their own checks).
CASE_TYPES = {"case_name": (str,), "op": (str,), "calc_expect_func_file": (str,), "st_mode": (str,),
              "run_torch_api": (str,), "expect": (str,), "fuzz_impl": (str,), "fuzz_case_num": (int,),
              "attr": (list,), "error_threshold": (list, float, int)}
DESC_TYPES = {"name": (str,), "is_const": (bool,), "param_type": (str,), "shape_range": (list,),
              "value": (list, str, int, float)}


def sniff(head: bytes) -> bool:
    return json_head(head, b'"input_desc"', b'"output_desc"')


def read(where: str, basename: str, data: bytes, out: Collector) -> None:
    """Every (sub-)case of one msOpST file into `out`."""
    stem = Path(basename).stem
    seen: dict[str, int] = {}
    for i, raw in enumerate(json_cases(where, data, NAME)):
        bad, _ = errors(where, f"#{i + 1}")
        base = field(bad, "case_name", text, raw["case_name"], "case_name") if "case_name" in raw else f"{stem}-{i + 1}"
        if base in seen:
            raise bad(f"case_name {show(base)} is also case #{seen[base] + 1}'s: names seed cases, so they are unique",
                      "case_name")
        seen[base] = i
        bad, _ = errors(where, base)
        check_keys(raw, CASE_KEYS, "msOpST", bad)
        check_types(raw, CASE_TYPES, bad)
        descs = [("input_desc", j, d) for j, d in enumerate(_descs(raw, "input_desc", bad))]
        descs += [("output_desc", j, d) for j, d in enumerate(_descs(raw, "output_desc", bad))]
        n = _subcase_count(descs, bad)
        for sub in range(n):
            name = safe_name(base if n == 1 else f"{base}-{sub + 1}")
            out.add(name, lambda raw=raw, sub=sub, name=name: _case(where, stem, raw, sub, name))


def _descs(raw: dict, key: str, bad: Callable[..., CaseError]) -> list[dict]:
    descs = raw.get(key)
    if not isinstance(descs, list) or not descs or not all(isinstance(d, dict) for d in descs):
        raise bad(f"'{key}' must be a non-empty list of objects", key)
    for j, d in enumerate(descs):
        check_keys(d, DESC_KEYS, "msOpST desc", bad, f"{key}[{j}].")
        check_types(d, DESC_TYPES, bad, f"{key}[{j}].")
    return descs


def _alternatives(desc: dict, key: str) -> list:
    """The entries of one listed field: a scalar or a single shape/range is one entry."""
    v = desc[key]
    if key in SHAPES or key == "value_range":
        return v if isinstance(v, list) and v and all(isinstance(x, list) for x in v) else [v]
    return v if isinstance(v, list) else [v]


def _subcase_count(descs: list[tuple[str, int, dict]], bad: Callable[..., CaseError]) -> int:
    lengths = {(side, j, k): len(_alternatives(d, k)) for side, j, d in descs for k in LISTED if k in d}
    for (side, j, k), length in lengths.items():
        if length == 0:
            raise bad("an empty list (fill in the template)", f"{side}[{j}].{k}")
    n = max(lengths.values(), default=1)
    for (side, j, k), length in lengths.items():
        if length not in (1, n):
            raise bad(f"{length} entries where other lists have {n}: msOpST pairs entry i of every list, "
                      "so each must have 1 or the same number", f"{side}[{j}].{k}")
    return n


def _pick(desc: dict, key: str, sub: int) -> Any:
    if key not in desc:
        return None
    alts = _alternatives(desc, key)
    return alts[sub] if len(alts) > 1 else alts[0]


def _case(where: str, stem: str, raw: dict, sub: int, name: str) -> tuple[OpSpec, dict]:
    bad, unsupported = errors(where, name)
    op, graph = resolve_op(field(bad, "op", text, raw.get("op"), "op"), lambda m: unsupported(m, "op"))
    if str(raw.get("expect", "success")).lower() != "success":
        raise unsupported(f"expect {show(raw['expect'])} is not supported: a failing case needs its status "
                          "(write it in YAML with expect_status)", "expect")
    if raw.get("fuzz_impl") or raw.get("fuzz_case_num"):
        raise unsupported("fuzz generation is not supported", "fuzz_impl")
    attrs = raw.get("attr") or []
    if not isinstance(attrs, list) or not all(isinstance(a, dict) and "name" in a for a in attrs):
        raise bad("'attr' must be a list of {name, type, value}", "attr")
    values = {a["name"]: a.get("value") for a in attrs}
    api = check_attrs(graph, op, values, lambda m: unsupported(m, "attr")) if graph else \
        api_attrs(op, values, lambda m: unsupported(m, "attr"))
    names = _input_names(op, graph, str(raw.get("op")), raw["input_desc"], bad)
    tensors = {}
    for j, (n, desc) in enumerate(zip(names, raw["input_desc"])):
        if n is None:  # (a graph input the API does not take: graphops.py)
            why = graph.given_but_absent_only(j) if graph and desc.get("shape") not in (None, []) else None
            if why:
                raise unsupported(f"{graph.inputs[j]} is given: {why}", f"input_desc[{j}]")
            continue
        tensors[n] = _tensor(desc, sub, True, lambda m, k: bad(m, f"input_desc[{j}].{k}"),
                             lambda m, k: unsupported(m, f"input_desc[{j}].{k}"))
    first = next((t.dtype for t in tensors.values() if t.dtype is not None), None)
    tensors.update(shaped_inputs(graph, values, first, lambda m: unsupported(m, "attr")))
    valued_inputs(graph, values, tensors, lambda m: unsupported(m, "attr"))
    if len(raw["output_desc"]) != 1:
        raise bad(f"{op.name} has one output, the case lists {len(raw['output_desc'])}", "output_desc")
    tensors[op.output.name] = _tensor(raw["output_desc"][0], sub, False, lambda m, k: bad(m, f"output_desc[0].{k}"),
                                      lambda m, k: unsupported(m, f"output_desc[0].{k}"))
    graph_reshape(graph, tensors)
    return op, case_entry(op, name, seed_for(stem, name), tensors, attributes=api)


def _input_names(op: OpSpec, graph: GraphOp | None, label: str, descs: list[dict],
                 bad: Callable[..., CaseError]) -> list[str]:
    """Our input names for the descs: by their `name` (graph or aclnn spelling), else by position."""
    ours = graph.api_inputs(tuple(t.name for t in op.inputs)) if graph else [t.name for t in op.inputs]
    theirs = list(graph.inputs) if graph else ours
    if len(descs) != len(theirs):
        raise bad(f"{len(descs)} inputs for {clip(label)}, which takes {len(theirs)} "
                  f"({', '.join(theirs)})", "input_desc")
    names = []
    for j, d in enumerate(descs):
        given = d.get("name")
        if given is None:
            names.append(ours[j])
        elif given in theirs or given in ours:
            names.append(ours[theirs.index(given)] if given in theirs else given)
        elif api_name(op, str(given)) in ours:  # (another case of an API name, or an alias: the op's `aliases`)
            names.append(api_name(op, str(given)))
        else:
            raise bad(f"{show(given)} is not an input (inputs: {', '.join(theirs)})", f"input_desc[{j}].name")
    if len(set(names)) != len(names):
        raise bad("an input is described twice", "input_desc")
    return names


def _tensor(desc: dict, sub: int, is_input: bool, bad: Callable[..., CaseError],
            unsupported: Callable[..., CaseError]) -> TensorIn:
    if any(v == "fuzz" for v in desc.values()):
        raise unsupported("'fuzz' values are not supported", "format")
    for k in ("format", "ori_format"):
        fmt = _pick(desc, k, sub)
        check_format(fmt if fmt is None else field(bad, k, text, fmt, k), lambda m: unsupported(m, k))
    if "type" not in desc or "shape" not in desc:
        raise bad("a desc needs type and shape", "type")
    t = field(bad, "type", text, _pick(desc, "type", sub), "type")
    if str(t).upper() == "UNDEFINED":
        raise unsupported("an absent optional input (UNDEFINED) is not supported", "type")
    dtype = dtype_name(t, lambda m: unsupported(m, "type"))
    shape = _pick(desc, "shape", sub)
    if isinstance(shape, int):
        shape = [shape]
    if isinstance(shape, list) and -1 in shape:
        if "typical_shape" not in desc:
            raise unsupported("a dynamic shape (-1) needs typical_shape", "shape")
        shape = _pick(desc, "typical_shape", sub)
    shape = field(bad, "shape", int_list, shape)
    ori = _pick(desc, "ori_shape", sub)
    if ori is not None and field(bad, "ori_shape", int_list, [ori] if isinstance(ori, int) else ori) != shape:
        raise unsupported(f"ori_shape {ori} differs from shape {list(shape)} (a private format's storage)", "ori_shape")
    if not is_input:
        return TensorIn(dtype, shape)
    if "value" in desc:
        return TensorIn(dtype, shape, _exact(desc["value"], shape, bad, unsupported), exact=True)
    return TensorIn(dtype, shape, _distribution(desc, sub, dtype, bad, unsupported))


def _distribution(desc: dict, sub: int, dtype: str, bad: Callable[..., CaseError],
                  unsupported: Callable[..., CaseError]) -> dict:
    """uniform -> uniform over value_range; normal -> normal with value_range as mean +- 3 std."""
    dist = _pick(desc, "data_distribute", sub)
    dist = "uniform" if dist is None else field(bad, "data_distribute", text, dist, "data_distribute")
    rng = _pick(desc, "value_range", sub)
    if rng is None:
        rng = [0.1, 1.0]  # msOpST's default range
    if not isinstance(rng, list) or len(rng) != 2:
        raise bad(f"value_range must be [min, max], got {show(rng)}", "value_range")
    lo, hi = field(bad, "value_range", numbers, rng, "value_range")
    if dist == "uniform":
        return range_fill([lo, hi], dtype)
    if dist == "normal":
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise bad(f"a normal distribution's value_range must be finite, got {show(rng)}", "value_range")
        return {"normal": [yaml_number((lo + hi) / 2), yaml_number((hi - lo) / 6)]}
    raise unsupported(f"data_distribute '{clip(dist)}' is not supported (uniform, normal)", "data_distribute")


def _exact(value: Any, shape: tuple[int, ...], bad: Callable[..., CaseError],
           unsupported: Callable[..., CaseError]) -> dict:
    """`value`: the literal tensor data (nested lists flattened, row-major); a .bin path is not supported."""
    if isinstance(value, str):
        raise unsupported(f"value from a file ({clip(value)}) is not supported; list the data or use a generator",
                          "value")
    flat: list = []

    def walk(v: Any) -> None:
        if isinstance(v, list):
            for x in v:
                walk(x)
        else:
            flat.append(v)

    walk(value)
    if len(flat) != math.prod(shape):
        raise bad(f"value holds {len(flat)} elements, shape {list(shape)} needs {math.prod(shape)}", "value")
    return {"values": [yaml_number(v) for v in field(bad, "value", numbers, flat, "value")]}
