"""Where a run's report files go (--json, --junit, --html, --csv-errors), proven before the run does its work."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UserError
from .regular import kind


def check_output_paths(*files: Path | None, csv_dir: Path | None = None) -> None:
    """Prove, before a run does its work, that its report files (and CSV directory) can be written.

    Creates missing parent directories, as the final write would, and a probe file beside each.
    """
    targets = [(Path(f), False) for f in files if f is not None] + ([(Path(csv_dir), True)] if csv_dir else [])
    seen: set[str] = set()
    for path, is_dir in targets:
        if not str(path):
            raise UserError("an empty path cannot be written")
        if is_dir and path.exists() and not path.is_dir():
            raise UserError("exists and is not a directory", where=str(path))
        if not is_dir and path.is_dir():
            raise UserError("is a directory; give a file name", where=str(path))
        if not is_dir and path.exists() and not path.is_file():  # (renamed over, /dev/null would be a file)
            raise UserError(f"is not a regular file ({kind(path.stat().st_mode)}): a report is written to a "
                            "temporary name and renamed over its path, which would replace it; give a file name",
                            where=str(path))
        folder = path if is_dir else path.parent
        if (folder / "case.json").exists():  # (`--junit OUT/case/case.json`: exit 0, and the case was gone)
            raise UserError(f"is inside the case directory {folder}, whose files gen wrote; give a path outside it",
                            where=str(path))
        key = os.path.realpath(path)
        if key in seen:
            raise UserError("is given for two outputs; each needs a file of its own", where=str(path))
        seen.add(key)
        blocker = next((p for p in [folder, *folder.parents] if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            raise UserError(f"cannot write {path}: {blocker} is a file, not a directory", where=str(path))
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".{path.name}.tmp-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise UserError(f"cannot write here: {exc.strerror}", where=str(exc.filename or path)) from None
