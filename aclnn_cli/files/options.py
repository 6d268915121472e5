"""Click parameter types shared by the commands."""

from __future__ import annotations

import os
from pathlib import Path

import click


class _Path(click.ParamType):
    """A file system path; the empty string is refused (it would silently mean the current directory)."""

    name = "path"

    def convert(self, value, param, ctx):
        if isinstance(value, Path):
            return value
        if not str(value).strip():
            self.fail("an empty path is not a path", param, ctx)
        return Path(value)


PATH = _Path()


def default_jobs() -> int:
    """Worker processes by default: the cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
