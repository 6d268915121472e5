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
import sys
from importlib import metadata
from pathlib import Path

from ..errors import UserError
from .registry import OPS

ENV = "ACLNN_CLI_OPS"
ENTRY_POINT_GROUP = "aclnn_cli.ops"
_loaded: set[str] = set()


def _module_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if (path / "__init__.py").is_file():
        return [path / "__init__.py"]
    if path.is_dir():
        return sorted(p for p in path.glob("*.py") if not p.name.startswith("_"))
    raise UserError("no op file or folder here", where=str(path))


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
    try:
        spec.loader.exec_module(module)
    except UserError:
        raise
    except Exception as exc:  # a user's module: any error is theirs, reported in one line
        del sys.modules[name]
        raise UserError(f"loading the op module failed: {type(exc).__name__}: {exc}", where=str(file)) from None


def load_paths(paths) -> None:
    """Import the op modules at these paths (files, folders, packages); each registers its ops."""
    before = set(OPS)
    for raw in paths:
        for file in _module_files(Path(raw)):
            _import_file(file)
    _add_variants(before)


def load_configured() -> None:
    """The ops of ACLNN_CLI_OPS and of installed `aclnn_cli.ops` entry points (once per process)."""
    if "<configured>" in _loaded:
        return
    _loaded.add("<configured>")
    before = set(OPS)
    paths = [p for p in os.environ.get(ENV, "").split(os.pathsep) if p]
    if paths:
        load_paths(paths)
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as exc:
            raise UserError(f"loading the op package failed: {type(exc).__name__}: {exc}",
                            where=f"entry point {ep.name} ({ep.value})") from None
    _add_variants(before)


def _add_variants(before: set[str]) -> None:
    from ..judge.defects import add_op_variants

    try:
        add_op_variants([OPS[n] for n in OPS if n not in before])
    except ValueError as exc:
        raise UserError(str(exc)) from None
