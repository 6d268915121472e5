"""The aclnn-cli command (and python -m aclnn_cli): the click group, and nothing it started left alive when it
returns (reaper.py), nor waited for: a thread a user's op started and never ends does not hold the exit. Tests
that call the group in-process (click's CliRunner) keep their own children, and their process."""

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
            _leave(leaving.code)


def _frozen_for_exit() -> None:
    """Every object left moved out of the garbage collector's reach, the command being done: should the exit walk
    them (a caller that goes on), they are not all collected once more. Nothing is lost by it: the tool keeps
    nothing that a collection would have to finalise (a spill file is unlinked when made; workers leave by
    os._exit)."""
    import gc

    gc.freeze()


def _leave(code) -> None:
    """End the process now with `code`, as Python's own exit would, less what only delays a process that is
    ending: the atexit functions run and the output is flushed (a stream that cannot take it: status 120, as
    Python gives), then the process exits without tearing down every module and object one by one (10 ms of a
    verify of 2,000 small cases). Nor does it wait for a thread still running (a user op's that sleeps: Python's
    own exit would wait for it for ever). Every file the tool writes is closed before it is renamed into place.
    Under a profiler, tracer or debugger (python -m cProfile writes its profile after the command returns), the
    ordinary exit."""
    import atexit

    if sys.getprofile() is not None or sys.gettrace() is not None:
        return

    status = code if isinstance(code, int) else (0 if code is None else 1)
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 120
    os._exit(status)


if __name__ == "__main__":
    console()
