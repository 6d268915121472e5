"""Batches run on forked workers that already hold them (the many small cases of run_stage_on_dirs).

A run of 2,000 small cases spent a tenth of its time on ProcessPoolExecutor's own work: importing
multiprocessing, starting its threads and workers, and pickling each batch to a worker. Here the parent
makes the batches first, then forks its workers: each already holds every batch. A worker takes the next
batch's number from a pipe they share (the parent writes the numbers as 4-byte words; a read of 4 bytes
from a pipe takes one whole word), runs it, and writes its result, pickled, on a pipe of its own.

- An exception in a batch comes back pickled and is raised in the parent, as Future.result() raises it.
- A worker that dies (a signal, a user module calling os._exit) loses the batch it held (a worker says which
  batch it takes before running it): `lost` is called for it with how that worker ended, once the others are done.
- A failing or interrupted parent kills its workers and reaps them: no worker outlives the call.
- Workers ignore SIGINT (Ctrl-C reaches the whole process group; the parent ends them; it is held back over the
  fork, so none lands before the worker ignores it) and leave through os._exit whatever happens, never through the
  parent's code or cleanup. They write through stdout and stderr of their own, line-buffered and flushed at the
  end: the parent's may have been held by one of its threads (a progress bar's) at the fork.
- Where there is no os.fork, `available()` is False and the caller keeps to the process pool.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import struct
import sys
import time
from typing import Any, Callable

from .tuning import tune_allocator
from ..tensor import pages

_WORD = struct.Struct("<I")  # a batch's number, on the shared pipe
_HEAD = struct.Struct("<IBQ")  # a reply: batch number, 0 (result), 1 (exception) or _TOOK, pickled length
_TOOK = 2  # a worker took this batch (no payload)
READ_BYTES = 1 << 20
CHECK_SECONDS = 0.2  # how often the parent asks whether a worker whose pipe is still open has exited


def available() -> bool:
    return hasattr(os, "fork")


_WHILE_WAITING: list[Callable[[], None]] = []


def while_waiting(fn: Callable[[], None]) -> None:
    """Have fn run once in this process, the next time it waits for forked workers (the CLI's imports for what it
    prints after them). Its failure is ignored: what it prepares is done again where it is needed."""
    if fn not in _WHILE_WAITING:  # (a process verifying without workers, again and again, queues it once)
        _WHILE_WAITING.append(fn)


def _run_while_waiting() -> None:
    while _WHILE_WAITING:
        try:
            _WHILE_WAITING.pop()()
        except Exception:
            pass


def run_forked(fn: Callable[[Any], Any], batches: list, jobs: int, done: Callable[[int, Any], None],
               lost: Callable[[int, str], None]) -> None:
    """fn(batches[i]) for every i on `jobs` forked workers; done(i, result) in this process as each arrives,
    lost(i, why) for each batch whose worker died (after the others are done)."""
    if not batches:
        return
    tune_allocator()  # (before the fork: the workers inherit it)
    pool = _Pool()
    try:
        pool.start(fn, batches, max(1, min(jobs, len(batches))))
        seen = pool.serve(len(batches), done)
        ended = pool.reap()
    except BaseException:
        pool.kill()
        raise
    finally:
        pool.close()
    for i in range(len(batches)):
        if i not in seen:  # (its worker's end; a batch no worker took: the first worker's end that was not clean)
            pid = pool.holders.get(i)
            lost(i, ended.get(pid) if pid in ended else next(iter(ended.values()), "it ended without an answer"))


class _Pool:
    """The pipes and processes of one run_forked call."""

    def __init__(self) -> None:
        self.take_r, self.take_w = os.pipe()  # (the batch numbers: the workers read, the parent writes)
        os.set_blocking(self.take_w, False)
        self.workers: dict[int, int] = {}  # a worker's reply pipe -> its pid
        self.alive: set[int] = set()  # pids not reaped yet
        self.holders: dict[int, int] = {}  # a batch taken and not answered -> the pid of the worker holding it
        self.buffers: dict[int, bytearray] = {}  # a worker's reply pipe -> what was read of its next reply

    def start(self, fn: Callable[[Any], Any], batches: list, jobs: int) -> None:
        for _ in range(jobs):
            reply_r, reply_w = os.pipe()
            # SIGINT held back over the fork: the worker ignores it before it can arrive (else a Ctrl-C landing
            # between the fork and _work would unwind the worker through the parent's code)
            masked = _block(signal.SIGINT)
            try:
                pid = os.fork()
            except BaseException:
                _unblock(masked)
                os.close(reply_r)
                os.close(reply_w)
                raise
            if pid == 0:  # (the worker: never returns)
                _work(fn, batches, self.take_r, self.take_w, reply_r, reply_w, masked)
            self.workers[reply_r] = pid
            self.alive.add(pid)
            os.close(reply_w)
            _unblock(masked)  # (a Ctrl-C held back arrives here: the worker is known, so it is killed and reaped)
        os.close(self.take_r)
        self.take_r = -1

    def serve(self, count: int, done: Callable[[int, Any], None]) -> set[int]:
        """Hand out the batch numbers and read the replies until every worker has ended; the numbers of the
        batches answered. A batch's exception is raised here.

        A worker has ended when its pipe closes, or when it has exited (asked every CHECK_SECONDS) and its pipe
        is drained: a process the worker's batch forked (a user op's reference) holds the pipe open for as long
        as it lives."""
        seen: set[int] = set()
        pending = memoryview(b"".join(_WORD.pack(i) for i in range(count)))
        self.buffers.update({fd: bytearray() for fd in self.workers})
        open_fds = set(self.workers)
        poller = select.poll()  # (not select(): a descriptor past 1023 is out of its range)
        for fd in open_fds:
            poller.register(fd, select.POLLIN)
        poller.register(self.take_w, select.POLLOUT)
        try:  # (the first numbers, before this process turns to anything else: the workers wait for them)
            pending = pending[os.write(self.take_w, pending):]
        except (BlockingIOError, BrokenPipeError):  # (the loop below meets it again)
            pass
        _run_while_waiting()
        checked = time.monotonic()
        while open_fds:
            for fd, _ in poller.poll(CHECK_SECONDS * 1000):
                if fd == self.take_w:
                    try:  # (whole words, as the pipe's free space always is: every read and write is of whole words)
                        pending = pending[os.write(fd, pending):]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # (every worker has ended: what is left is lost, said by run_forked)
                        pending = pending[:0]
                    if not pending:
                        poller.unregister(fd)
                        self._close_take()  # (no more batches: a worker finding the pipe empty ends)
                    continue
                if not self._read(fd, seen, done):
                    open_fds.discard(fd)
                    poller.unregister(fd)
            if time.monotonic() - checked >= CHECK_SECONDS:
                checked = time.monotonic()
                for fd in [fd for fd in open_fds if _exited(self.workers[fd])]:
                    os.set_blocking(fd, False)
                    while self._read(fd, seen, done):
                        pass
                    open_fds.discard(fd)
                    poller.unregister(fd)
        return seen

    def _read(self, fd: int, seen: set[int], done: Callable[[int, Any], None]) -> bool:
        """Read what a worker's pipe holds and handle its whole replies; False at its end (or, non-blocking,
        when it holds nothing more)."""
        try:
            chunk = os.read(fd, READ_BYTES)
        except BlockingIOError:
            return False
        if not chunk:
            return False
        buf = self.buffers[fd]
        buf += chunk
        while len(buf) >= _HEAD.size:
            i, failed, size = _HEAD.unpack_from(buf)
            if len(buf) < _HEAD.size + size:
                break
            if failed == _TOOK:  # (the worker holds batch i: a batch lost is then put down to its end)
                del buf[:_HEAD.size]
                self.holders[i] = self.workers[fd]
                continue
            value = pickle.loads(memoryview(buf)[_HEAD.size:_HEAD.size + size])
            del buf[:_HEAD.size + size]
            if failed:
                raise value
            seen.add(i)
            self.holders.pop(i, None)
            done(i, value)
        return True

    def _close_take(self) -> None:
        if self.take_w >= 0:
            os.close(self.take_w)
            self.take_w = -1

    def kill(self) -> None:
        for pid in self.alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.reap()

    def reap(self) -> dict[int, str]:
        """Wait for every worker: {pid: how it ended} of those that did not end cleanly."""
        ended = {}
        for pid in sorted(self.alive):
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:
                status = 0
            self.alive.discard(pid)
            if status:
                ended[pid] = _ended(status)
        return ended

    def close(self) -> None:
        self._close_take()
        for fd in [self.take_r, *self.workers]:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.take_r = -1
        self.workers = {}


def _work(fn: Callable[[Any], Any], batches: list, take_r: int, take_w: int, reply_r: int, reply_w: int,
          masked: bool) -> None:
    """A worker's life: batches by number until the pipe is empty; then os._exit, whatever happens."""
    code = 70
    # What the worker inherited goes out of its collector's reach: never walked, so never copied page by page. Frozen
    # here, not in the parent before the fork: the parent would have to count its frozen objects first (to thaw only
    # what it froze), and counting walks them all, every call, in a process that keeps much frozen.
    gc.freeze()
    try:
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # (not the main thread: SIGINT stays held back instead)
            masked = False
        _unblock(masked)
        os.close(reply_r)
        os.close(take_w)
        pages.MAPPED_READS = True  # (a file truncated under a map ends this worker by SIGBUS, which the parent names)
        for name, fd in (("stdout", 1), ("stderr", 2)):  # (the parent's may be locked by one of its threads at the
            try:  # fork, a progress bar's say: a warning printed here would wait forever; these are fresh)
                setattr(sys, name, open(fd, "w", buffering=1, closefd=False, errors="replace"))
            except OSError:
                pass
        while True:
            word = os.read(take_r, _WORD.size)
            if len(word) < _WORD.size:
                break
            (i,) = _WORD.unpack(word)
            _write_all(reply_w, _HEAD.pack(i, _TOOK, 0))
            try:
                data, failed = pickle.dumps(fn(batches[i]), protocol=pickle.HIGHEST_PROTOCOL), 0
            except Exception as exc:  # (handed to the parent, which raises it)
                data, failed = _pickled_error(exc), 1
            _write_all(reply_w, _HEAD.pack(i, failed, len(data)) + data)
        code = 0
    finally:
        for stream in (sys.stdout, sys.stderr):  # (what the batches printed: os._exit flushes nothing)
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(code)


def _exited(pid: int) -> bool:
    """Whether the worker has exited (left to reap: reap() reads how)."""
    if not hasattr(os, "waitid"):  # (then its pipe's end is the only sign)
        return False
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _block(sig: int) -> bool:
    """Hold sig back (pthread_sigmask); whether it was held here (not where there is no such call)."""
    if not hasattr(signal, "pthread_sigmask"):
        return False
    return sig not in signal.pthread_sigmask(signal.SIG_BLOCK, {sig})


def _unblock(masked: bool) -> None:
    if masked:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _pickled_error(exc: Exception) -> bytes:
    return pickle.dumps(picklable(exc), protocol=pickle.HIGHEST_PROTOCOL)


def picklable(exc: BaseException) -> BaseException:
    """exc, or (one that does not pickle) a RuntimeError with its words: what a worker can send back."""
    try:
        pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"killed by {name}"
    return f"exit status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"wait status {status}"
