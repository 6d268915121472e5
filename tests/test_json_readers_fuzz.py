"""Structured fuzz targets of the JSON readers: case.json (manifest.load, then verify) and verify's results
files (report's read_results, then the report written from them).

Documents are near-valid: a real manifest or results file with hostile leaves (wrong types, huge ints,
NaN, long and odd strings, deep nesting, missing and unknown keys), re-signed (the manifest's digest
recomputed) so the checks past the digest are reached, or with duplicate keys and non-JSON tokens
spliced into the text. Only a result or our one-line UserError is allowed.
"""

from __future__ import annotations

import atexit
import copy
import functools
import io
import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import strategies as st
from rich.console import Console

from aclnn_cli.casedir import manifest as M

from aclnn_cli.casedir import dirs as casedirs
from aclnn_cli.judge.verify import verify_dirs
from aclnn_cli.report.formats import print_cases, print_summary, write_verify_json
from aclnn_cli.report.merged import read_results
from aclnn_cli.report.junit import write_junit

from fuzzing import allowed_outcome, fuzz_target, scratch
from helpers import run_cli, write_yaml

CASES = """op: SiluBackward
cases:
  - {name: a, dtype: float16, shape: [4, 3]}
  - {name: b, dtype: float32, shape: [5], tensors: {gradInput: {layout: {step: 2}}}}
"""


@functools.lru_cache(maxsize=1)
def templates() -> tuple[Path, dict[str, dict], dict]:
    """One generated and emulated output (made once per session): its case directories' manifests, and
    the verify --json results of it."""
    root = Path(tempfile.mkdtemp(prefix="aclnn-fuzz-json-"))
    atexit.register(shutil.rmtree, root, True)  # (made once per process: gone when it ends, not left in /tmp)
    out = root / "out"
    assert run_cli("gen", write_yaml(root, CASES), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    assert run_cli("verify", out, "--json", root / "v.json").exit_code == 0
    manifests = {d.name: json.loads((d / casedirs.MANIFEST).read_text()) for d in sorted(out.iterdir())}
    return out, manifests, json.loads((root / "v.json").read_text())


LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**62, max_value=2**200),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.text(alphabet=st.characters(min_codepoint=0x80, max_codepoint=0x10FFFF, exclude_categories=("Cs",)), max_size=8),
    st.sampled_from(["", ".", "..", "../x", "a/b", "\n", "x" * 5000, "case.json", "gradInput.bin", "float16",
                     "NaN", "0", "1e999", "aclnnSiluBackward", "output", "input"]),
    st.just([]), st.just({}), st.lists(st.integers(-3, 2**63), max_size=4), st.just([[[[[]]]]]),
    st.integers(1, 300).map(lambda n: functools.reduce(lambda acc, _: [acc], range(n), [])),
)


def _paths(doc, prefix=()) -> list[tuple]:
    """Every key path inside doc (objects and lists), the document's leaves and inner nodes alike."""
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        out.append((*prefix, k))
        out.extend(_paths(v, (*prefix, k)))
    return out


@st.composite
def edited(draw, doc: dict) -> dict:
    """doc with a few of its values replaced by hostile leaves, deleted, or joined by unknown keys."""
    doc = json.loads(json.dumps(doc))
    paths = _paths(doc)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["set", "set", "set", "delete", "add"]))
        try:
            parent = functools.reduce(lambda node, k: node[k], path[:-1], doc)
            if action == "set":
                parent[path[-1]] = copy.deepcopy(draw(LEAVES))  # (a fresh one: a list drawn twice is no cycle)
            elif action == "delete":
                del parent[path[-1]]
            elif isinstance(parent, dict):
                parent[draw(st.text(max_size=10))] = copy.deepcopy(draw(LEAVES))
        except (KeyError, IndexError, TypeError):
            pass  # (an earlier edit replaced this path's parent)
    return doc


def text_of(draw, doc) -> str:
    """doc as JSON text, sometimes with a duplicate key, a non-JSON token or a deep nest spliced in."""
    text = json.dumps(doc, allow_nan=True)
    splice = draw(st.sampled_from(["none", "none", "duplicate", "nan", "deep", "truncate", "bom"]))
    if splice == "duplicate" and text.startswith("{"):
        key = draw(st.sampled_from(list(doc) or ["x"]))
        text = "{" + json.dumps(key) + ": 1, " + text[1:]
    elif splice == "nan":
        text = text.replace("1", "NaN", 1)
    elif splice == "deep":
        depth = draw(st.integers(60, 5000))
        text = text.replace("[]", "[" * depth + "]" * depth, 1) if "[]" in text else "[" * depth + "]" * depth
    elif splice == "truncate":
        text = text[: draw(st.integers(0, max(0, len(text) - 1)))]
    elif splice == "bom":
        text = "\ufeff" + text
    return text


@st.composite
def manifest_docs(draw) -> tuple[str, str]:
    out, manifests, _ = templates()
    name = draw(st.sampled_from(sorted(manifests)))
    doc = draw(edited(manifests[name]))
    if isinstance(doc, dict) and draw(st.booleans()):
        try:
            doc["digest"] = M.digest(doc)  # re-signed: the checks after the digest see the edits
        except (TypeError, ValueError):
            pass
    return name, text_of(draw, doc)


@fuzz_target(doc=manifest_docs())
def test_fuzz_manifest(doc):
    name, text = doc
    out = templates()[0]
    with scratch() as d:
        case = d / name
        shutil.copytree(out / name, case)
        (case / casedirs.MANIFEST).write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            m = M.load(case)
        except Exception as exc:  # noqa: BLE001 (the point: which exceptions get out)
            allowed_outcome(exc)
            m = None
        run = verify_dirs([case])  # whatever the manifest says, one verdict, never an exception
        assert len(run.cases) == 1
        if m is None:
            assert run.cases[0].status == "ERROR"


@st.composite
def results_docs(draw) -> str:
    _, _, results = templates()
    return text_of(draw, draw(edited(results)))


@fuzz_target(text=results_docs())
def test_fuzz_results_file(text):
    with scratch() as d:
        path = d / "v.json"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            run = read_results([path])
        except Exception as exc:  # noqa: BLE001
            allowed_outcome(exc)
            return
        assert run.cases  # what report prints and writes from what it read:
        console = Console(file=io.StringIO(), width=120)
        print_cases(console, run, show_passing=True)
        print_summary(console, run)
        write_verify_json(d / "merged.json", run, None)
        write_junit(d / "merged.xml", run)
