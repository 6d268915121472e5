"""The output directory gen writes into: size limits, writability, and stale temporaries.

Everything here runs before the first file is created, so a refused run leaves nothing behind.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

GiB = 1 << 30
# Temporaries gen and emulate leave only when killed: .<case>.partial-<pid>, .<case>.old-<pid>,
# .<file>.tmp-<pid>. Each names the process that made it, so a live one is never touched.
STALE_RE = re.compile(r"^\..+\.(?:partial|old|tmp)-(\d+)$")


@dataclass(frozen=True)
class SizeLimits:
    """Most storage bytes gen writes for one case, and for one run (inputs, outputs and goldens)."""

    per_case: int = 32 * GiB
    per_run: int = 64 * GiB


def human_bytes(n: int) -> str:
    """1536 -> '1.5 KiB': sizes in messages people read."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024 or unit == "EiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": GiB, "gb": GiB, "gib": GiB, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40, "p": 1 << 50, "pib": 1 << 50}


def parse_size(text: str) -> int:
    """'64G', '1.5TiB', '1e9' -> bytes (binary units); ValueError says what is accepted."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", text or "")
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"expected a size such as 64G, 500MiB or 1e9, got {text[:40]!r}")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not value >= 1 or value > 1 << 62:
        raise ValueError(f"size {text[:40]!r} is out of range")
    return int(value)


def check_sizes(cases, limits: SizeLimits) -> None:
    """Refuse, before writing anything, a case or run larger than its limit (--max-bytes)."""
    total = 0
    for c in cases:
        n = c.storage_bytes
        if n > limits.per_case:
            raise UserError(f"case {c.case_id} would write {human_bytes(n)}, over the per-case limit of "
                            f"{human_bytes(limits.per_case)} (raise it with --max-case-bytes)")
        total += n
    if total > limits.per_run:
        raise UserError(f"these {len(cases)} cases would write {human_bytes(total)}, over the per-run limit of "
                        f"{human_bytes(limits.per_run)} (raise it with --max-bytes, or pick cases with --case/--shard)")


def check_free_space(root: Path, needed: int) -> None:
    """Refuse a run the output file system cannot hold (a prediction: others may fill it meanwhile)."""
    probe = next((p for p in [root, *root.parents] if p.exists()), Path("."))
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return
    if needed > free:
        raise UserError(f"these cases need {human_bytes(needed)} but only {human_bytes(free)} is free there",
                        where=str(root))


def prepare_output_dir(root: Path) -> None:
    """Create the output directory and prove it writable; one clear UserError otherwise."""
    if root.exists() and not root.is_dir():
        raise UserError("output path exists and is not a directory", where=str(root))
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=root)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"cannot write to the output directory: {exc.strerror}", where=str(exc.filename or root)) from None


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OverflowError:
        return False
    return True


def remove_stale(root: Path, depth: int = 0) -> list[Path]:
    """Remove temporaries left in root (and, with depth, in its subdirectories) by killed runs.

    Only those whose process is gone: a concurrent gen's work in progress is never touched.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        m = STALE_RE.match(entry.name)
        is_dir = entry.is_dir(follow_symlinks=False)
        if m is None:
            if depth > 0 and is_dir:
                removed += remove_stale(Path(entry.path), depth - 1)
            continue
        if pid_alive(int(m.group(1))):
            continue
        path = Path(entry.path)
        if is_dir:
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed
