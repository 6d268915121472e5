"""Foreign case-file formats (ATK JSON, TTK CSV, msOpST JSON) turned into our case documents.

A format is recognised by content, never by extension: teams keep these files under any name.
Each importer builds dicts shaped exactly like a parsed YAML case file, which then go through the
same validation as YAML (`cases.cases_from_doc`), so gen of an imported file and gen of the YAML
`aclnn-cli convert` writes for it give identical bytes. docs/importing.md maps every field.
"""

from __future__ import annotations

import collections
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from . import atk, msopst, ttk
from .common import Collector, Skipped, Unsupported
from .source import head

FORMATS = (atk, msopst, ttk)
SNIFF_BYTES = 8192  # recognising a file reads at most this much of it

_collectors: list[tuple[bool, list[Skipped]]] = []  # innermost `collecting` block last


@dataclass(frozen=True)
class Imported:
    """One foreign file, imported: its format's name, our documents (one per op), the cases left out."""

    format: str
    documents: list[dict]
    skipped: list[Skipped]


def detect(data: bytes):
    """The importer module whose format this content is, or None."""
    head = data[:SNIFF_BYTES]
    return next((fmt for fmt in FORMATS if fmt.sniff(head)), None)


def recognises(path: Path) -> bool:
    """Whether a file found in a directory is a foreign case file (reads only its first few KB)."""
    data = head(path, SNIFF_BYTES)  # (a FIFO or device is never opened for a blocking read)
    return data is not None and detect(data) is not None


def import_file(path: Path, data: bytes, skip_unsupported: bool = False, validate=None) -> Imported | None:
    """Import one foreign file, or None if its content is not a foreign format. validate: the case files' reader
    (loader.cases_from_doc), which a case must pass to be kept when skipping unsupported ones."""
    fmt = detect(data)
    if fmt is None:
        return None
    out = Collector(str(path), skip=skip_unsupported, validate=validate)
    fmt.read(str(path), Path(path).name, data, out)
    return Imported(fmt.NAME, out.documents(), out.skipped)


def to_documents(path: Path, data: bytes, skip_unsupported: bool | None = None, validate=None) -> list[dict] | None:
    """The case documents a foreign file stands for, or None (the file is then read as our YAML).

    skip_unsupported=None follows the innermost `collecting` block (off outside one); skipped cases
    are recorded in that block's list.
    """
    skip = _collectors[-1][0] if skip_unsupported is None and _collectors else bool(skip_unsupported)
    result = import_file(path, data, skip, validate)
    if result is None:
        return None
    if _collectors:
        _collectors[-1][1].extend(result.skipped)
    return result.documents


@contextmanager
def collecting(skip_unsupported: bool = False) -> Iterator[list[Skipped]]:
    """Within this block, to_documents skips unsupported foreign cases if asked to, and lists every
    skipped case in the yielded list (for the CLI to count and report)."""
    records: list[Skipped] = []
    _collectors.append((skip_unsupported, records))
    try:
        yield records
    finally:
        _collectors.pop()


def describe_skipped(skipped: list[Skipped], most: int = 5) -> list[str]:
    """Lines for the user: how many cases were skipped, grouped by reason (most frequent first)."""
    if not skipped:
        return []
    by_reason = collections.Counter(s.reason for s in skipped)
    lines = [f"skipped {len(skipped)} unsupported foreign case{'s' if len(skipped) != 1 else ''}:"]
    for reason, n in by_reason.most_common(most):
        first = next(s for s in skipped if s.reason == reason)
        lines.append(f"  {n} x {reason} (first: {first.file}: case '{first.case}')")
    if len(by_reason) > most:
        lines.append(f"  ... and {len(by_reason) - most} more reasons")
    return lines


__all__ = ["Imported", "Skipped", "Unsupported", "collecting", "describe_skipped", "import_file", "recognises",
           "to_documents"]
