"""User op packages: operators declared outside aclnn-cli, with no edit to it.

Three ways, all loaded once per process before any op is looked up:
- `aclnn-cli --ops PATH` (a .py file, or a folder of them / a package; repeatable), which also
  sets ACLNN_CLI_OPS so worker processes load the same files;
- the ACLNN_CLI_OPS environment variable: paths separated by os.pathsep;
- installed packages exposing an entry point in the group `aclnn_cli.ops` (loading it registers).

A user module declares its op exactly as a bundled one does: `register(OpSpec(...))`
(`from aclnn_cli.ops import OpSpec, register`). See docs/adding-an-op.md.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import stat
import sys
from pathlib import Path

from ..files.text import clip, show
from ..errors import UserError
from .declcheck import MESSAGE_LIMIT, describe
from .registry import OPS

ENV = "ACLNN_CLI_OPS"
ENTRY_POINT_GROUP = "aclnn_cli.ops"
_loaded: set[str] = set()


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _mode(path: Path) -> int:
    try:
        return path.stat().st_mode
    except FileNotFoundError:
        raise UserError("no op file or folder here", where=str(path)) from None
    except OSError as exc:
        raise UserError(f"cannot read this op path: {exc.strerror or exc}", where=str(path)) from None


def _module_file(path: Path) -> Path:
    """`path` if it is a regular .py file (never opened otherwise: a FIFO would block the import)."""
    mode = _mode(path)
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise UserError(f"an op module is a .py file, this is {kind}", where=str(path))
    if path.suffix != ".py":
        raise UserError("an op module is a .py file (a folder of them, or a package)", where=str(path))
    return path


def _module_files(path: Path) -> list[Path]:
    if not stat.S_ISDIR(_mode(path)):
        return [_module_file(path)]
    if (path / "__init__.py").exists():
        return [_module_file(path / "__init__.py")]
    files = [_module_file(p) for p in sorted(path.glob("*.py")) if not p.name.startswith("_")]
    if not files:
        raise UserError("no op modules (*.py, not starting with _) in this folder", where=str(path))
    return files


def ran_user_code() -> bool:
    """Whether a user's op module or entry point was loaded in this process (__main__: its exit is then Python's
    own, which flushes and closes what the user's code left open)."""
    return _ran[0]


_ran = [False]


def _user_code(run, where: str) -> None:
    """Run a user module's top level: whatever it raises or however it exits (sys.exit, Ctrl-C, any
    BaseException) is one line naming it, never a silent exit 0 (which would pass a verify run)."""
    _ran[0] = True
    try:
        run()
    except UserError as exc:  # (register's refusal, or the module's own: kept if it is one short line)
        text = str(exc)
        if len(text) <= MESSAGE_LIMIT + len(where) + 2 and text.isprintable():
            raise
        raise UserError(clip(text, MESSAGE_LIMIT), where=where) from None
    except SystemExit as exc:
        raise UserError(f"the op module called sys.exit({show(exc.code, 40)}) while loading; an op module must "
                        "only declare (aclnn-cli stops here)", where=where) from None
    except KeyboardInterrupt:
        raise UserError("loading the op module was interrupted (KeyboardInterrupt)", where=where) from None
    except BaseException as exc:  # a user's module: any error is theirs, reported in one line
        raise UserError(f"loading the op module failed: {describe(exc, MESSAGE_LIMIT)}", where=where) from None


def _import_file(file: Path) -> None:
    key = str(file.resolve())
    if key in _loaded:
        return
    _loaded.add(key)
    name = "aclnn_cli_user_ops._" + hashlib.sha256(key.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, file,
                                                  submodule_search_locations=[str(file.parent)]
                                                  if file.name == "__init__.py" else None)
    if spec is None or spec.loader is None:
        raise UserError("cannot load this file as a Python module", where=str(file))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    before = set(OPS)
    try:
        _user_code(lambda: spec.loader.exec_module(module), str(file))
    except UserError:
        del sys.modules[name]
        raise
    if not set(OPS) - before:
        raise UserError("this op module registers no operator (it calls register(OpSpec(...)); a helper module "
                        "in an op folder is named _*.py)", where=str(file))


def load_paths(paths) -> None:
    """Import the op modules at these paths (files, folders, packages); each registers its ops."""
    for raw in paths:
        for file in _module_files(Path(raw)):
            _import_file(file)


def load_configured() -> None:
    """The ops of ACLNN_CLI_OPS and of installed `aclnn_cli.ops` entry points (once per process)."""
    if "<configured>" in _loaded:
        return
    _loaded.add("<configured>")
    paths = [p for p in os.environ.get(ENV, "").split(os.pathsep) if p]
    if paths:
        load_paths(paths)
    if not _entry_points_may_name_ours():
        return
    from importlib import metadata  # (here: importing it costs a command's start 25 ms)

    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        _user_code(ep.load, f"entry point {clip(ep.name, 60)} ({clip(ep.value, 120)})")


_OUR_SECTION = re.compile(r"^\s*\[\s*" + re.escape(ENTRY_POINT_GROUP) + r"\s*\]\s*$", re.M)


def _entry_points_may_name_ours() -> bool:
    """Whether an installed distribution's entry_points.txt may declare the `aclnn_cli.ops` group: a look at the
    text of those files on sys.path, before importlib.metadata (email, zipfile and csv: most of a small command's
    start beyond NumPy) reads them properly. Anything this look cannot see into (a zip file on sys.path, a file it
    cannot read, an import hook of its own that finds distributions) answers yes."""
    from importlib.machinery import PathFinder

    if any(f is not PathFinder and hasattr(f, "find_distributions") for f in sys.meta_path):
        return True
    for entry in sys.path:
        folder = entry or "."
        try:
            with os.scandir(folder) as found:
                names = [e.name for e in found if e.name.endswith((".dist-info", ".egg-info"))]
        except (NotADirectoryError, PermissionError):
            return True
        except OSError:  # (a folder on sys.path that is not there: nothing installed in it)
            continue
        for name in names:
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), encoding="utf-8", errors="replace") as f:
                    if _OUR_SECTION.search(f.read()):
                        return True
            except FileNotFoundError:
                continue
            except OSError:
                return True
    return False
