"""TTK CSV (kernel mode: graph ops; aclnn mode: aclnn APIs) -> our case documents.

Kernel mode has one row per case with per-input tuples: op_name, input_dtypes, input_shapes,
input_formats, input_data_ranges, output_*, attributes, soc_series... aclnn mode lists every tensor
of the API in signature order (tensor_view_shapes, tensor_dtypes, tensor_formats, strides, offsets,
storage shapes) with output_tensor_indexes naming the outputs. Cells hold Python literals
(ttkcells.literal). Every cell is checked for its type and range before it is used.
"""

from __future__ import annotations

import csv
import math
from typing import Any

from ...errors import CaseError
from ...ops import OpSpec
from ...ops.declcheck import describe
from .common import (Collector, GraphOp, api_attrs, channel_ops, channels_view, check_attrs, check_format, dtype_name,
                     errors, graph_reshape, product_for, resolve_op, safe_name, shaped_inputs, show, valued_inputs)
from .ranges import range_fill, seed_for
from .entry import TensorIn, case_entry
from .fields import field, int_in, int_list, numbers, text
from .ttkcells import Cells, all_none, check_header, check_row, read_table

NAME = "TTK CSV"
KERNEL = ("testcase_name", "op_name", "input_dtypes", "input_shapes", "input_formats", "input_ori_shapes",
          "input_ori_formats", "output_dtypes", "output_shapes", "output_formats", "output_ori_shapes",
          "output_ori_formats", "attributes", "input_data_ranges")
ACLNN = ("testcase_name", "api_name", "tensor_view_shapes", "tensor_dtypes", "tensor_formats", "tensor_storage_shapes",
         "tensor_view_offsets", "tensor_view_strides", "output_tensor_indexes", "attributes", "input_data_ranges")
# Columns that only steer TTK's own run or its accuracy check: read past (docs/importing.md).
IGNORED = ("network_name", "precision_tolerances", "absolute_precision", "remark", "priority", "dump_file_prefix")
# Columns naming features we cannot honour: fine when empty, unsupported otherwise.
MUST_BE_EMPTY = ("output_inplace_indexes", "output_shape_unknown_indexes", "manual_input_binaries",
                 "manual_golden_binaries", "manual_tensor_binaries", "scalar_dtypes", "scalar_data_ranges")
OTHER = ("soc_series", "is_enabled")
ENABLED = {"": True, "1": True, "true": True, "0": False, "false": False}  # ops-nn writes 1, True, TRUE, 0, FALSE


def sniff(head: bytes) -> bool:
    line = head.decode("utf-8-sig", errors="replace").splitlines()[:1]
    if not line:
        return False
    cols = {c.strip() for c in next(csv.reader(line), [])}
    return "testcase_name" in cols and bool(cols & {"op_name", "api_name"})


def read(where: str, basename: str, data: bytes, out: Collector) -> None:
    """Every row of one TTK file into `out`. Each row has a testcase_name, unique in the file."""
    table = read_table(where, data)
    if not table.rows:
        raise CaseError(where, "a TTK file with a header but no test cases")
    aclnn = "api_name" in table.header
    check_header(where, table.header, (ACLNN if aclnn else KERNEL) + IGNORED + MUST_BE_EMPTY + OTHER)
    stem = basename.rsplit(".", 1)[0]
    seen: dict[str, int] = {}
    for line_no, cells in table.rows:
        row = check_row(where, line_no, table.header, cells)
        label = row.get("testcase_name", "")
        if not label:
            raise CaseError(where, f"line {line_no}: testcase_name is empty (it names and seeds the case)",
                            key="testcase_name")
        if label in seen:
            raise CaseError(where, f"line {line_no}: testcase_name is also line {seen[label]}'s (it names and seeds "
                            "the case)", case=safe_name(label), key="testcase_name")
        seen[label] = line_no
        name = safe_name(label)
        out.add(name, lambda row=row, name=name: _case(where, stem, row, name, aclnn))


def _case(where: str, stem: str, row: dict, name: str, aclnn: bool) -> tuple[OpSpec, dict]:
    bad, unsupported = errors(where, name)
    cell = Cells(row, bad)
    enabled = row.get("is_enabled", "").lower()
    if enabled not in ENABLED:
        raise bad(f"is_enabled must be 1, 0, True, False or empty, got {show(row['is_enabled'])}", "is_enabled")
    if not ENABLED[enabled]:
        raise unsupported("is_enabled is False (TTK does not run this case)", "is_enabled")
    for col in MUST_BE_EMPTY:
        value = cell.literal(col)
        if value not in (None, (), []) and not all_none(value):
            raise unsupported(f"{col} {show(row[col])} is not supported", col)
    products = tuple(product_for(s, lambda m: unsupported(m, "soc_series")) for s in cell.tuple("soc_series"))
    op, graph = resolve_op(row.get("api_name" if aclnn else "op_name"),
                           lambda m: unsupported(m, "api_name" if aclnn else "op_name"))
    raw_attrs = cell.literal("attributes") or {}
    if not isinstance(raw_attrs, dict):
        raise bad(f"attributes must be a dict literal, got {show(row['attributes'])}", "attributes")
    if aclnn:
        attrs = api_attrs(op, raw_attrs, lambda m: unsupported(m, "attributes"))
        tensors = _aclnn_tensors(op, cell, bad, unsupported)
    else:
        attrs = check_attrs(graph, op, raw_attrs, lambda m: unsupported(m, "attributes"))
        tensors = _kernel_tensors(op, graph, cell, bad, unsupported, raw_attrs)
        first = next((t.dtype for t in tensors.values() if t.dtype is not None), None)
        tensors.update(shaped_inputs(graph, raw_attrs, first, lambda m: unsupported(m, "attributes")))
        valued_inputs(graph, raw_attrs, tensors, lambda m: unsupported(m, "attributes"))
        if graph and graph.derive:
            attrs = {**_derived(graph, {n: t.shape for n, t in tensors.items() if t.shape is not None}, bad), **attrs}
    return op, case_entry(op, name, seed_for(stem, row.get("testcase_name") or name), tensors, products, attrs)


def _derived(graph: GraphOp, shapes: dict, bad) -> dict:
    """The graph op's derived API attributes; a user op's `derive` that fails is one line, not a traceback."""
    try:
        derived = graph.derive(shapes)
    except Exception as exc:  # (a user op's function: ops/graphops.py)
        raise bad(f"the graph op's derive({show(shapes)}) failed: {describe(exc, 200)}", "op_name") from None
    if not isinstance(derived, dict):
        raise bad(f"the graph op's derive returned {show(derived)}, not a dict of API attributes", "op_name")
    return derived


def _kernel_tensors(op: OpSpec, graph: GraphOp | None, cell: Cells, bad, unsupported,
                    raw_attrs: dict | None = None) -> dict[str, TensorIn]:
    """Kernel mode: graph inputs in order, each the API input graphops.py maps it to (dy, x -> gradOutput, self;
    SoftmaxGrad's softmax -> output; by the case's graph attributes where the op says: GraphOp.when); an optional
    API input the graph op lacks is null; then the outputs (a graph output the API has not: read past)."""
    n_in = len(graph.inputs) if graph else len(op.inputs)
    api_ins = tuple(t.name for t in op.inputs)
    names = graph.api_inputs(api_ins, raw_attrs) if graph else list(api_ins)
    dtypes = cell.per_tensor("input_dtypes", n_in, one_for_all=True, required=True)
    shapes = cell.per_tensor("input_shapes", n_in, fallback="input_ori_shapes", required=True)
    ori = cell.per_tensor("input_ori_shapes", n_in, fallback="input_shapes")
    for col in ("input_formats", "input_ori_formats", "output_formats", "output_ori_formats"):
        for fmt in cell.tuple(col):
            check_format(_word(fmt, bad, col, "a format"), lambda m: unsupported(m, col))
    ranges = cell.ranges(n_in)
    in_formats = _formats(op, cell, "input", n_in, bad, unsupported)
    tensors = {}
    for i, n in enumerate(names):
        if n is None:  # (a graph input the API does not take: graphops.py)
            why = graph.given_but_absent_only(i) if shapes[i] is not None else None
            if why:
                raise unsupported(f"{graph.inputs[i]} is given: {why}", "input_shapes")
            continue
        if shapes[i] is None and any(t.name == n and t.optional for t in op.inputs):
            continue  # (an optional input written None, BinaryCrossEntropyGrad's weight: null, below)
        shape = field(bad, "input_shapes", int_list, shapes[i])
        if ori[i] is not None and field(bad, "input_ori_shapes", int_list, ori[i]) != shape:
            raise unsupported(f"input_shapes {list(shape)} differ from input_ori_shapes {list(ori[i])}", "input_shapes")
        dtype = dtype_name(_word(dtypes[i], bad, "input_dtypes", "a dtype"), lambda m: unsupported(m, "input_dtypes"))
        shape, strides = channels_view(op, n, in_formats[i], shape, None, lambda m: unsupported(m, "input_formats"))
        tensors[n] = TensorIn(dtype, shape, _fill(ranges[i], dtype, bad), _strided(strides))
    for t in op.inputs:
        if t.name not in tensors and t.optional:  # (LayerNormGradV3 has no beta: biasOptional is null)
            tensors[t.name] = TensorIn(null=True)
    outs = graph.api_outputs(tuple(t.name for t in op.outputs)) if graph else [t.name for t in op.outputs]
    out_dtypes = cell.per_tensor("output_dtypes", len(outs), one_for_all=True)
    out_shapes = cell.per_tensor("output_shapes", len(outs), "output_ori_shapes")
    out_formats = _formats(op, cell, "output", len(outs), bad, unsupported)
    for i, n in enumerate(outs):
        if n is None:  # (BatchNormGrad's reserve_space_4 and 5: outputs the API has not)
            continue
        out = TensorIn()
        if out_dtypes[i] is not None:
            out.dtype = dtype_name(_word(out_dtypes[i], bad, "output_dtypes", "a dtype"),
                                   lambda m: unsupported(m, "output_dtypes"))
        if out_shapes[i] is not None:
            shape = field(bad, "output_shapes", int_list, out_shapes[i])
            out.shape, strides = channels_view(op, n, out_formats[i], shape, None,
                                               lambda m: unsupported(m, "output_formats"))
            out.layout = _strided(strides)
        tensors[n] = out
    graph_reshape(graph, tensors)
    return tensors


def _formats(op: OpSpec, cell: Cells, side: str, n: int, bad, unsupported) -> list:
    """A channels op's per-tensor formats of one side (inputs, outputs), where they place the channel
    (common.channels_view); the same in the `_ori_` column when it is given. Other ops: None each (a plain format
    is a row-major array of the shape, checked above)."""
    if not channel_ops(op):
        return [None] * n
    col, ori_col = f"{side}_formats", f"{side}_ori_formats"
    fmts = [_word(f, bad, col, "a format") for f in cell.per_tensor(col, n, fallback=ori_col, one_for_all=True)]
    ori = [_word(f, bad, ori_col, "a format") for f in cell.per_tensor(ori_col, n, fallback=col, one_for_all=True)]
    for f, o in zip(fmts, ori):
        if f is not None and o is not None and f.upper() != o.upper():
            raise unsupported(f"{col} {show(f)} differ from {ori_col} {show(o)}", col)
    return fmts


def _strided(strides: list[int] | None) -> dict | None:
    return None if strides is None else {"strides": strides}


def _aclnn_tensors(op: OpSpec, cell: Cells, bad, unsupported) -> dict[str, TensorIn]:
    """aclnn mode: every tensor of the signature in order; a None view shape is a null tensor."""
    n = len(op.tensors)
    shapes = cell.per_tensor("tensor_view_shapes", n, required=True)
    dtypes = cell.per_tensor("tensor_dtypes", n, one_for_all=True, required=True)
    formats = cell.per_tensor("tensor_formats", n, one_for_all=True)
    storage = cell.per_tensor("tensor_storage_shapes", n)
    offsets = cell.per_tensor("tensor_view_offsets", n)
    strides = cell.per_tensor("tensor_view_strides", n)
    outputs = tuple(field(bad, "output_tensor_indexes", int_in, i, "an output index", -n, n - 1) % n
                    for i in cell.tuple("output_tensor_indexes"))  # ops-nn writes (-1,): the last tensor
    declared = tuple(i for i, t in enumerate(op.tensors) if t.role == "output")
    if outputs and outputs != declared:
        raise unsupported(f"output_tensor_indexes {list(outputs)} do not match {op.name}'s outputs {list(declared)}",
                          "output_tensor_indexes")
    ranges = cell.ranges(n)
    tensors = {}
    for i, spec in enumerate(op.tensors):
        fmt = _word(formats[i], bad, "tensor_formats", "a format")
        check_format(fmt, lambda m: unsupported(m, "tensor_formats"))
        dtype = (dtype_name(_word(dtypes[i], bad, "tensor_dtypes", "a dtype"), lambda m: unsupported(m, "tensor_dtypes"))
                 if dtypes[i] is not None else None)
        if shapes[i] is None:
            tensors[spec.name] = TensorIn(dtype, None, null=True)
            continue
        shape = field(bad, "tensor_view_shapes", int_list, shapes[i])
        layout = {}
        if strides[i] is not None:
            layout["strides"] = list(field(bad, "tensor_view_strides", int_list, strides[i], "strides"))
            if len(layout["strides"]) != len(shape):
                raise bad(f"strides {layout['strides']} for the {len(shape)}-d view shape {list(shape)}",
                          "tensor_view_strides")
        shape, moved = channels_view(op, spec.name, fmt, shape, layout.get("strides"),
                                     lambda m: unsupported(m, "tensor_formats"))
        if moved is not None:
            layout["strides"] = moved
        if offsets[i] not in (None, 0):
            layout["offset"] = field(bad, "tensor_view_offsets", int_in, offsets[i], "an offset")
        if storage[i] is not None:
            dims = field(bad, "tensor_storage_shapes", int_list, storage[i], "storage shape")
            layout["storage_shape"] = [math.prod(dims)]
        fill = _fill(ranges[i], dtype or "float32", bad) if spec.role == "input" else None
        tensors[spec.name] = TensorIn(dtype, shape, fill, layout or None)
    return tensors


def _word(value: Any, bad, col: str, what: str) -> str | None:
    """A dtype or format entry: a string (None: not given)."""
    return None if value is None else field(bad, col, text, value, what)


def _fill(rng: tuple | None, dtype: str, bad) -> dict | None:
    """One input's range: None -> the op's default generator; else ranges.range_fill."""
    if rng is None:
        return None
    return range_fill(field(bad, "input_data_ranges", numbers, rng, "a range"), dtype)
