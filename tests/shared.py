"""Directories built once per test session and read by every pytest-xdist worker (conftest.py's fixtures).

`shared(tmp_path_factory, key, build)` returns <session temp>/shared/<key>, built by `build(path)` in whichever
worker asks first; the others wait for it (an flock) and then read it. The session temp directory is new for
every pytest run (under xdist: the parent of each worker's own, popen-gwN), so what is shared is built from this
run's code and case files, never left over from an earlier run. Readers must not change a shared directory: a
test that writes into one works on `linked_copy` (or a copy of its own).

`linked_copy(src, dst)` copies a generated OUT by hard links: gen, emulate, run and verify only ever write a
file under a temporary name and rename it into place, so a link is never written through. Dumps, statuses and
anything else a device loop writes are copied, not linked, so that a test rewriting a dump in place (tofile)
cannot reach the shared original; inputs, goldens, allowances and case.json (what gen wrote) are linked.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

# what gen writes into a case directory (linked); anything else is copied
_GEN_SUFFIXES = (".golden.bin", ".allowance.bin")


def session_root(tmp_path_factory) -> Path:
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    root.mkdir(exist_ok=True)
    return root


def shared(tmp_path_factory, key: str, build) -> Path:
    """<session temp>/shared/<key>, built once per session by build(path) (under an exclusive lock)."""
    root = session_root(tmp_path_factory)
    target = root / key
    with open(root / f"{key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / f"{key}.done"
        if not done.exists():
            shutil.rmtree(target, ignore_errors=True)
            build(target)
            done.touch()
    return target


def _gen_bundled(out: Path) -> None:
    import subprocess
    import sys

    from bundled_digest import limited_to_baseline

    done = subprocess.run([sys.executable, "-m", "aclnn_cli", "gen", "-o", str(out), "--jobs", "2"],
                          capture_output=True, text=True, env={**os.environ, **limited_to_baseline()}, timeout=1200)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def bundled_gen(tmp_path_factory) -> Path:
    """gen --jobs 2 of the bundled suite, once per session (conftest.py's fixture of the same name), in a process
    of its own as the oldest x86-64 machine runs it (bundled_digest.limited_to_baseline: test_bundled_bytes.py
    holds its bytes to the record, which an AVX-512 machine wrote)."""
    return shared(tmp_path_factory, "bundled-gen", _gen_bundled)


def bundled_produced(tmp_path_factory) -> Path:
    """The bundled suite as bundled_digest.produce(out, jobs=2) makes it (gen, emulate, verify --jobs 2; verify's
    JSON in OUT/verify.json), gen's files linked from bundled_gen; once per session. emulate and verify run in a
    process of their own as an AVX2 machine runs them (bundled_digest.limited_to_avx2: test_bundled_bytes.py holds
    their bytes to the record)."""
    import subprocess
    import sys

    from bundled_digest import limited_to_avx2

    gen = bundled_gen(tmp_path_factory)

    def build(out: Path) -> None:
        linked_copy(gen, out)
        code = ("import sys; from pathlib import Path; from bundled_digest import produce; "
                "produce(Path(sys.argv[1]), jobs=2, gen=False, digests=False)")
        done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True,
                              env={**os.environ, **limited_to_avx2()}, cwd=Path(__file__).parent, timeout=1200)
        assert done.returncode == 0, done.stderr[-3000:]

    return shared(tmp_path_factory, "bundled-produced", build)


def cases_of(out: Path, yaml_names) -> list[str]:
    """The case directories of a generated OUT whose case file (case.json's source) is one of `yaml_names`."""
    names = set(yaml_names)
    return [d.name for d in sorted(out.iterdir())
            if (d / "case.json").is_file() and Path(json.loads((d / "case.json").read_text())["source"]).name in names]


def shared_stub_root(tmp_path_factory, sanitize: bool = False) -> Path:
    """The stub CANN toolkit (tests/cann_build.py), in the directory every session, test file and worker shares
    (cann_build.PREBUILT: build_stub locks it and builds only what its stamp does not show built from these sources;
    make test builds it while the venv installs)."""
    from cann_build import PREBUILT, build_stub

    return build_stub(PREBUILT, sanitize=sanitize)


def object_cache(tmp_path_factory) -> Path:
    """Where this session's runner builds keep their objects for each other (cann_build.build_runner's cache)."""
    return session_root(tmp_path_factory) / "cxx-objects"


def _gen_file(name: str) -> bool:
    """A file gen writes: case.json, an input or initial output storage (<name>.bin), a golden, an allowance;
    not a dump (<name>.dump.bin) or anything a later command adds."""
    if name == "case.json" or name.endswith(_GEN_SUFFIXES):
        return True
    return name.endswith(".bin") and name.count(".") == 1


def _link_or_copy(src: str, dst: str) -> str:
    if _gen_file(os.path.basename(src)):
        try:
            os.link(src, dst)
            return dst
        except OSError:  # (another file system, or links refused: a copy)
            pass
    return shutil.copy2(src, dst)


def _link_any(src: str, dst: str) -> str:
    try:
        os.link(src, dst)
        return dst
    except OSError:
        return shutil.copy2(src, dst)


def linked_copy(src: Path, dst: Path, cases=None, dumps: bool = False) -> Path:
    """A copy of a generated OUT (or of the case directories named in `cases` only) whose generated files are hard
    links to the original's (see the module's docstring). dumps: link every file, the dumps too (the caller
    replaces a file it changes, unlinking it first, and never writes into one)."""
    copy = _link_any if dumps else _link_or_copy
    if cases is None:
        shutil.copytree(src, dst, copy_function=copy)
        return dst
    dst.mkdir(parents=True)
    for name in cases:
        shutil.copytree(src / name, dst / name, copy_function=copy)
    return dst
