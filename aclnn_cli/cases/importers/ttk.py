"""TTK CSV (kernel mode: graph ops; aclnn mode: aclnn APIs) -> our case documents.

Kernel mode has one row per case with per-input tuples: op_name, input_dtypes, input_shapes,
input_formats, input_data_ranges, output_*, attributes, soc_series... aclnn mode lists every tensor
of the API in signature order (tensor_view_shapes, tensor_dtypes, tensor_formats, strides, offsets,
storage shapes) with output_tensor_indexes naming the outputs. Cells hold Python literals such as
"((27, 24), (27, 24))" or "((-1, 1, nan, -0.0, inf),)", parsed from their syntax tree, never evaluated.
"""

from __future__ import annotations

import ast
import csv
import io
import math
from typing import Any, Callable

from ...errors import CaseError
from ...ops import OpSpec
from .common import (Collector, GraphOp, TensorIn, as_number, case_entry, check_attrs, check_format, dtype_name, errors,
                     product_for, range_fill, resolve_op, safe_name, seed_for, shape_of, show, clip)

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


def sniff(head: bytes) -> bool:
    line = head.decode("utf-8-sig", errors="replace").splitlines()[:1]
    if not line:
        return False
    cols = {c.strip() for c in next(csv.reader(line), [])}
    return "testcase_name" in cols and bool(cols & {"op_name", "api_name"})


def read(where: str, basename: str, data: bytes, out: Collector) -> None:
    """Every row of one TTK file into `out`."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CaseError(where, f"not UTF-8 text (byte {exc.start})") from None
    rows = list(csv.reader(io.StringIO(text, newline="")))
    header = [c.strip() for c in rows[0]]
    if not any(any(c.strip() for c in cells) for cells in rows[1:]):
        raise CaseError(where, "a TTK file with a header but no test cases")
    aclnn = "api_name" in header
    known = (ACLNN if aclnn else KERNEL) + IGNORED + MUST_BE_EMPTY + OTHER
    for col in header:
        if col and col not in known:
            raise CaseError(where, f"unknown TTK column '{clip(col)}' (known: {', '.join(known)})", key=clip(col))
    stem = basename.rsplit(".", 1)[0]
    for line_no, cells in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) > len(header):
            raise CaseError(where, f"line {line_no} has {len(cells)} cells for {len(header)} columns")
        row = dict(zip(header, (c.strip() for c in cells)))
        label = row.get("testcase_name") or f"{stem}-line{line_no}"
        name = safe_name(label)
        out.add(name, lambda row=row, name=name: _case(where, stem, row, name, aclnn))


def _case(where: str, stem: str, row: dict, name: str, aclnn: bool) -> tuple[OpSpec, dict]:
    bad, unsupported = errors(where, name)
    cell = Cells(row, bad)
    if str(row.get("is_enabled", "")).lower() in ("0", "false"):
        raise unsupported("is_enabled is False (TTK does not run this case)", "is_enabled")
    for col in MUST_BE_EMPTY:
        value = cell.literal(col)
        if value not in (None, (), []) and not _all_none(value):
            raise unsupported(f"{col} {show(row[col])} is not supported", col)
    products = tuple(product_for(s, lambda m: unsupported(m, "soc_series")) for s in cell.tuple("soc_series"))
    op, graph = resolve_op(row.get("api_name" if aclnn else "op_name"),
                           lambda m: unsupported(m, "api_name" if aclnn else "op_name"))
    attrs = cell.literal("attributes") or {}
    if not isinstance(attrs, dict):
        raise bad(f"attributes must be a dict literal, got {show(row['attributes'])}", "attributes")
    check_attrs(graph, op, attrs, lambda m: unsupported(m, "attributes"))
    if aclnn:
        tensors = _aclnn_tensors(op, cell, bad, unsupported)
    else:
        tensors = _kernel_tensors(op, graph, cell, bad, unsupported)
    return op, case_entry(op, name, seed_for(stem, row.get("testcase_name") or name), tensors, products)


def _kernel_tensors(op: OpSpec, graph: GraphOp | None, cell: "Cells", bad, unsupported) -> dict[str, TensorIn]:
    """Kernel mode: graph inputs in order (dy, x / grads, features) -> gradOutput, self; then the output."""
    n_in = len(graph.inputs) if graph else len(op.inputs)
    names = [t.name for t in op.inputs][:n_in]
    dtypes = cell.per_tensor("input_dtypes", n_in)
    shapes = cell.per_tensor("input_shapes", n_in, fallback="input_ori_shapes")
    ori = cell.per_tensor("input_ori_shapes", n_in, fallback="input_shapes")
    for col in ("input_formats", "input_ori_formats", "output_formats", "output_ori_formats"):
        for fmt in cell.tuple(col):
            check_format(fmt, lambda m: unsupported(m, col))
    ranges = cell.ranges(n_in)
    tensors = {}
    for i, n in enumerate(names):
        shape = shape_of(shapes[i], bad, "input_shapes")
        if ori[i] is not None and shape_of(ori[i], bad, "input_ori_shapes") != shape:
            raise unsupported(f"input_shapes {list(shape)} differ from input_ori_shapes {list(ori[i])}", "input_shapes")
        dtype = dtype_name(dtypes[i], lambda m: unsupported(m, "input_dtypes"))
        tensors[n] = TensorIn(dtype, shape, _fill(ranges[i], dtype, bad))
    out_dtypes = cell.per_tensor("output_dtypes", 1)
    out_shapes = cell.per_tensor("output_shapes", 1, "output_ori_shapes")
    out = TensorIn()
    if out_dtypes[0] is not None:
        out.dtype = dtype_name(out_dtypes[0], lambda m: unsupported(m, "output_dtypes"))
    if out_shapes[0] is not None:
        out.shape = shape_of(out_shapes[0], bad, "output_shapes")
    tensors[op.output.name] = out
    return tensors


def _aclnn_tensors(op: OpSpec, cell: "Cells", bad, unsupported) -> dict[str, TensorIn]:
    """aclnn mode: every tensor of the signature in order; a None view shape is a null tensor."""
    n = len(op.tensors)
    shapes = cell.per_tensor("tensor_view_shapes", n)
    dtypes = cell.per_tensor("tensor_dtypes", n)
    formats = cell.per_tensor("tensor_formats", n)
    storage = cell.per_tensor("tensor_storage_shapes", n)
    offsets = cell.per_tensor("tensor_view_offsets", n)
    strides = cell.per_tensor("tensor_view_strides", n)
    outputs = tuple(cell.tuple("output_tensor_indexes"))
    declared = tuple(i for i, t in enumerate(op.tensors) if t.role == "output")
    if outputs and outputs != declared:
        raise unsupported(f"output_tensor_indexes {list(outputs)} do not match {op.name}'s outputs {list(declared)}",
                          "output_tensor_indexes")
    ranges = cell.ranges(n)
    tensors = {}
    for i, spec in enumerate(op.tensors):
        check_format(formats[i], lambda m: unsupported(m, "tensor_formats"))
        dtype = dtype_name(dtypes[i], lambda m: unsupported(m, "tensor_dtypes")) if dtypes[i] is not None else None
        if shapes[i] is None:
            tensors[spec.name] = TensorIn(dtype, None, null=True)
            continue
        shape = shape_of(shapes[i], bad, "tensor_view_shapes")
        layout = {}
        if strides[i] is not None:
            layout["strides"] = list(shape_of(strides[i], bad, "tensor_view_strides"))
        if offsets[i] not in (None, 0):
            layout["offset"] = int(as_number(offsets[i]))
        if storage[i] is not None:
            layout["storage_shape"] = [math.prod(shape_of(storage[i], bad, "tensor_storage_shapes"))]
        fill = _fill(ranges[i], dtype or "float32", bad) if spec.role == "input" else None
        tensors[spec.name] = TensorIn(dtype, shape, fill, layout or None)
    return tensors


def _fill(rng: tuple | None, dtype: str, bad) -> dict | None:
    """One input's range: None -> the op's default generator; else common.range_fill."""
    if rng is None:
        return None
    try:
        return range_fill([as_number(v) for v in rng], dtype)
    except ValueError as exc:
        raise bad(f"input_data_ranges: {exc}", "input_data_ranges") from None


def _all_none(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(v is None or _all_none(v) for v in value)


class Cells:
    """Typed access to one row's cells, each error naming the column."""

    def __init__(self, row: dict, bad: Callable[..., CaseError]) -> None:
        self.row, self.bad = row, bad

    def literal(self, col: str) -> Any:
        text = self.row.get(col, "")
        if not text:
            return None
        try:
            return literal(text)
        except ValueError as exc:
            raise self.bad(f"cannot read {show(text)}: {exc}", col) from None

    def tuple(self, col: str) -> list:
        value = self.literal(col)
        if value is None:
            return []
        return list(value) if isinstance(value, (tuple, list)) else [value]

    def per_tensor(self, col: str, n: int, fallback: str | None = None) -> list:
        """n entries: one per tensor, or a single entry meaning every tensor; [None] * n if empty."""
        values = self.tuple(col) or (self.tuple(fallback) if fallback else [])
        if not values:
            return [None] * n
        if col.endswith("shapes") and values and not isinstance(values[0], (tuple, list, type(None))):
            values = [tuple(values)]  # a single shape written without the outer tuple
        if len(values) == 1 and n > 1:
            values = values * n
        if len(values) != n:
            raise self.bad(f"{len(values)} entries for {n} tensors", col)
        return values

    def ranges(self, n: int) -> list:
        """input_data_ranges as n entries (None: the op's default). One range (with or without the outer
        tuple) applies to every input; (None, None) is no range."""
        value = self.literal("input_data_ranges")
        if value is None:
            return [None] * n
        if not isinstance(value, (tuple, list)):
            raise self.bad(f"expected a tuple of ranges, got {show(value)}", "input_data_ranges")
        if value and not any(isinstance(v, (tuple, list)) for v in value) and any(v is not None for v in value):
            value = (value,)
        entries = [None if v is None or _all_none(v) else v for v in value]
        if len(entries) == 1:
            return entries * n
        if len(entries) > n:
            raise self.bad(f"{len(entries)} ranges for {n} tensors", "input_data_ranges")
        return entries + [None] * (n - len(entries))


_NAMED = {"nan": math.nan, "inf": math.inf, "infinity": math.inf, "None": None, "True": True, "False": False}


def literal(text: str) -> Any:
    """A Python literal (numbers, strings, None, booleans, tuples, lists, dicts; nan and inf as names).

    Parsed into a syntax tree and converted node by node: nothing is evaluated."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"not a literal ({exc.msg})") from None
    return _node(tree)


def _node(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
        return node.value
    if isinstance(node, ast.Name) and (node.id in _NAMED or node.id.lower() in _NAMED):
        return _NAMED.get(node.id, _NAMED.get(node.id.lower()))
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_node(e) for e in node.elts)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_node(k): _node(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _node(node.operand)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v if isinstance(node.op, ast.USub) else v
    raise ValueError(f"unexpected {ast.dump(node)[:40]}")
