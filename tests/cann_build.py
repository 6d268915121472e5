"""Build the stub CANN toolkit (tests/stub_cann, a test double for an Ascend NPU) and programs against it.

Plain functions, no pytest: a session-scoped fixture calls

    root = build_stub(tmp_path_factory.mktemp("cann"))

and compiles a harness with -I<root>/include -I<root>/include/aclnn -L<root>/lib64 and
ascendcl nnopbase opapi, exactly as against a real toolkit (`consumer_flags` gives those).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

STUB_DIR = Path(__file__).resolve().parent / "stub_cann"
LIBS = ("ascendcl", "nnopbase", "opapi")
SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer")
# A generated runner built as a user would (CMAKE_BUILD_TYPE=Debug) and sanitized: -O1 as AddressSanitizer's docs
# advise for usable speed (every check stays; at -O0 the bundled suite's runs took 5x the CPU).
SANITIZE = " ".join(("-O1", *SANITIZE_FLAGS))
_STAMP = ".stub-stamp"
# Where the tests' toolkit is built and kept (git ignores build/): its stamp names the sources and options, so a
# later run, `make check` or another worker reuses it, and `make test` builds it while the venv installs.
PREBUILT = Path(__file__).resolve().parent.parent / "build" / "stub-cann"


def stub_ops() -> set[str]:
    """The aclnn ops the stub toolkit implements: those its aclnnop headers declare."""
    names = set()
    for header in (STUB_DIR / "include" / "aclnnop").glob("*.h"):
        names.update(re.findall(r"\b(aclnn[A-Za-z0-9]+)GetWorkspaceSize\b", header.read_text()))
    return names


class StubBuildError(RuntimeError):
    """cmake or the compiler failed (the message carries their output), or they are missing."""


def tools_missing() -> str | None:
    """Why the stub cannot be built here (no cmake / no C++ compiler), or None."""
    for tool in ("cmake", os.environ.get("CXX", "g++")):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    return None


def source_hash() -> str:
    """Hash of everything the installed toolkit is built from."""
    h = hashlib.sha256()
    files = [STUB_DIR / "CMakeLists.txt", *sorted((STUB_DIR / "include").rglob("*")), *sorted((STUB_DIR / "src").rglob("*"))]
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(STUB_DIR)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialize builds into one directory (parallel test workers sharing it)."""
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _run(cmd: Sequence[str], what: str) -> None:
    try:
        p = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except FileNotFoundError as exc:
        raise StubBuildError(f"{what}: {exc}") from None
    if p.returncode != 0:
        raise StubBuildError(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stdout}")


def build_stub(work: Path, *, sanitize: bool = False) -> Path:
    """Configure, build and install the stub toolkit under `work`; return its root (work/root).

    Skipped when work/root was installed from the same sources and options. With sanitize=True
    the libraries carry -fsanitize=address,undefined (root: work/root-asan); programs linked
    against them need the same flags (consumer_flags(root, sanitize=True)).
    """
    work = Path(work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    suffix = "-asan" if sanitize else ""
    root, build = work / f"root{suffix}", work / f"build{suffix}"
    stamp = f"{source_hash()} sanitize={sanitize}\n"
    with _locked(work / f".build{suffix}.lock"):
        if (root / _STAMP).is_file() and (root / _STAMP).read_text() == stamp and all(
                (root / "lib64" / f"lib{lib}.so").is_file() for lib in LIBS):
            return root
        missing = tools_missing()
        if missing:
            raise StubBuildError(f"cannot build the stub CANN toolkit: {missing}")
        shutil.rmtree(root, ignore_errors=True)
        _run(["cmake", "-S", str(STUB_DIR), "-B", str(build), f"-DSTUB_SANITIZE={'ON' if sanitize else 'OFF'}"],
             "cmake configure")
        _run(["cmake", "--build", str(build), "--parallel", str(os.cpu_count() or 1)], "cmake build")
        _run(["cmake", "--install", str(build), "--prefix", str(root)], "cmake install")
        (root / _STAMP).write_text(stamp)
    return root


def consumer_flags(root: Path, *, sanitize: bool = False) -> list[str]:
    """g++ flags that compile and link a program against the toolkit at `root` (rpath included)."""
    root = Path(root)
    flags = ["-std=c++17", f"-I{root / 'include'}", f"-I{root / 'include' / 'aclnn'}"]
    if sanitize:
        flags += SANITIZE_FLAGS
    return flags + [f"-L{root / 'lib64'}", f"-Wl,-rpath,{root / 'lib64'}", *(f"-l{lib}" for lib in LIBS)]


def compile_program(root: Path, sources: Sequence[Path], output: Path, *, sanitize: bool = False,
                    extra: Sequence[str] = ()) -> Path:
    """Compile C++ `sources` into `output`, linked against the toolkit at `root`."""
    cxx = os.environ.get("CXX", "g++")
    _run([cxx, "-O1", *extra, *(str(s) for s in sources), "-o", str(output), *consumer_flags(root, sanitize=sanitize)],
         f"compiling {output.name}")
    return output


def build_runner(source: Path, build: Path, root: Path, cxx_flags: str = "", cache: Path | None = None) -> Path:
    """Configure and build a generated runner project (`aclnn-cli harness -o source`) against the toolkit at
    `root`, as a user would with cmake; return the executable. cache: a directory where objects are kept for the
    session's other runner builds (cxx_cache.py: the harness's fixed sources are compiled once per set of options)."""
    configure = ["cmake", "-S", str(source), "-B", str(build), f"-DASCEND_PATH={root}", "-DCMAKE_BUILD_TYPE=Debug"]
    if cxx_flags:
        configure += [f"-DCMAKE_CXX_FLAGS={cxx_flags}", f"-DCMAKE_EXE_LINKER_FLAGS={cxx_flags}"]
    if cache is not None:
        launcher = ";".join((sys.executable, str(Path(__file__).resolve().parent / "cxx_cache.py"), str(cache)))
        configure.append(f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}")
    _run(configure, "cmake configure (runner)")
    _run(["cmake", "--build", str(build), "-j2"], "cmake build (runner)")
    return Path(build) / "aclnn-runner"


if __name__ == "__main__":  # (make test: both toolkits built beside the venv's install; a failure is the tests' to say)
    for sanitized in (False, True):
        try:
            build_stub(PREBUILT, sanitize=sanitized)
        except (StubBuildError, OSError):
            pass
