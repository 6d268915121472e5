"""`aclnn-cli convert`: foreign case files -> our YAML (placeholder until the importers land)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--out", "out", type=click.Path(path_type=Path), required=True, help="Directory for the YAML files.")
def convert(files: tuple[Path, ...], out: Path) -> None:
    """Convert ATK JSON, TTK CSV or msOpST JSON case files into aclnn-cli YAML case files."""
    raise click.UsageError("convert is not implemented yet")
