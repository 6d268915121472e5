"""The package layering: every import of every aclnn_cli module (function-level ones included) points
down or sideways in LAYERS, and no packages import each other in a circle.

A unit is a package directly under aclnn_cli (cases, ops, golden, device, judge, report) or a top-level
module (dtypes, manifest, cli ...). Imports under `if TYPE_CHECKING:` never run and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "aclnn_cli"

# Lowest first. A unit may import units of its own layer or of any lower one.
LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(layer.split()) for layer in (
    "aclnn_cli errors files",  # the base: errors, files on disk (regular reads, JSON, the stat cache, quoting values)
    "tensor",  # what a tensor is: dtypes, layouts, its storage in device layout, the aclnn statuses
    "values standards",  # the case-file value language; the precision standards a case file names
    "ops",  # operator declarations, the registry, contracts
    "cases",  # case files (and foreign suites) read against an op's declaration into Case objects
    "casedir",  # a generated case on disk: manifests, case directories, shards
    "pipeline",  # how work is cut and run: stages, worker pools, block digests, the child reaper
    "golden device",  # gen; the emulated device, the defect catalogue, the harness and runner
    "judge",  # verify: comparison, standards applied, results
    "report",  # console, JSON, JUnit, HTML, progress
    "cli __main__",
))
LAYER_OF = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its __init__)."""
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (getattr(node.test, "id", None) == "TYPE_CHECKING"
                                         or getattr(node.test, "attr", None) == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Import nodes anywhere in the tree (functions, classes, try blocks), less TYPE_CHECKING blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(child for child in ast.iter_child_nodes(node) if not _type_checking_only(child))


def imports_of(name: str, path: Path, known: set[str]) -> set[tuple[str, int]]:
    """(imported aclnn_cli module, line) for each import in the module: `from . import x` names module x
    when there is one, else the package; `from .m import f` names m."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            targets = subs if len(subs) == len(node.names) else [base, *subs]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith("aclnn_cli") and target != name:
                found.add((target, node.lineno))
    return found


def unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def unit_graph() -> tuple[dict[tuple[str, str], list[str]], set[str]]:
    """{(unit, imported unit): ['module:line -> module', ...]} and the set of every unit."""
    mods = modules()
    edges: dict[tuple[str, str], list[str]] = {}
    for name, path in mods.items():
        for target, line in imports_of(name, path, set(mods)):
            a, b = unit(name), unit(target)
            if a != b:
                edges.setdefault((a, b), []).append(f"{name}:{line} -> {target}")
    return edges, {unit(m) for m in mods}


def cycles(edges) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_unit_has_a_layer():
    _, units = unit_graph()
    assert units - set(LAYER_OF) == set(), "place these modules/packages in LAYERS"


def test_no_import_points_up():
    edges, _ = unit_graph()
    up = [f"{a} (layer {LAYER_OF[a]}) imports {b} (layer {LAYER_OF[b]}): {where[0]}"
          for (a, b), where in sorted(edges.items()) if a in LAYER_OF and b in LAYER_OF and LAYER_OF[b] > LAYER_OF[a]]
    assert up == []


def test_no_circle_between_units():
    edges, _ = unit_graph()
    found = cycles(edges)
    detail = {tuple(c): [w for (a, b), where in edges.items() if a in c and b in c for w in where[:2]] for c in found}
    assert found == [], detail


# The checker itself, on hand-made graphs: it must see what it claims to.
def test_cycles_finds_a_circle_and_only_one():
    assert cycles({("a", "b"): [], ("b", "c"): [], ("c", "a"): [], ("c", "d"): []}) == [["a", "b", "c"]]
    assert cycles({("a", "b"): [], ("b", "c"): []}) == []


def test_imports_of_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "aclnn_cli"
    (pkg / "judge").mkdir(parents=True)
    source = ("from typing import TYPE_CHECKING\nfrom ..tensor import dtypes\nfrom .standards import x\n"
              "if TYPE_CHECKING:\n    from ..report import html\n"
              "def f():\n    from ..cli import main\n    import aclnn_cli.golden.gen\n")
    path = pkg / "judge" / "verify.py"
    path.write_text(source)
    known = {"aclnn_cli", "aclnn_cli.tensor.dtypes", "aclnn_cli.judge", "aclnn_cli.judge.verify", "aclnn_cli.judge.standards",
             "aclnn_cli.cli.main", "aclnn_cli.golden", "aclnn_cli.golden.gen", "aclnn_cli.report", "aclnn_cli.report.html"}
    got = imports_of("aclnn_cli.judge.verify", path, known)
    assert got == {("aclnn_cli.tensor.dtypes", 2), ("aclnn_cli.judge.standards", 3), ("aclnn_cli.cli.main", 7),
                   ("aclnn_cli.golden.gen", 8)}


@pytest.mark.parametrize("bad", [("ops", "device"), ("judge", "report"), ("cases", "golden")])
def test_layer_order_refuses_the_upward_imports_of_the_issue(bad):
    a, b = bad
    assert LAYER_OF[b] > LAYER_OF[a]
