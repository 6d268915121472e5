"""Run independent units of work on forked workers or a process pool (or inline for --jobs 1)."""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ..errors import UserError
from . import forkpool
from .tuning import tune_allocator

if TYPE_CHECKING:
    from concurrent.futures import Future


class WorkerLost(Exception):
    """A forked worker ended without answering for a call (Runner(forked=True)): what BrokenProcessPool is to the
    process pool."""


def _pool_worker_start() -> None:
    """A pool worker's start: the allocator tuned, and what it inherited from the parent frozen, so that its garbage
    collector never walks (and so never copies, page by page) the parent's objects (as forkpool's workers do)."""
    tune_allocator()
    gc.freeze()


class Runner:
    """submit(fn, *args) -> handle; result(handle) waits. Inline when jobs == 1 (no pickling).

    forked: calls wait until a result is asked for, then all of them run on workers forked from this process
    (forkpool.py), which hold the calls' arguments already: no pool to import and start, no arguments pickled (a
    64M-element verify's ranges each carried its case's manifest). For callers that ask for their results in
    batches (a case's ranges); a stream of calls whose workers should stay (the report's plots) keeps the pool."""

    def __init__(self, jobs: int, forked: bool = False) -> None:
        tune_allocator()
        self.jobs = max(1, jobs)
        self.pool = None
        self.lost: tuple[type[BaseException], ...] = (WorkerLost,)  # (what a worker's death raises from result())
        self._calls: list[_Call] | None = None
        if self.jobs > 1 and forked and forkpool.available():
            self._calls = []
        elif self.jobs > 1:
            from concurrent.futures import ProcessPoolExecutor  # (here: a one-process run never imports it)
            from concurrent.futures.process import BrokenProcessPool

            self.pool = ProcessPoolExecutor(max_workers=self.jobs, initializer=_pool_worker_start)
            self.lost = (WorkerLost, BrokenProcessPool)

    def submit(self, fn: Callable, *args: Any) -> Future | _Call:
        if self.pool is not None:
            return self.pool.submit(fn, *args)
        if self._calls is not None:
            call = _Call(self, fn, args)
            self._calls.append(call)
            return call
        from concurrent.futures import Future  # (imported where used: a run of small cases on forked workers
        # never makes one, and the package with its logging and threading costs a few ms of every start)

        f: Future = Future()
        try:
            f.set_result(fn(*args))
        except BaseException as exc:  # re-raised by result()
            f.set_exception(exc)
        return f

    def map(self, fn: Callable, items: Iterable) -> list:
        return [f.result() for f in [self.submit(fn, *args) for args in items]]

    def flush(self) -> None:
        """Run every call waiting (forked): each gets its result, its exception, or WorkerLost."""
        calls, self._calls = self._calls, []
        if not calls:
            return

        def lost(i: int, why: str) -> None:
            calls[i].settle(None, WorkerLost(why))

        forkpool.run_forked(_answer, calls, self.jobs, lambda i, reply: calls[i].settle(*reply), lost)

    def close(self) -> None:
        """Stop the pool and end its workers. They are killed, not awaited: a worker exits through Python's
        shutdown, which waits for every non-daemon thread, and a user op's thread may sleep for ever."""
        self._calls = None if self._calls is None else []  # (calls never asked for are not run)
        if self.pool is not None:
            workers = list((getattr(self.pool, "_processes", None) or {}).values())
            manager = getattr(self.pool, "_executor_manager_thread", None)
            self.pool.shutdown(wait=False, cancel_futures=True)
            for p in workers:
                p.kill()
            for p in workers:
                p.join()
            # Its management thread ends once it sees the workers gone, closing its wake-up pipe. Left running, it
            # could close that pipe while the interpreter's exit hook writes to it (CPython 3.11 checks, then
            # writes, unlocked: "Exception ignored ... Bad file descriptor" on stderr at exit).
            if manager is not None:
                manager.join(timeout=30)

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Call:
    """A call waiting for its Runner's next flush (forked workers); result() as Future.result()."""

    __slots__ = ("runner", "fn", "args", "done", "value", "error")

    def __init__(self, runner: Runner, fn: Callable, args: tuple) -> None:
        self.runner, self.fn, self.args = runner, fn, args
        self.done, self.value, self.error = False, None, None

    def settle(self, value: Any, error: BaseException | None) -> None:
        self.done, self.value, self.error = True, value, error

    def result(self) -> Any:
        if not self.done:
            self.runner.flush()
        if not self.done:  # (the runner was closed first)
            raise WorkerLost("the call was never run")
        if self.error is not None:
            raise self.error
        return self.value


def _answer(call: _Call) -> tuple[Any, BaseException | None]:
    """A forked worker's reply for one call: (result, None) or (None, its exception), so that one call's exception
    leaves the other calls' results standing."""
    try:
        return call.fn(*call.args), None
    except Exception as exc:
        return None, forkpool.picklable(exc)


def worker_died(what: str, lost: BaseException | None = None) -> UserError:
    """The one line for a worker that died under a unit of work (BrokenProcessPool, or a forked worker's WorkerLost,
    which says how: "killed by SIGBUS", a file truncated under verify's map of it)."""
    how = f"{lost}; " if isinstance(lost, WorkerLost) and str(lost) else ""
    return UserError(f"the worker process running {what} died ({how}a user op calling os._exit, a signal, or out of "
                     f"memory); run it with --jobs 1 to see it in this process")


def jobs_for(jobs: int, units: int) -> int:
    """No more workers than units of work: a single small case runs inline, without a pool."""
    return max(1, min(jobs, units))


def as_completed(futures: list):
    if not futures:  # (a run with nothing for the pool imports nothing for it)
        return
    if isinstance(futures[0], _Call):  # (forked: they all run at once)
        futures[0].runner.flush()
        yield from futures
        return
    from concurrent.futures import FIRST_COMPLETED, wait

    pending = set(futures)
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        yield from done


@contextmanager
def paused_gc():
    """The cyclic garbage collector off for a batch of small cases.

    Each case allocates thousands of small containers (a parsed manifest, results), none in cycles;
    the collector kept walking them (about 5% of verify). Whatever cycles a batch leaves are collected
    once it is switched back on.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


INLINE_SECONDS = 0.005  # work done in this process before deciding whether workers are worth starting
WORKER_START_SECONDS = 0.015  # what starting them costs a run's wall time (forks, their first batches' set-up)


def inline_first(items: list, run_here: Callable[[list], None], group: int = 8, jobs: int = 2) -> list:
    """Run items here, `group` at a time, for INLINE_SECONDS, and on to the end where what is left would take less
    than starting `jobs` workers saves; return the rest, for the workers.

    The first items measure what one costs. A short run (a few cases) is done sooner without workers; a long one
    is shared from almost its start (2,000 small cases: 50 ms here before the workers, as this was, left the
    other core idle for it, a tenth of a verify). Results do not depend on where an item runs."""
    if INLINE_SECONDS <= 0:  # (none here: every item to the workers)
        return items
    start, at = time.perf_counter(), 0
    while at < len(items):
        spent = time.perf_counter() - start
        if spent >= INLINE_SECONDS and at:
            left = spent / at * (len(items) - at)  # (at this run's own pace)
            if left > WORKER_START_SECONDS * jobs / max(jobs - 1, 1):  # (left / jobs + the start, against left)
                break
        run_here(items[at:at + group])
        at += group
    return items[at:]


SMALL_BATCH_ELEMENTS = 1 << 20  # a batch of small cases carries about this much work


def batches(items: list, size_of: Callable[[Any], int], jobs: int, most: int = 256) -> list[list]:
    """Group many small units into batches for the pool, keeping their order.

    Dispatching a tiny case costs more than computing it (pickling, a round trip to a worker):
    batches of about SMALL_BATCH_ELEMENTS elements (at most `most` units) amortise that. Each batch
    is a quarter of a worker's share of what is left, so they shrink toward the end: a worker that
    draws the last batch (on a slower core, say) keeps the others waiting only briefly.
    """
    if not items:
        return []
    sizes = [max(1, size_of(x)) for x in items]
    left = sum(sizes)
    least = max(1, left // (16 * jobs))
    out: list[list] = [[]]
    load, target = 0, max(least, min(SMALL_BATCH_ELEMENTS, left // (4 * jobs)))
    for x, size in zip(items, sizes):
        if out[-1] and (load >= target or len(out[-1]) >= most):
            out.append([])
            left -= load
            load, target = 0, max(least, min(SMALL_BATCH_ELEMENTS, left // (4 * jobs)))
        out[-1].append(x)
        load += size
    return out
