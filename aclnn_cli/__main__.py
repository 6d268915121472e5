"""The aclnn-cli command (and python -m aclnn_cli): the click group, and nothing it started left alive when it
returns (reaper.py), nor waited for: a thread a user's op started and never ends does not hold the exit. Tests
that call the group in-process (click's CliRunner) keep their own children."""

from __future__ import annotations

import os
import sys


def console() -> None:
    from .pipeline import reaper
    from .cli.main import main
    from .cli.common import open_files_limit

    reaper.adopt_orphans()
    open_files_limit()
    leaving: SystemExit | None = None
    try:
        main(prog_name="aclnn-cli")
    except SystemExit as exc:
        leaving = exc
        raise
    finally:
        _frozen_for_exit()
        reaper.end_descendants()
        if leaving is not None:
            _past_threads(leaving.code)


def _frozen_for_exit() -> None:
    """Every object left moved out of the garbage collector's reach, the command being done: the interpreter's
    exit otherwise walks them all once more in a last full collection (every module's objects, NumPy's and
    rich's, and a run's thousands of results: 10-20 ms of a 0.4 s verify of 2,000 small cases). Nothing is
    lost by it: the process ends now, the system frees its memory and descriptors, and the tool keeps nothing
    that a collection would have to finalise (a spill file is unlinked when made; workers leave by os._exit)."""
    import gc

    gc.freeze()


def _past_threads(code) -> None:
    """Exit now with `code` if a thread other than a daemon is still running (a user op's that sleeps: Python's
    own exit would wait for it for ever); else return, for the ordinary exit. Output is flushed first, as the
    ordinary exit does (a stream that cannot take it: status 120, as Python gives)."""
    import threading

    if not any(t.is_alive() and not t.daemon and t is not threading.main_thread() for t in threading.enumerate()):
        return
    status = code if isinstance(code, int) else (0 if code is None else 1)
    if isinstance(code, str):
        print(code, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 120
    os._exit(status)


if __name__ == "__main__":
    console()
