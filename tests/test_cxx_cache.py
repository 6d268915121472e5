"""cxx_cache.py, the runner builds' object cache: an object is reused only for the same preprocessed text and
options, wherever the project is."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CACHE = Path(__file__).resolve().parent / "cxx_cache.py"
CXX = os.environ.get("CXX", "g++")
pytestmark = pytest.mark.skipif(shutil.which(CXX) is None, reason=f"{CXX} not found")

SOURCE = '#include "value.h"\nint main() { return VALUE; }\n'


def _build(project: Path, cache: Path, value: int, *flags: str) -> int:
    """Compile project/src/main.cpp (VALUE from project/src/value.h) through the launcher, link it, run it."""
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.cpp").write_text(SOURCE)
    (project / "src" / "value.h").write_text(f"#define VALUE {value}\n")
    obj, exe = project / "main.o", project / "main"
    source = project / "src" / "main.cpp"
    done = subprocess.run([sys.executable, str(CACHE), str(cache), CXX, *flags, f"-I{project / 'src'}", "-MD", "-MT",
                           str(obj), "-MF", str(project / "main.o.d"), "-o", str(obj), "-c", str(source)])
    assert done.returncode == 0
    assert "value.h" in (project / "main.o.d").read_text()  # (the dependency file CMake asked for, hit or miss)
    subprocess.run([CXX, str(obj), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)]).returncode


def test_an_object_is_reused_only_for_the_same_text_and_options(tmp_path):
    cache = tmp_path / "cache"
    assert _build(tmp_path / "a", cache, 3) == 3
    assert _build(tmp_path / "b", cache, 5) == 5  # the same source file, another header: compiled
    assert len(list(cache.iterdir())) == 2
    assert _build(tmp_path / "c", cache, 3) == 3  # the same text in another project: reused
    assert len(list(cache.iterdir())) == 2
    assert _build(tmp_path / "d", cache, 3, "-O1") == 3  # other options: compiled
    assert len(list(cache.iterdir())) == 3


def test_a_failing_compile_fails_and_keeps_nothing(tmp_path):
    cache, src = tmp_path / "cache", tmp_path / "bad.cpp"
    src.write_text("int main() { return undeclared; }\n")
    done = subprocess.run([sys.executable, str(CACHE), str(cache), CXX, "-o", str(tmp_path / "bad.o"), "-c", str(src)],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "undeclared" in done.stderr
    assert not cache.exists() or not list(cache.iterdir())
