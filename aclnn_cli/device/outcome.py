"""What a device run leaves beside a case, and whether it agrees with what the runner answered.

`status.txt` (phase one's status, written by the runner or emulate) and `run-verdict.txt` (written
by `run` when the case did not complete or the runner's answer and files disagree; `verify` reports
it instead of judging the dump) are read as files another program wrote: regular files only, opened
without blocking, bounded in size.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..casedir import manifest as M
from ..tensor.status import NAMES as STATUS_NAMES
from ..errors import UserError
from ..casedir.manifest import CaseManifest
from ..tensor.storage import atomic_write_text
from ..files.regular import bounded_regular_bytes
from ..files.text import clip
from .replies import parse_status, quote

RUN_VERDICT_FILE = "run-verdict.txt"  # first line the verdict (VERDICTS), then why
# CRASH, TIMEOUT: the runner died or outlived --timeout; ERROR: the case could not run or the runner's
# answer is malformed or contradicts its files; STATUS: phase one's status is not the expected one;
# MISSING: the runner answered 'done' without the status file or a dump.
VERDICTS = ("CRASH", "TIMEOUT", "ERROR", "STATUS", "MISSING")
VERDICT_LIMIT = 16 << 10  # bytes of a verdict file (the tail of a runner's output is 2000)
STATUS_LIMIT = 64  # bytes of a status file (a status is at most 11 characters)


def status_mismatch(got: int, expected: int) -> str:
    """The reason of a STATUS verdict (run's and verify's)."""
    return (f"phase one returned {got} ({STATUS_NAMES.get(got, 'unknown')}), "
            f"expected {expected} ({STATUS_NAMES.get(expected, 'unknown')})")


def read_status_file(path: str) -> int | None:
    """Phase one's status from a status file; None if there is none. Otherwise one UserError naming it."""
    data = bounded_regular_bytes(path, STATUS_LIMIT, "status file")
    if data is None:
        return None
    text = data.decode("utf-8", "replace").strip()
    status = parse_status(text)
    if status is None:
        raise UserError(f"status file must hold phase one's status as a decimal integer, got '{clip(text, 40)}'",
                        where=path)
    return status


def check_done(m: CaseManifest, status: int) -> tuple[str, str] | None:
    """(verdict, reason) when a 'done <id> <status>' answer and the case's files disagree, else None."""
    path = str(m.dir / M.STATUS_FILE)
    try:
        written = read_status_file(path)
    except UserError as exc:
        return "ERROR", str(exc)
    if written is None:
        return "MISSING", f"the runner answered 'done' but wrote no status file at {path}"
    if written != status:
        return "ERROR", f"the runner answered status {status} but {path} holds {written}"
    if status != m.expect_status:
        return "STATUS", status_mismatch(status, m.expect_status)
    if status != 0:
        return None
    for t in m.tensors:
        if t.role != "output" or t.dump is None:
            continue
        try:
            regular = stat.S_ISREG(os.stat(t.dump).st_mode)
        except FileNotFoundError:
            return "MISSING", f"the runner answered 'done' but wrote no dump at {t.dump}"
        except OSError as exc:
            return "ERROR", f"{t.dump}: cannot look at the dump: {exc.strerror}"
        if not regular:
            return "ERROR", f"{t.dump}: the dump is not a regular file"
    return None


def write_verdict(case_dir: Path, verdict: str, detail: str) -> None:
    atomic_write_text(case_dir / RUN_VERDICT_FILE, f"{verdict}\n{detail}\n")


def forget_run_verdict(case_dir: Path | str) -> None:
    """Drop a device run's verdict (emulate writes results of its own)."""
    path = os.path.join(case_dir, RUN_VERDICT_FILE)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise UserError(f"cannot remove an earlier run verdict: {exc.strerror}", where=path) from None


def read_verdict(case_dir: Path | str) -> tuple[str, str] | None:
    """(verdict, detail) if the last run of this case did not complete or its files disagreed, else None.

    A verdict file that cannot be read, is not a regular file, is too large or names no verdict is an
    ERROR of the case (never a PASS: something wrote it).
    """
    path = os.path.join(case_dir, RUN_VERDICT_FILE)
    if not os.access(path, os.F_OK, follow_symlinks=False):  # (the common case, asked cheaply: a failed open
        return None  # raises, at 5x the cost; a symlink is looked at below, and a loop or a dangling one told apart)
    try:
        data = bounded_regular_bytes(path, VERDICT_LIMIT, "run verdict")
    except UserError as exc:
        return "ERROR", str(exc)
    if data is None:
        return None
    verdict, _, detail = data.decode("utf-8", "replace").partition("\n")
    verdict = verdict.strip()
    if verdict not in VERDICTS:
        return "ERROR", f"{path}: the run verdict {quote(verdict, 40)} is none of {', '.join(VERDICTS)}"
    return verdict, detail.strip()
