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


class StandardName(click.ParamType):
    """A precision standard's name, checked against standards.py only when an option is given (or
    its help shown): a plain click.Choice would import the judge, and numpy with it, at every start."""

    name = "standard"

    def _names(self) -> list[str]:
        from .standards import STANDARDS

        return list(STANDARDS)

    def get_metavar(self, *args, **kwargs) -> str:  # (click < 8.2 passes param; 8.2+ param and ctx)
        return f"[{'|'.join(self._names())}]"

    def convert(self, value, param, ctx):
        names = self._names()
        if value in names:
            return value
        self.fail(f"{str(value)[:60]!r} is not one of {', '.join(map(repr, names))}.", param, ctx)
