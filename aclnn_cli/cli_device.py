"""The device commands: `harness` (write the C++ runner project) and `run` (drive a built runner)."""

from __future__ import annotations

import click


def register(main: click.Group) -> None:
    """Add the device commands to the main group."""
