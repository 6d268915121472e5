"""A compiler launcher (CMake's CMAKE_CXX_COMPILER_LAUNCHER) that reuses an object file compiled earlier in this
test session from the same preprocessed text with the same options.

Every generated runner the tests build has the same two fixed translation units (the harness's runner.cpp and
request.cpp, parsed with <iostream> and <sstream>) and differs only in its generated ops.cpp; the sanitized ones
took five seconds of CPU each. Usage, as CMake runs it:

    python cxx_cache.py CACHE_DIR COMPILER ARGS...

The key is the compiler (its resolved path, size and mtime), the options with the output, dependency-file and
include-directory paths left out (each project has its own), and the translation unit as the preprocessor writes
it without line markers (what the include paths and macros made of it). The preprocessing also writes the
dependency file CMake asked for. A miss compiles with the command as given and keeps a copy of the object; an
object from another project differs only in the source paths its debug information names. Anything but a single
-c compile runs as given.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys

_WITH_PATH = {"-o", "-MF", "-MT", "-MQ"}  # (options whose next argument is an output's name)
_INCLUDES = ("-I", "-isystem", "-iquote", "-idirafter")


def _key(compiler: str, args: list[str], source: str, preprocessed: bytes) -> str:
    h = hashlib.sha256()
    real = shutil.which(compiler) or compiler
    st = os.stat(os.path.realpath(real))
    h.update(f"{os.path.realpath(real)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in _WITH_PATH or a in _INCLUDES:
            skip = True
        elif a == source or a.startswith(_INCLUDES) or a.startswith(("-MF", "-MT", "-MQ")):
            pass
        else:
            h.update(a.encode() + b"\0")
    h.update(preprocessed)
    return h.hexdigest()


def _parse(args: list[str]) -> tuple[str, str] | None:
    """(object, source) of a single-source `-c -o OBJECT` compile, else None."""
    if "-c" not in args or "-o" not in args:
        return None
    obj = args[args.index("-o") + 1]
    sources = [a for a in args if a.endswith((".cpp", ".cc", ".cxx", ".c")) and not a.startswith("-")]
    return (obj, sources[0]) if len(sources) == 1 else None


def main(argv: list[str]) -> int:
    cache, compiler, args = argv[0], argv[1], argv[2:]
    parsed = _parse(args)
    if parsed is None:
        return subprocess.call([compiler, *args])
    obj, source = parsed
    pre = [a for i, a in enumerate(args) if a != "-c" and not (a == "-o" or (i and args[i - 1] == "-o"))]
    done = subprocess.run([compiler, *pre, "-E", "-P"], stdout=subprocess.PIPE)
    if done.returncode != 0:  # (the compile says why, as it would have)
        return subprocess.call([compiler, *args])
    kept = os.path.join(cache, _key(compiler, args, source, done.stdout) + ".o")
    if os.path.isfile(kept):
        shutil.copyfile(kept, obj)
        return 0
    code = subprocess.call([compiler, *args])
    if code == 0:
        os.makedirs(cache, exist_ok=True)
        part = f"{kept}.{os.getpid()}"
        shutil.copyfile(obj, part)
        os.replace(part, kept)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
