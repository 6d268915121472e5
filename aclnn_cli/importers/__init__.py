"""Foreign case-file formats (ATK JSON, TTK CSV, msOpST JSON) turned into our case documents.

Placeholder seam: `to_documents` returns None for anything it does not recognise, and the
file is then read as our YAML.
"""

from __future__ import annotations

from pathlib import Path


def recognises(path: Path) -> bool:
    """Whether a file found in a directory is a foreign case file this package can import."""
    return False


def to_documents(path: Path, data: bytes) -> list[dict] | None:
    """The case documents (dicts shaped like our YAML) a foreign case file stands for, or None."""
    return None
