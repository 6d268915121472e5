"""The aclnn-cli command (and python -m aclnn_cli): the click group, and nothing it started left alive when it
returns (reaper.py), nor waited for: a thread a user's op started and never ends does not hold the exit. Tests
that call the group in-process (click's CliRunner) keep their own children, and their process."""

from __future__ import annotations

import io
import os
import signal
import sys


def console() -> None:
    from .pipeline import reaper
    from .cli.main import main
    from .cli.common import open_files_limit

    _standard_descriptors()
    signal.signal(signal.SIGINT, _interrupt)
    reaper.adopt_orphans()
    open_files_limit()
    _marked_stdout()
    leaving: SystemExit | None = None
    try:
        main(prog_name="aclnn-cli")
    except SystemExit as exc:
        leaving = SystemExit(INTERRUPTED) if _interrupted and exc.code == 1 else exc  # (click's "Aborted!": 1)
        raise leaving from None
    except OSError as exc:
        if not getattr(exc, "aclnn_output", False):
            raise
        leaving = _output_failed(exc)
        raise leaving from None
    finally:
        reaper.end_descendants()
        if leaving is not None:
            _leave(leaving.code)


INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C ended: not verify's 1, "a case failed"
_interrupted = False


def _interrupt(signum, frame) -> None:
    """Ctrl-C: KeyboardInterrupt as ever (the run stops, its files are cleaned up; click says "Aborted!"), and the
    status becomes INTERRUPTED: click's 1 would read in CI as a failed gate."""
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def _standard_descriptors() -> None:
    """Standard input, output or error closed at start (`>&-`, `2>&-`): /dev/null in its place, and a stream for
    it. Else the first file the command opens takes the free number, and whatever then writes to standard output
    or error (a runner, a library, a progress line) writes into that file; and Python, with no stream, fails at
    the first print (verify's summary, gen's progress) instead of writing into nothing as asked."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        if null != fd:  # (the lowest free number: fd itself, unless a lower one is closed too and took it)
            os.dup2(null, fd)
            os.close(null)
        stream = open(fd, "r" if fd == 0 else "w", closefd=False, errors="backslashreplace" if fd == 2 else None)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


class _MarkedOutput(io.TextIOWrapper):
    """Standard output whose failed writes say they are its own (aclnn_output on the OSError, its type kept): a full
    disk or a closed descriptor behind stdout is then one line from console(), where any other OSError escaping a
    command stays what it is (a traceback: a bug)."""

    def write(self, text):
        try:
            return super().write(text)
        except OSError as exc:
            exc.aclnn_output = True
            raise

    def flush(self):
        try:
            return super().flush()
        except OSError as exc:
            exc.aclnn_output = True
            raise


def _marked_stdout() -> None:
    """sys.stdout as a _MarkedOutput over the same buffer, with the same encoding and buffering."""
    out = sys.stdout
    if out is None or type(out) is not io.TextIOWrapper:  # (closed at start, or a caller's own stream: left alone)
        return
    try:
        marked = _MarkedOutput(out.buffer, encoding=out.encoding, errors=out.errors,
                               line_buffering=out.line_buffering, write_through=out.write_through)
        out.detach()
    except (ValueError, OSError, AttributeError):
        return
    sys.stdout = sys.__stdout__ = marked


def _output_failed(exc: OSError) -> SystemExit:
    """What a command ends with when standard output would not take its text: a closed pipe (`| head`: the reader
    has what it wanted) quietly with status 1, as Python's documentation advises; anything else (a full disk,
    /dev/full) one line and status 2. Standard output then points at /dev/null: the exit's flush fails no more."""
    from .cli.common import quiet_stdout

    quiet_stdout()
    if isinstance(exc, BrokenPipeError):
        return SystemExit(1)
    try:
        print(f"aclnn-cli: error: cannot write to standard output: {exc.strerror or exc}", file=sys.stderr)
    except (OSError, ValueError, AttributeError):
        pass
    return SystemExit(2)


def _leave(code) -> None:
    """End the process now with `code`, as Python's own exit would, less what only delays a process that is ending:
    the atexit functions run and the output is flushed (standard output that cannot take it: _output_failed's line
    and status; standard error: 120, as Python gives),
    then the process exits without tearing down every module and object one by one and collecting them all once
    more (10-30 ms of a verify of 2,000 small cases). The tool keeps nothing a collection must finalise: a spill
    file is unlinked when made, a file written is closed before it is renamed into place. Nor does it wait for a
    thread still running (a user op's that sleeps: Python's own exit would wait for it for ever).

    Python's own exit instead, where something may need its teardown and no thread would hold it: a user's op module
    was loaded (a file it left open is flushed then), or a profiler, tracer or debugger is attached (python -m
    cProfile writes its profile after the command returns)."""
    import atexit
    import threading

    user = sys.modules.get("aclnn_cli.ops.user")  # (not imported: no user code ran, and `--help` loads no op)
    waiting = any(t.is_alive() and not t.daemon and t is not threading.main_thread() for t in threading.enumerate())
    if not waiting and ((user is not None and user.ran_user_code()) or _observed()):
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
        except OSError as exc:
            status = _output_failed(exc).code if stream is sys.stdout else 120
        except ValueError:  # (a stream closed under the command: as Python's exit, 120)
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
