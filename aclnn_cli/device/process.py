"""One runner process, treated as a suspect: every wait has a deadline, nothing of it outlives `run`.

The runner starts in a session (and so a process group) of its own; whatever it starts stays in that
group unless it leaves on purpose. Ending it always ends the group: SIGTERM, then SIGKILL after
GRACE seconds, on a normal end too (children left behind are reported), on timeouts, errors and
Ctrl-C. Requests are written and replies read without blocking, in slices of SLICE seconds, so a
child that holds the reply pipe open cannot make a read wait for an EOF that never comes: the
runner's own exit ends the wait.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
import time
from typing import Mapping

from ..errors import UserError
from .replies import MAX_LINE, LineReader

TAIL_BYTES = 2000  # of the runner's output, in a CRASH or TIMEOUT verdict
GRACE = 2.0  # seconds the runner's group has to leave after SIGTERM, before SIGKILL
KILL_WAIT = 5.0  # seconds to wait for a SIGKILLed process (one stuck in a driver is left, not waited for)
SLICE = 0.1  # seconds between looks at whether the runner still runs, while waiting for it


class RunnerGone(Exception):
    """The runner process ended (CRASH) or was killed (TIMEOUT); detail says how."""

    def __init__(self, verdict: str, detail: str) -> None:
        super().__init__(detail)
        self.verdict, self.detail = verdict, detail


def describe_exit(code: int) -> str:
    if code < 0 and -code in signal.valid_signals():
        return f"killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


class RunnerProcess:
    """The runner: requests on its stdin, replies on a pipe of their own, its output in a log file.

    `timeout` bounds each wait: the start (until the first reply), each case (send() to its reply)
    and the end (finish()).
    """

    def __init__(self, command: list[str], env: Mapping[str, str] | None, timeout: float) -> None:
        self.timeout, self.reader, self.mark = timeout, LineReader(), 0
        self.log = tempfile.TemporaryFile()
        read_fd, write_fd = os.pipe()
        try:
            self.proc = subprocess.Popen([*command, "--reply-fd", str(write_fd)], stdin=subprocess.PIPE,
                                         stdout=self.log, stderr=self.log, pass_fds=(write_fd,),
                                         env=dict(env) if env is not None else None, start_new_session=True)
        except OSError as exc:
            os.close(read_fd)
            self.log.close()
            raise UserError(f"cannot start the runner: {exc.strerror}", where=command[0]) from None
        finally:
            os.close(write_fd)
        self.replies, self.pgid = read_fd, self.proc.pid  # (a session leader leads its process group)
        os.set_blocking(read_fd, False)
        os.set_blocking(self.proc.stdin.fileno(), False)
        self.deadline = time.monotonic() + timeout  # the first reply ('ready') is due within the timeout

    # -- talking -------------------------------------------------------------------------------------

    def send(self, text: str) -> None:
        """Write one request; the case's deadline starts now. RunnerGone if the runner will not take it."""
        self.mark = os.fstat(self.log.fileno()).st_size
        self.deadline = time.monotonic() + self.timeout
        data, fd = memoryview(text.encode()), self.proc.stdin.fileno()
        while data:
            try:
                data = data[os.write(fd, data):]
                continue
            except BlockingIOError:
                pass
            except OSError:  # (BrokenPipeError: it closed its input or ended)
                self._gone(closed="its input")
            if self._exited():
                self._gone(closed="its input")
            if time.monotonic() >= self.deadline:
                self.terminate()
                raise RunnerGone("TIMEOUT", f"the runner did not read its request within {self.timeout:g} s; "
                                            f"the runner was killed")
            select.select([], [fd], [], self._slice())

    def line(self) -> bytes:
        """The next reply line, by the deadline. RunnerGone when the runner ends or outlives it;
        MalformedReply (the runner is then ended) for a line longer than MAX_LINE."""
        while True:
            line = self._take_line()
            if line is not None:
                return line
            if time.monotonic() >= self.deadline:  # (checked first: a trickle of bytes cannot stretch it)
                self.terminate()
                raise RunnerGone("TIMEOUT", f"no answer within {self.timeout:g} s; the runner was killed")
            ready, _, _ = select.select([self.replies], [], [], self._slice())
            if ready:
                self._read()
            elif self._exited():  # whatever it wrote before it exited is in the pipe already
                while self.reader.wants_more() and self._read(at_exit=True):
                    pass
                line = self._take_line()
                if line is not None:
                    return line
                self._gone()

    def _take_line(self) -> bytes | None:
        try:
            return self.reader.line()
        except BaseException:  # (MalformedReply: an overlong line; the runner is not trusted further)
            self.terminate()
            raise

    def _read(self, at_exit: bool = False) -> bool:
        """One read of the reply pipe into the reader; False when nothing more is there."""
        try:
            chunk = os.read(self.replies, MAX_LINE + 1)
        except BlockingIOError:
            return False
        if not chunk:  # every writer closed it: the runner and its children
            if at_exit:
                return False
            self._gone(closed="its replies")
        self.reader.feed(chunk)
        return True

    def _slice(self) -> float:
        return max(0.0, min(SLICE, self.deadline - time.monotonic()))

    def _gone(self, closed: str = ""):
        """The runner ended, or closed a pipe and may be ending: wait for it until the deadline."""
        while not self._exited():
            if time.monotonic() >= self.deadline:
                self.terminate()
                raise RunnerGone("CRASH", f"the runner closed {closed} and was killed")
            time.sleep(self._slice())
        self.terminate()  # its children, if it left any, go with it
        raise RunnerGone("CRASH", f"the runner {describe_exit(self.proc.returncode)}")

    def tail(self) -> str:
        """What the runner printed since the current case began (its last TAIL_BYTES)."""
        self.log.flush()
        end = os.fstat(self.log.fileno()).st_size
        start = max(self.mark, end - TAIL_BYTES)
        return os.pread(self.log.fileno(), end - start, start).decode("utf-8", "replace").strip()

    # -- ending --------------------------------------------------------------------------------------

    def _exited(self) -> bool:
        """Whether the runner has exited. It is not reaped here: until terminate() has cleared its group,
        its process id stays taken, so the group's id cannot name anyone else's processes."""
        if self.proc.returncode is not None or not hasattr(os, "waitid"):
            return self.proc.poll() is not None
        try:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def terminate(self) -> bool:
        """End everything in the runner's group (SIGTERM, SIGKILL after GRACE) and reap the runner.

        Returns whether anything in the group was still running.
        """
        running = _group_running(self.pgid)
        try:
            if running:
                _signal_group(self.pgid, signal.SIGTERM)
                if not _settle(self.pgid, GRACE):
                    _signal_group(self.pgid, signal.SIGKILL)
                    _settle(self.pgid, KILL_WAIT)
        except BaseException:  # (a second Ctrl-C while waiting: no more grace)
            _signal_group(self.pgid, signal.SIGKILL)
            raise
        try:
            self.proc.wait(timeout=KILL_WAIT)
        except subprocess.TimeoutExpired:  # stuck in the driver (uninterruptible): leave it, do not hang
            pass
        return running

    def finish(self) -> list[str]:
        """End the runner after its last case: EOF lets it release the device; its group goes with it.

        Returns what went wrong at the end: a non-zero exit (e.g. a sanitizer's leak report), a runner
        that did not exit within the timeout, processes it left behind.
        """
        self.mark = os.fstat(self.log.fileno()).st_size
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        end = time.monotonic() + self.timeout
        while not self._exited() and time.monotonic() < end:
            time.sleep(max(0.0, min(SLICE, end - time.monotonic())))
        exited = self._exited()
        left_behind = self.terminate() and exited
        problems = []
        if not exited:
            problems.append(f"the runner did not exit within {self.timeout:g} s of its last case and was killed")
        elif self.proc.returncode != 0:
            problems.append(f"the runner {describe_exit(self.proc.returncode)} at the end")
        if problems and self.tail():
            problems[0] += f"; its last output:\n{self.tail()}"
        if left_behind:
            problems.append("the runner left processes behind when it exited (killed)")
        return problems

    def close(self) -> None:
        """Release the pipes and the log (after terminate() or finish()); again: nothing."""
        for f in (self.proc.stdin, self.log):
            try:
                f.close()
            except OSError:
                pass
        if self.replies >= 0:
            os.close(self.replies)
            self.replies = -1


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_running(pgid: int) -> bool:
    """Whether a process of the group runs (zombies, which hold nothing, do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        names = os.listdir("/proc")
    except OSError:  # no procfs: a zombie no one reaps would count as running (the wait is bounded)
        return True
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[2:3] == [str(pgid).encode()] and fields[0] not in (b"Z", b"X"):
                return True
    return False


def _settle(pgid: int, seconds: float) -> bool:
    """Wait up to `seconds` for the group to empty; whether it did."""
    end = time.monotonic() + seconds
    while _group_running(pgid):
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)
    return True
