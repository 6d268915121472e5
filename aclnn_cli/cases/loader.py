"""Case files: YAML in, validated and expanded `Case` objects out.

A file holds `op`, optional `defaults` and a list of `cases`. Lists under
dtype, shape or product expand into one case per combination. Every problem
is reported as a CaseError naming the file, the case and the key; user values
appear in messages only through `show`/`clip`, never at full length.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from ..tensor import dtypes as D
from .attributes import id_part, spans_float64
from ..errors import CaseError, UserError
from .case import Case, build_cases, exhaustive_shape, own_dtype, short_dtype
from .spec import CASE_KEYS, MAX_CASES, MAX_ID_BYTES, TOP_KEYS, Spec as _Spec
from ..ops import OpSpec, find_op
from ..files.text import clip, key_path, printable_path, read_file, show, unknown_key
from ..values.yamlsafe import parse as parse_yaml

__all__ = ["MAX_CASES", "MAX_ID_BYTES", "cases_from_doc", "collect_files",
           "load_cases", "load_file", "parse_yaml"]

def load_file(path: str | Path) -> list[Case]:
    """Load and expand one case file: our YAML, or a foreign suite an importer recognises by content."""
    from . import importers

    path = Path(path)
    where = printable_path(path)
    data = read_file(path, where)
    docs = importers.to_documents(path, data, validate=cases_from_doc)
    if docs is None:
        docs = [parse_yaml(where, data)]
    out: list[Case] = []
    for doc in docs:
        out.extend(cases_from_doc(where, doc))
    return out


def cases_from_doc(where: str, doc: Any) -> list[Case]:
    """Validate and expand one parsed case document (a YAML file, or what an importer built)."""
    if doc is None:
        raise CaseError(where, "empty case file (expected a mapping with keys op, defaults, cases)")
    if not isinstance(doc, dict):
        raise CaseError(where, "a case file is a mapping with keys op, defaults, cases")
    for key in doc:
        if key not in TOP_KEYS:
            raise CaseError(where, unknown_key(key, TOP_KEYS), key=key_path(key))
    if "op" not in doc:
        raise CaseError(where, "missing 'op'", key="op")
    if not isinstance(doc["op"], str):
        raise CaseError(where, f"'op' is an op name like aclnnSiluBackward, got {show(doc['op'])}", key="op")
    try:
        op = find_op(clip(doc["op"]))
    except KeyError as exc:
        raise CaseError(where, exc.args[0], key="op") from None
    defaults = doc.get("defaults")
    defaults = {} if defaults is None else defaults
    if not isinstance(defaults, dict):
        raise CaseError(where, f"'defaults' must be a mapping of case keys, got {show(defaults)}", key="defaults")
    for key in defaults:
        if key not in CASE_KEYS or key == "name":
            raise CaseError(where, unknown_key(key, CASE_KEYS[1:]), key=f"defaults.{key_path(key)}")
    raw_cases = doc.get("cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise CaseError(where, f"'cases' must be a non-empty list, got {show(raw_cases)}", key="cases")
    out: list[Case] = []
    for i, raw in enumerate(raw_cases):
        out.extend(_expand(where, op, defaults, raw, i, MAX_CASES - len(out)))
    seen: dict[str, str] = {}
    for c in out:
        fold = c.case_id.casefold()
        if fold in seen:
            other = seen[fold]
            how = f"the same id '{other}'" if other == c.case_id else \
                f"ids that differ only in case, '{other}' and '{c.case_id}' (one directory on macOS and Windows)"
            raise CaseError(where, f"two cases expand to {how}", case=c.name, key="name")
        seen[fold] = c.case_id
    return out


def _expand(where: str, op: OpSpec, defaults: dict, raw: Any, index: int, budget: int) -> list[Case]:
    """One raw case's expansion; at most `budget` cases (what the file has left of MAX_CASES)."""
    spec = _Spec(where, op, defaults, raw, index)
    per_tensor = {n: o["dtype"] for n, o in spec.overrides.items() if "dtype" in o}
    varying = [n for n, ds in per_tensor.items() if len(ds) > 1]
    plan = []
    for product in spec.products:
        dtypes = spec.dtypes if spec.dtypes is not None else [D.lookup(n) for n in op.products[product]]
        if len(per_tensor) == len(op.tensors):  # every tensor has its own dtype: the case-level one is moot
            dtypes = dtypes[:1]
        plan.append((product, dtypes))
    combos = spec.attribute_combos
    varying_attrs = [a.name for i, a in enumerate(op.attributes) if len({repr(c[i][1]) for c in combos}) > 1]
    declared = {a.name: a for a in op.attributes}
    total = sum(len(d) for _, d in plan) * len(spec.shapes) * math.prod(len(ds) for ds in per_tensor.values()) \
        * len(combos)
    if total > budget:
        lists = {"product": len(spec.products), "dtype": max(len(d) for _, d in plan), "shape": len(spec.shapes),
                 **{f"tensors.{n}.dtype": len(ds) for n, ds in per_tensor.items()}, "attributes": len(combos)}
        key = max(lists, key=lambda k: lists[k])
        raise spec.err(f"expands to {total} cases, more than the {MAX_CASES} a case file may hold", key)
    cases = []
    for product, dtype_list in plan:
        multi = {"dtype": len(dtype_list) > 1 or ("dtype" not in spec.raw and len(per_tensor) < len(op.tensors)),
                 "shape": len(spec.shapes) > 1, "product": len(spec.products) > 1}
        for dtype, shape, attrs in itertools.product(dtype_list, spec.shapes, combos):
            for combo in itertools.product(*(per_tensor[n] for n in per_tensor)):
                dtypes = {t.name: own_dtype(t, dtype) for t in op.tensors} | dict(zip(per_tensor, combo))
                parts = [op.key, spec.name]
                if multi["dtype"]:
                    parts.append(dtype.name)
                if varying:
                    parts.append(".".join(short_dtype(dtypes[n]) for n in varying))
                base_shape = shape if shape is not None else exhaustive_shape(spec, dtypes)
                if multi["shape"]:
                    parts.append("x".join(map(str, base_shape)) or "scalar")
                if multi["product"]:
                    parts.append(product)
                given = dict(attrs)
                parts += [id_part(n, given[n], spans_float64(declared[n])) for n in varying_attrs]
                cases.extend(build_cases(spec, product, dtypes, base_shape, parts, attrs))
                if len(cases) > budget:  # only 'contract: true' multiplies past the estimate
                    raise spec.err(f"expands to more than the {MAX_CASES} cases a case file may hold", "contract")
    return cases


def collect_files(paths: list[str | Path]) -> list[Path]:
    """Case files from files and directories (directories: every *.yaml / *.yml, and every file an
    importer recognises by content, sorted). Only regular files: a FIFO or device would block or never end."""
    from . import importers  # (they read cases with this module)

    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(q for q in p.rglob("*") if q.is_file() and (q.suffix in (".yaml", ".yml")
                                                                           or importers.recognises(q))))
        elif p.is_file():
            files.append(p)
        elif p.exists():
            raise UserError("not a regular file or directory (device, FIFO or socket)", where=printable_path(p))
        else:
            raise UserError("no such file or directory", where=printable_path(p))
    if not files:
        raise UserError("no case files (*.yaml) found", where=", ".join(printable_path(Path(p)) for p in paths))
    return files


def load_cases(paths: list[str | Path]) -> list[Case]:
    """Every case of every file, expanded; case ids must be unique across files (ignoring case: one
    directory on macOS and Windows)."""
    cases: list[Case] = []
    owner: dict[str, tuple[str, str]] = {}
    for f in collect_files(paths):
        for c in load_file(f):
            fold = c.case_id.casefold()
            if fold in owner:
                other, where = owner[fold]
                same = "" if other == c.case_id else f" (as '{other}', differing only in case)"
                raise CaseError(printable_path(f), f"case id '{c.case_id}' also comes from {where}{same}",
                                case=c.name, key="name")
            owner[fold] = (c.case_id, printable_path(f))
            cases.append(c)
    return cases
