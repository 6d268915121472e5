"""Finding the case directories of an output root (one scandir, no glob: thousands of cases)."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UserError

MANIFEST = "case.json"


def join(directory: str, name: str) -> str:
    """str(Path(directory) / name) for a directory as str(Path) writes it, without making Paths."""
    if directory == ".":
        return name
    return directory + name if directory.endswith("/") else f"{directory}/{name}"


def find_cases(root: Path) -> list[Path]:
    """Case directories under an output root (or the root itself if it is one), sorted."""
    if (root / MANIFEST).is_file():
        return [root]
    if not root.exists():
        raise UserError("no such directory", where=str(root))
    if not root.is_dir():
        raise UserError("not a directory of generated cases", where=str(root))
    # Hidden directories are gen's temporaries (.<id>.partial-<pid>, .<id>.old-<pid>), never cases.
    # (os.scandir and one access() per directory: a glob makes and parses several Paths per case.)
    text = str(root)
    child = getattr(root, "_make_child_relpath", root.joinpath)  # (pathlib's own fast child, where it has one)
    dirs = [child(n) for n in subdirs(root) if os.access(join(join(text, n), MANIFEST), os.F_OK)]
    if not dirs:
        raise UserError("no generated cases here (run 'aclnn-cli gen -o DIR' first)", where=str(root))
    return dirs


def subdirs(root: Path) -> list[str]:
    """The names of root's directories, sorted, hidden ones left out (gen's temporaries are hidden); none
    if root cannot be read."""
    try:
        with os.scandir(root) as entries:
            return sorted(e.name for e in entries if not e.name.startswith(".") and _is_dir(e))
    except OSError:
        return []


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def refuse_links(root: Path, dirs: list[Path]) -> None:
    """UserError naming the first case directory that is a symbolic link, or lies outside `root` once resolved:
    a command that writes (emulate, run) would put dumps and status files there, outside OUT."""
    if (root / MANIFEST).is_file():  # (OUT is the case itself)
        return
    top = os.path.realpath(root)
    parents: dict[str, str] = {}
    for d in dirs:
        if os.path.islink(d) or _resolved_parent(str(d), parents) != top:
            raise UserError("the case directory is a symbolic link, or lies outside OUT: refused (the results would be "
                            "written elsewhere)", where=str(d))


def _resolved_parent(d: str, parents: dict[str, str]) -> str:
    """os.path.dirname(os.path.realpath(d)) of a directory that is not a symbolic link: its parent resolved (once
    per parent, kept in `parents`: realpath takes a system call per component, and a suite's thousands of cases
    share one parent). A name that is not a plain name ("..", ".", a trailing slash) is resolved whole."""
    head, name = os.path.split(d)
    if name in ("", ".", ".."):
        return os.path.dirname(os.path.realpath(d))
    if head not in parents:
        parents[head] = os.path.realpath(head or ".")
    return parents[head]
