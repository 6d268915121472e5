"""Structured fuzzing of the three foreign-suite readers (ATK JSON, TTK CSV, msOpST JSON).

Each target builds a near-valid document (the shape ops-nn's suites and CANN's documentation have),
puts hostile leaves into a few of its fields (wrong types, huge or negative integers, NaN, infinities,
long or odd-unicode strings, deep nesting, numbers of thousands of digits), sometimes duplicates a key
or a column, and runs `convert`'s whole pipeline on it (bounded read, import, our validation, YAML).
The only allowed outcomes are a result or our one-line UserError.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

from aclnn_cli.cases.importers.cli import plan

from fuzzing import allowed_outcome, fuzz_target, scratch

LEAF = "@@LEAF@@"
ODD = st.sampled_from(["", " ", "\u202e", "\ud800", "\x00", "\n", "../../x", "ND", "FRACTAL_NZ", "fp16", "float",
                       "bf16", "nan", "inf", "-inf", "null", "True", "é" * 70, "x" * 5000])
PY = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([0, 1, -1, 2**31, 2**63 - 1, 2**63, 10**30]) | st.floats() | ODD | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8) | ODD, inner, max_size=3),
    max_leaves=8)
# JSON text no json.dumps of a Python value writes: deep nesting, huge numbers, constants, lone escapes
RAW = st.sampled_from(["[" * 100 + "]" * 100, "[" * 5000 + "]" * 5000, "9" * 5000, "-" + "9" * 41, "1e999",
                       "NaN", "-Infinity", '"\\ud800"', "[[[[1]]]]", '{"name": "nd", "mean": [1, 0], "std": [-1, 2]}',
                       "[" * 70 + "1" + "]" * 70, "0.1e-99999"])
FRAGMENT = PY.map(lambda v: json.dumps(v, allow_nan=True)) | RAW


def _mutate_json(doc: object, paths: list[list], fragments: list[str], dup_key: str | None) -> bytes:
    """doc with the leaf at each path replaced by a JSON fragment (text), and maybe one key doubled."""
    for path in paths:
        node = doc
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = LEAF
    text = json.dumps(doc)
    for fragment in fragments:
        text = text.replace(json.dumps(LEAF), fragment, 1)
    if dup_key:
        text = text.replace(f'"{dup_key}": ', f'"{dup_key}": 1, "{dup_key}": ', 1)
    return text.encode()


def _convert(name: str, data: bytes) -> None:
    with scratch() as d:
        src = d / name
        src.write_bytes(data)
        for skip in (False, True):
            try:
                plan((src,), d / "out", skip_unsupported=skip)
            except Exception as exc:  # noqa: BLE001 - the point: only our one-line refusal may come out
                allowed_outcome(exc)


def _atk_case(i: int) -> dict:
    return {"id": i, "name": "torch_silu_backward", "aclnn_name": "aclnnSiluBackward", "api_type": "aclnn_silu_backward",
            "standard": {"acc": "single_bm"}, "is_boundary": False,
            "inputs": [{"name": "gradOutput", "type": "tensor", "required": True, "dtype": "fp16", "shape": [2, 3],
                        "range_values": [-1, 1], "backward": True, "align_32B": None, "outlier_values": None},
                       {"name": "self", "type": "tensor", "required": True, "dtype": "fp16", "shape": [2, 3],
                        "range_values": {"name": "nd", "mean": [-1, 1], "std": [1, 2]}, "backward": True,
                        "align_32B": None, "outlier_values": None}]}


ATK_PATHS = st.sampled_from([["id"], ["aclnn_name"], ["inputs"], ["name"], ["standard"], ["is_boundary"],
                             ["inputs", 0], ["inputs", 0, "name"], ["inputs", 0, "dtype"], ["inputs", 0, "shape"],
                             ["inputs", 0, "shape", 0], ["inputs", 0, "range_values"], ["inputs", 0, "range_values", 1],
                             ["inputs", 1, "range_values", "mean"], ["inputs", 1, "range_values", "std", 0],
                             ["inputs", 0, "type"], ["inputs", 0, "align_32B"], ["inputs", 0, "outlier_values"],
                             ["inputs", 1, "format"], ["inputs", 1, "required"], ["colour"]])


@fuzz_target(n=st.integers(1, 3), paths=st.lists(st.tuples(st.integers(0, 2), ATK_PATHS), max_size=3),
             fragments=st.lists(FRAGMENT, min_size=3, max_size=3),
             dup=st.sampled_from([None, None, "id", "shape", "range_values", "aclnn_name"]), wrap=st.booleans())
def test_fuzz_atk_json(n, paths, fragments, dup, wrap):
    doc = [_atk_case(i) for i in range(n)]
    chosen = [[min(i, n - 1), *p] for i, p in paths]
    unique = [p for k, p in enumerate(chosen) if p not in chosen[:k] and not any(p[:len(q)] == q for q in chosen[:k])]
    data = _mutate_json(doc if wrap or n > 1 else doc[0], unique if wrap or n > 1 else [p[1:] for p in unique],
                        fragments, dup)
    _convert("atk_suite.json", data)


def _ms_case(i: int) -> dict:
    desc = {"name": "dy", "format": ["ND"], "type": ["float16", "float"], "shape": [12, 32],
            "data_distribute": ["uniform"], "value_range": [[-2.0, 2.0]]}
    return {"case_name": f"Test_SiluGrad_{i:03d}", "op": "SiluGrad", "calc_expect_func_file": "/x/g.py:calc",
            "input_desc": [desc, {**desc, "name": "x", "shape": [[12, 32], [12, 32]]}],
            "output_desc": [{"format": ["ND"], "type": ["float16", "float"], "shape": [12, 32]}],
            "attr": [], "expect": "success"}


MS_PATHS = st.sampled_from([["case_name"], ["op"], ["input_desc"], ["output_desc"], ["attr"], ["expect"],
                            ["fuzz_case_num"], ["error_threshold"], ["input_desc", 0], ["input_desc", 0, "name"],
                            ["input_desc", 0, "type"], ["input_desc", 0, "type", 1], ["input_desc", 0, "shape"],
                            ["input_desc", 0, "shape", 1], ["input_desc", 1, "shape", 0], ["input_desc", 0, "format"],
                            ["input_desc", 0, "value_range", 0], ["input_desc", 0, "value_range", 0, 1],
                            ["input_desc", 0, "data_distribute"], ["input_desc", 1, "value"], ["input_desc", 1, "ori_shape"],
                            ["input_desc", 1, "typical_shape"], ["output_desc", 0, "shape"], ["output_desc", 0, "type"]])


@fuzz_target(n=st.integers(1, 3), paths=st.lists(st.tuples(st.integers(0, 2), MS_PATHS), max_size=3),
             fragments=st.lists(FRAGMENT, min_size=3, max_size=3),
             dup=st.sampled_from([None, None, "case_name", "shape", "type", "op"]))
def test_fuzz_msopst_json(n, paths, fragments, dup):
    doc = [_ms_case(i) for i in range(n)]
    chosen = [[min(i, n - 1), *p] for i, p in paths]
    unique = [p for k, p in enumerate(chosen) if not any(p[:len(q)] == q for q in chosen[:k])]
    _convert("msopst_suite.json", _mutate_json(doc, unique, fragments, dup))


KERNEL_COLS = ["testcase_name", "network_name", "op_name", "input_shapes", "input_dtypes", "input_formats",
               "output_shapes", "output_dtypes", "output_formats", "input_ori_shapes", "input_ori_formats",
               "attributes", "input_data_ranges", "precision_tolerances", "is_enabled", "soc_series",
               "output_inplace_indexes"]
KERNEL_ROW = ["silu_grad_{i}", "Pnet", "silu_grad", "((7, 3), (7, 3))", "('float16', 'float16')", "('ND', 'ND')",
              "((7, 3),)", "('float16',)", "('ND',)", "((7, 3), (7, 3))", "('ND',)", "{}", "((-1, 1, nan, -0.0, inf),)",
              "((0.001, 0.001),)", "1", "('Ascend910B',)", "()"]
ACLNN_COLS = ["testcase_name", "api_name", "tensor_view_shapes", "tensor_dtypes", "tensor_formats",
              "tensor_storage_shapes", "tensor_view_offsets", "tensor_view_strides", "output_tensor_indexes",
              "attributes", "input_data_ranges", "soc_series", "is_enabled"]
ACLNN_ROW = ["aclnn_silu_{i}", "aclnnSiluBackward", "((3,4),(3,4),(3,4))", "('float32','float32','float32')", "('ND',)",
             "((20,),None,None)", "(2,0,0)", "((6,1),None,None)", "(-1,)", "{}", "((-1,1),)", "('Ascend950',)", "TRUE"]
CELL = (st.sampled_from(["", "()", "None", "(None, None)", "((1e999,),)", "(" * 40 + ")" * 40, "9" * 5000,
                         "-" * 200 + "1", "__import__('os')", "{**x}", "((7,), (7,)", "(-1,)", "(5,)", "((-5, 5),)",
                         "('float16',)", "('FRACTAL_NZ',)", "((2**63,1),None,None)", "((" + "9" * 30 + ",1),None,None)",
                         "(nan,0,0)", "('a',0,0)", "maybe", "0", "FALSE", "{'alpha': 0.2}", "{(1,): {}}", "x" * 70_000,
                         '"', "a,b", "\x00", "\u202e", "((0.0, 1e-45),)", "((3, 4), (3, 4))", "((1,)*3,)"])
        | st.text(max_size=30) | PY.map(repr))


@fuzz_target(aclnn=st.booleans(), n=st.integers(1, 3),
             edits=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 16), CELL), max_size=4),
             header=st.sampled_from([None, "dup", "drop", "unknown", "blank", "short_row", "long_row", "crlf", "bom"]))
def test_fuzz_ttk_csv(aclnn, n, edits, header):
    cols, base = (ACLNN_COLS, ACLNN_ROW) if aclnn else (KERNEL_COLS, KERNEL_ROW)
    cols = list(cols)
    rows = [[c.replace("{i}", str(i)) for c in base] for i in range(n)]
    for r, c, value in edits:
        rows[min(r, n - 1)][c % len(cols)] = value
    if header == "dup":
        cols[-1] = cols[3]
    elif header == "drop":
        cols, rows = cols[:-1], [row[:-1] for row in rows]
    elif header == "unknown":
        cols[-1] = "colour"
    elif header == "blank":
        cols[-1] = ""
    elif header == "short_row":
        rows[0] = rows[0][:-1]
    elif header == "long_row":
        rows[0] = rows[0] + ["extra"]

    def line(cells: list[str]) -> str:
        return ",".join('"' + c.replace('"', '""') + '"' if any(x in c for x in ',"\n') else c for c in cells)

    sep = "\r\n" if header == "crlf" else "\n"
    text = sep.join([line(cols)] + [line(r) for r in rows]) + sep
    data = text.encode("utf-8", "surrogatepass")
    _convert("ttk_suite.csv", (b"\xef\xbb\xbf" if header == "bom" else b"") + data)
