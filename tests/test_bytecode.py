"""bytecode.py: the workers' shares are disjoint, cover every file, and are the bytecode import itself would use."""
import importlib.util
import marshal
import sys
import types
from pathlib import Path

import bytecode
from _pytest.assertion import rewrite


def _tree(root: Path) -> tuple[Path, Path]:
    tests, package = root / "tests", root / "pkg"
    (package / "sub").mkdir(parents=True)
    tests.mkdir()
    for i in range(5):
        body = f"def test_{i}():\n    x = {i}\n    assert x + 1 == {i + 1}, 'sum'\n"
        (tests / f"test_m{i}.py").write_text(body * (i + 1))
    (tests / "helper.py").write_text("VALUE = 3\n")
    (tests / "conftest.py").write_text("X = 1\n")
    (package / "__init__.py").write_text("")
    (package / "sub" / "mod.py").write_text("def f(a):\n    return a * 2\n")
    (tests / "test_broken.py").write_text("def (:\n")
    return tests, package


def _rewritten(path: Path) -> Path:
    return rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)


def test_two_workers_compile_every_file_once_and_as_import_would(tmp_path, pytestconfig, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # (as make test runs)
    tests, package = _tree(tmp_path)
    rewritten = [p for p in sorted(tests.glob("test_m*.py"))]
    plain = [tests / "helper.py", package / "__init__.py", package / "sub" / "mod.py"]
    bytecode.compile_share(pytestconfig, 0, 2, tests, package)
    first = {p for p in rewritten if _rewritten(p).exists()} | {
        p for p in plain if Path(importlib.util.cache_from_source(str(p))).exists()}
    assert 0 < len(first) < len(rewritten) + len(plain)  # (worker 0 did its share only)
    bytecode.compile_share(pytestconfig, 1, 2, tests, package)
    for path in rewritten:  # (what pytest's import reads back, and what it would have written itself)
        code = rewrite._read_pyc(path, _rewritten(path))
        assert code is not None and code == rewrite._rewrite_test(path, pytestconfig)[1]
        assert any(name.startswith("@py_assert") for f in code.co_consts if isinstance(f, types.CodeType)
                   for name in f.co_varnames)
    for path in plain:
        data = Path(importlib.util.cache_from_source(str(path))).read_bytes()
        assert marshal.loads(data[16:]) == compile(path.read_text(), str(path), "exec", dont_inherit=True)
    assert not Path(importlib.util.cache_from_source(str(tests / "conftest.py"))).exists()  # (pytest's to compile)
    assert not _rewritten(tests / "test_broken.py").exists()  # (left to the import, which reports it)


def test_one_worker_or_no_bytecode_compiles_nothing(tmp_path, pytestconfig, monkeypatch):
    tests, package = _tree(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    bytecode.compile_share(pytestconfig, 0, 1, tests, package)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    bytecode.compile_share(pytestconfig, 0, 2, tests, package)
    assert not list(tmp_path.rglob("*.pyc"))
