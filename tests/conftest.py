import os
import sys
from pathlib import Path

# One BLAS thread per test worker, as the tool sets it for its own processes (aclnn_cli/__init__.py, decision 57):
# the workers are as many as the cores, and a test module importing NumPy before the package left each worker with
# OpenBLAS threads spinning after every call, on the core of the other worker. Set before anything loads NumPy.
for _name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import pytest  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))


SLOW_LIST = Path(__file__).parent / "slow-tests.txt"
# Fixtures that build the whole bundled suite or a C++ runner: a test needing one is slow in make check whatever its
# own time (in a whole run another test pays for the fixture first, so the timeline cannot see it).
HEAVY_FIXTURES = {"bundled_gen", "bundled_produced", "runner", "asan_runner"}


def _heavy(item) -> bool:
    """Whether the test needs a HEAVY_FIXTURES one, or a fixture of its module that takes its cases from the session's
    bundled suite (rowblocks.bundled_suite, called inside the fixture)."""
    if HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        code = getattr(getattr(defs[-1], "func", None), "__code__", None)
        if code is not None and "bundled_suite" in code.co_names:
            return True
    return False
FILE_TIMES = Path(__file__).parent / "file-times.txt"


# (The in-process CLI, run_cli, and the one-line-error assertion, one_line_error, are plain functions in helpers.py:
# this file holds fixtures, and a test module does not import it.)

# ---- the bundled suite, generated once per session (tests/shared.py: one build, every worker reads it) ----------

@pytest.fixture(scope="session")
def bundled_gen(tmp_path_factory) -> Path:
    """`gen --jobs 2` of the bundled suite (aclnn_cli/cases/bundled). Read only: a test that writes into it works
    on a copy (shared.linked_copy)."""
    import shared

    return shared.bundled_gen(tmp_path_factory)


@pytest.fixture(scope="session")
def bundled_produced(tmp_path_factory) -> Path:
    """The bundled suite generated, emulated and verified with --jobs 2 (verify's JSON in OUT/verify.json), as
    bundled_digest.produce(out, jobs=2) makes it. Read only."""
    import shared

    return shared.bundled_produced(tmp_path_factory)


def pytest_configure(config):
    config.addinivalue_line("markers", "fuzz: a structured fuzz target of a reader (short in make test; make fuzz)")


def pytest_collection_modifyitems(config, items):
    """The tests slow-tests.txt names, and those needing a heavy fixture (_heavy), are marked slow (make check leaves them
    out). Files in the order of file-times.txt: first those that mostly wait (on timeouts; CPU under half their time),
    which the other worker's first file keeps from idling a core (it generates the bundled suite with two processes,
    and the C++ stub is still building); then the longest first, so that the workers do not end on one. make fuzz:
    share ACLNN_FUZZ_TOTAL_SECONDS evenly among the collected fuzz targets."""
    slow = {line for line in SLOW_LIST.read_text().splitlines() if line and not line.startswith("#")}
    for item in items:
        if item.nodeid in slow or _heavy(item):
            item.add_marker(pytest.mark.slow)
    order = {}
    for line in FILE_TIMES.read_text().splitlines():
        if line and not line.startswith("#"):
            wall, cpu, name = line.split(maxsplit=2)
            order[name] = (float(cpu) >= float(wall) / 2, -float(wall))
    items.sort(key=lambda item: order.get(item.nodeid.split("::")[0], (True, 0.0)))  # (stable: a file's order kept)
    total = float(os.environ.get("ACLNN_FUZZ_TOTAL_SECONDS", "0") or 0)
    targets = [item for item in items if item.get_closest_marker("fuzz")]
    if total > 0 and targets:
        import fuzzing

        fuzzing.budget["seconds"] = total / len(targets)


def pytest_collection_finish(session):
    """The collected modules (every test file, numpy, the package) moved out of the collector's reach, and its
    youngest generation collected 20,000 allocations apart instead of 700: the oracles' Fractions and the judge's
    small arrays made collections that walked the whole heap again and again: 4-6 % of the oracle-heavy files' time,
    about 2.5 % of make test's CPU (788 -> 769 CPU-s).
    Only this process: a command a test starts as a process of its own collects as users' do."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After a test file's last test (its module fixtures torn down): the memo caches its own functions keep
    (functools' cache_clear) emptied, its garbage in reference cycles collected (the collector's oldest generation
    is seldom reached: pytest_collection_finish) and the heap's free pages handed back to the system (malloc_trim).
    A test worker forks the in-process CLI's workers, and a fork copies the page tables of everything the worker
    holds (the child's exit unmaps it again): what finished files left behind (the tool's allocator tuning keeps
    freed heap: tuning.py) made every later fork dearer. Decision 247."""
    yield
    module = getattr(item, "module", None)
    if module is None or (nextitem is not None and getattr(nextitem, "module", None) is module):
        return
    name = module.__name__
    for value in list(vars(module).values()):
        if getattr(value, "__module__", None) == name and callable(getattr(value, "cache_clear", None)):
            value.cache_clear()
    import gc

    gc.collect()
    gc.freeze()  # (what survives is out of the next file's collections: each then walks only what is new)
    _trim_heap()


def _trim_heap() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # (not glibc)
        pass


if os.environ.get("ACLNN_TEST_TIMELINE"):  # (where a run's time goes: one line per test, for balancing the workers)
    import resource as _resource
    import time as _time

    def _cpu() -> float:
        """CPU seconds (user and system) of this worker, of the children it has reaped and of the commands
        clifork.py's server ran for it."""
        forked = sys.modules.get("clifork")
        return sum(u.ru_utime + u.ru_stime for u in (_resource.getrusage(_resource.RUSAGE_SELF),
                                                   _resource.getrusage(_resource.RUSAGE_CHILDREN))) + (
            forked.CHILDREN_CPU[0] if forked else 0.0)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        start, cpu = _time.time(), _cpu()
        yield
        with open(os.environ["ACLNN_TEST_TIMELINE"], "a") as f:
            f.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} {start:.3f} {_time.time():.3f} "
                    f"{_cpu() - cpu:.3f} {item.nodeid}\n")
