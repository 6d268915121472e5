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
        reaper.end_descendants()
        if leaving is not None:
            _leave(leaving.code)


def _leave(code) -> None:
    """End the process now with `code`, as Python's own exit would, less what only delays a process that is ending:
    the atexit functions run and the output is flushed (a stream that cannot take it: status 120, as Python gives),
    then the process exits without tearing down every module and object one by one and collecting them all once
    more (10-30 ms of a verify of 2,000 small cases). The tool keeps nothing a collection must finalise: a spill
    file is unlinked when made, a file written is closed before it is renamed into place. Nor does it wait for a
    thread still running (a user op's that sleeps: Python's own exit would wait for it for ever).

    Python's own exit instead, where something may need its teardown and no thread would hold it: a user's op module
    was loaded (a file it left open is flushed then), or a profiler, tracer or debugger is attached (python -m
    cProfile writes its profile after the command returns)."""
    import atexit
    import threading

    from .ops.user import ran_user_code

    waiting = any(t.is_alive() and not t.daemon and t is not threading.main_thread() for t in threading.enumerate())
    if not waiting and (ran_user_code() or _observed()):
        return
    status = code if isinstance(code, int) else (0 if code is None else 1)
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # (started with that descriptor closed: Python has no stream for it)
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            status = 120
    os._exit(status & 0xFF)  # (the status the system keeps: as Python's exit, the low byte; os._exit takes a C int)


def _observed() -> bool:
    """Whether a profiler, tracer or debugger is attached: a hook (sys.setprofile, sys.settrace), or on Python
    3.12+ a sys.monitoring tool (cProfile's and debuggers' way there)."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)
    return monitoring is not None and any(monitoring.get_tool(i) is not None for i in range(6))


if __name__ == "__main__":
    console()
