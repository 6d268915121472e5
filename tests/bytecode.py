"""The bytecode a fresh clone lacks, compiled once between the test workers instead of once by each.

On a fresh clone every worker collects every test file, and each compiles what it imports: the test modules (with
pytest's assertion rewriting, most of the cost) and the package. Both workers did all of it at the same moment, the
same work twice. Here each worker first compiles its share, the files whose bytecode is missing, into the caches
import reads (pytest's own, for rewritten test modules; __pycache__ for the rest), and then collects, finding the
other worker's share already there. A file not yet there when the import wants it is compiled by the import, as
before: the writes are atomic renames, so a race costs time, never a wrong module.
"""
import importlib.util
import os
import py_compile
import sys
from pathlib import Path

TESTS = Path(__file__).parent
PACKAGE = TESTS.parent / "aclnn_cli"


def compile_share(config, worker: int, workers: int, tests: Path = TESTS, package: Path = PACKAGE) -> None:
    """Compile what has no cached bytecode in worker's share (every workers-th of the files, by size): the test
    modules in tests (rewritten), the other modules there and those under package."""
    if sys.dont_write_bytecode or workers < 2:
        return
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    names = ("_rewrite_test", "_write_pyc", "PYC_TAIL", "get_cache_dir", "assertstate_key")
    state = config.stash.get(rewrite.assertstate_key, None) if all(hasattr(rewrite, n) for n in names) else None
    if state is None or config.getoption("assertmode", "rewrite") != "rewrite":
        return  # (another pytest's internals, or no rewriting: its import compiles what it needs)
    rewritten = sorted(tests.glob("test_*.py"))
    plain = sorted(p for p in tests.glob("*.py") if not p.name.startswith("test_") and p.name != "conftest.py")
    plain += sorted(package.rglob("*.py"))
    files = [(path, rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)) for path in rewritten]
    files += [(path, None) for path in plain]
    files.sort(key=lambda job: (-job[0].stat().st_size, str(job[0])))  # (the shares: the same in every worker)
    todo = [(path, pyc) for path, pyc in files[worker::workers]
            if not (pyc or Path(importlib.util.cache_from_source(str(path)))).exists()]
    for path, pyc in todo:
        try:
            if pyc is None:
                py_compile.compile(str(path), doraise=True)
            else:
                pyc.parent.mkdir(exist_ok=True)
                source_hash, code = rewrite._rewrite_test(path, config)
                rewrite._write_pyc(state, code, source_hash, pyc)
        except (OSError, SyntaxError, py_compile.PyCompileError):  # (the import reports it, as it would have)
            continue


def share_from_environment(config) -> None:
    """compile_share for this pytest-xdist worker (PYTEST_XDIST_WORKER gwN of PYTEST_XDIST_WORKER_COUNT)."""
    name, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if name.startswith("gw") and name[2:].isdigit() and count.isdigit():
        compile_share(config, int(name[2:]), int(count))
