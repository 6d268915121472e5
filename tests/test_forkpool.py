"""forkpool.run_forked: every batch's result reaches the parent once; a batch's exception is raised there; a
worker that dies loses only its batch, reported with why; no worker outlives the call."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from aclnn_cli.pipeline import forkpool
from aclnn_cli.errors import UserError
from aclnn_cli.pipeline.stages import Stage, run_stage_on_dirs

pytestmark = pytest.mark.skipif(not forkpool.available(), reason="no os.fork here")


def _no_children_left() -> bool:
    """No child process, running or a zombie (waitpid of any child fails only when there is none)."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def _run(fn, batches, jobs=2):
    done, lost = {}, {}
    forkpool.run_forked(fn, batches, jobs, lambda i, r: done.setdefault(i, r) is r or pytest.fail(f"twice: {i}"),
                        lambda i, why: lost.setdefault(i, why))
    return done, lost


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_every_batch_is_answered_once_with_its_own_result(jobs):
    batches = [list(range(i, i + 7)) for i in range(0, 700, 7)]
    done, lost = _run(lambda b: (os.getpid(), [x * x for x in b]), batches, jobs)
    assert not lost and sorted(done) == list(range(len(batches)))
    assert all(done[i][1] == [x * x for x in b] for i, b in enumerate(batches))
    assert os.getpid() not in {pid for pid, _ in done.values()}  # (judged in workers, not here)
    assert _no_children_left()


def test_more_batch_numbers_than_a_pipe_holds_are_all_handed_out():
    batches = list(range(40_000))  # (160 KB of numbers: written as the workers take them)
    done, lost = _run(lambda b: b + 1, batches)
    assert not lost and len(done) == len(batches) and all(done[i] == i + 1 for i in range(len(batches)))


def test_a_large_result_arrives_whole():
    done, _ = _run(lambda b: bytes([b]) * (3 << 20), [1, 2, 3])
    assert {i: (len(v), v[:1]) for i, v in done.items()} == {i: (3 << 20, bytes([i + 1])) for i in range(3)}


def test_an_exception_in_a_batch_is_raised_here_and_the_workers_are_gone():
    def fn(b):
        if b == 5:
            raise UserError("bad batch", where="five")
        return b
    with pytest.raises(UserError, match="bad batch"):
        _run(fn, list(range(20)))
    assert _no_children_left()


def test_an_exception_that_does_not_pickle_still_says_what_it_was():
    class Local(Exception):  # (a local class: pickle cannot find it by name)
        pass

    def fn(b):
        raise Local("odd")
    with pytest.raises(RuntimeError, match="Local: odd"):
        _run(fn, [1])
    assert _no_children_left()


@pytest.mark.parametrize("how", ["exit", "signal"])
def test_a_worker_that_dies_loses_only_the_batch_it_held(how):
    def fn(b):
        if b == 7:
            if how == "exit":
                os._exit(3)
            os.kill(os.getpid(), signal.SIGKILL)
        return b
    done, lost = _run(fn, list(range(30)))
    assert sorted(done) == [i for i in range(30) if i != 7] and list(lost) == [7]
    assert lost[7] == ("exit status 3" if how == "exit" else "killed by SIGKILL")
    assert _no_children_left()


def test_a_dead_worker_makes_its_cases_errors_naming_why_and_the_run_goes_on(tmp_path, monkeypatch):
    """Through run_stage_on_dirs (verify's and emulate's way over directories): the cases of the lost batch get
    the stage's broken result; every other case its own. (Every case to the workers: these take no time, and
    would all be done in this process first, parallel.inline_first.)"""
    from aclnn_cli.pipeline import parallel

    monkeypatch.setattr(parallel, "INLINE_SECONDS", 0.0)
    dirs = [tmp_path / f"c{i:03d}" for i in range(200)]

    def batch(manifests):
        assert not manifests  # (these directories hold no manifest)
        return []

    got = {}
    stage = Stage(size=lambda m: 1, batch=batch, split=None, broken=_broken_or_die)
    run_stage_on_dirs(stage, dirs, 2, lambda case_id, n, r: got.setdefault(case_id, r))
    assert sorted(got) == [d.name for d in dirs]
    died = {k for k, v in got.items() if "worker process" in v}
    assert "c150" in died and len(died) < len(dirs)
    assert "died (exit status 9); run it alone" in got["c150"]
    assert all(v == f"{tmp_path / k}: no case.json here (run 'aclnn-cli gen' first)" for k, v in got.items()
               if k not in died)
    assert _no_children_left()


def _broken_or_die(d: Path, exc: UserError) -> str:
    if d.name == "c150" and "worker process" not in str(exc):
        os._exit(9)
    return str(exc)


def test_a_worker_prints_even_when_the_parents_stderr_was_held_at_the_fork():
    """A progress bar's thread may hold the parent's stderr when the workers fork; a worker's warning must not wait
    for it (the worker writes through a stderr of its own)."""
    import sys
    import threading

    held, release = threading.Event(), threading.Event()

    class Held:  # (a stderr whose writes wait while another thread holds it)
        def __init__(self):
            self.lock = threading.Lock()

        def write(self, text):
            with self.lock:
                return len(text)

        def flush(self):
            pass

    fake = Held()

    def holder():
        with fake.lock:
            held.set()
            release.wait(10)

    t = threading.Thread(target=holder)
    real, sys.stderr = sys.stderr, fake
    try:
        t.start()
        held.wait(5)

        def fn(b):
            sys.stderr.write(f"batch {b}\n")  # (as a warning is shown: pytest records warnings instead)
            return b

        def too_long(*_):
            raise TimeoutError("a worker waited on the parent's stderr")

        before = signal.signal(signal.SIGALRM, too_long)
        signal.alarm(30)  # (a worker stuck on the lock would hang the pool: end it instead)
        try:
            done, lost = _run(fn, list(range(4)))
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, before)
    finally:
        release.set()
        t.join()
        sys.stderr = real
    assert sorted(done) == [0, 1, 2, 3] and not lost


def test_when_every_worker_dies_the_batches_left_are_lost_not_a_broken_pipe():
    """With more batch numbers than the pipe holds, the parent is still handing them out when the last worker
    dies: writing to a pipe nobody reads must end the handing out, and every unanswered batch is lost."""
    def fn(b):
        os._exit(1)
    done, lost = _run(fn, list(range(40_000)))
    assert not done and len(lost) == 40_000 and set(lost.values()) == {"exit status 1"}
    assert _no_children_left()


def test_a_process_a_batch_forked_does_not_keep_the_parent_waiting(tmp_path):
    """A user reference may fork a child that lives on holding the worker's reply pipe: the parent stops waiting
    once the worker has exited and its pipe is drained, with every result (the sleeper is the reaper's)."""
    import time

    pids = tmp_path / "pids"

    def fn(b):
        child = os.fork()
        if child == 0:
            time.sleep(60)
            os._exit(0)
        with open(pids, "a") as f:
            f.write(f"{child}\n")
        return b * 10
    start = time.monotonic()
    done, lost = _run(fn, [1, 2, 3, 4])
    took = time.monotonic() - start
    for pid in pids.read_text().split():
        os.kill(int(pid), signal.SIGKILL)
    assert done == {0: 10, 1: 20, 2: 30, 3: 40} and not lost
    assert took < 30, took


def test_what_workers_print_reaches_the_output_even_when_it_is_not_a_terminal(capfd):
    """Workers write through stdout/stderr of their own and leave through os._exit: what they wrote (a user op's
    print, a warning) must still be flushed to the output, a file or a pipe in CI."""
    import sys

    def fn(b):
        print(f"out from batch {b}")
        sys.stderr.write(f"err from batch {b}\n")
        return b
    done, _ = _run(fn, list(range(4)))
    out, err = capfd.readouterr()
    assert sorted(done) == [0, 1, 2, 3]
    assert all(f"out from batch {b}" in out and f"err from batch {b}" in err for b in range(4))


def test_each_lost_batch_is_put_down_to_its_own_workers_end():
    import time

    def fn(b):
        if b == 0:
            time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(3)
    done, lost = _run(fn, [0, 1])
    assert not done and lost == {0: "killed by SIGKILL", 1: "exit status 3"}


def test_a_fork_that_fails_leaves_no_descriptor_and_no_worker(monkeypatch):
    def descriptors():
        return len(os.listdir("/proc/self/fd"))
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc here")
    real, calls = os.fork, [0]

    def failing_fork():
        calls[0] += 1
        if calls[0] % 2 == 0:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return real()
    before = descriptors()
    monkeypatch.setattr(os, "fork", failing_fork)
    for _ in range(10):
        with pytest.raises(BlockingIOError):
            _run(lambda b: b, list(range(4)))
    monkeypatch.setattr(os, "fork", real)
    assert descriptors() == before and _no_children_left()


def test_an_interrupt_in_a_worker_never_unwinds_into_the_parents_code():
    """A Ctrl-C reaches the whole process group; a worker must end there and then (os._exit), never return into
    run_forked's caller. Simulated: the worker's first close raises KeyboardInterrupt."""
    parent = os.getpid()
    _INTERRUPT_CHILDREN[0] = True
    try:
        done, lost = _run(lambda b: b, list(range(6)))
    finally:
        _INTERRUPT_CHILDREN[0] = False
        if os.getpid() != parent:  # (a worker came back out of run_forked: end it, the parent's assert says so)
            os._exit(99)
    assert not done and len(lost) == 6 and set(lost.values()) == {"exit status 70"}
    assert _no_children_left()


_INTERRUPT_CHILDREN = [False]


def _interrupt_in_child() -> None:
    """(After a fork, while the test above runs: the child's first os.close raises KeyboardInterrupt, as a Ctrl-C
    landing there would.)"""
    if _INTERRUPT_CHILDREN[0]:
        real_close = os.close

        def close(fd):
            os.close = real_close
            raise KeyboardInterrupt
        os.close = close


os.register_at_fork(after_in_child=_interrupt_in_child)


def test_a_short_run_of_bundled_ops_starts_no_worker(tmp_path, monkeypatch):
    """gen, emulate and verify -j 2 of a few small cases of bundled ops do all their work in the command's own
    process (parallel.inline_first): starting workers would cost more than the work. The same bytes and verdicts
    as with workers (tests/test_bundled_bytes.py: the whole suite, whose first cases run here too)."""
    import concurrent.futures

    from helpers import run_cli, write_yaml

    def refuse(*args, **kwargs):
        raise AssertionError("a worker was started")

    monkeypatch.setattr(forkpool, "run_forked", refuse)
    monkeypatch.setattr(concurrent.futures.ProcessPoolExecutor, "__init__", refuse)
    src = write_yaml(tmp_path, "op: aclnnSiluBackward\ndefaults: {dtype: [float32, bfloat16]}\n"
                               "cases:\n  - {name: a, shape: [[4], [3, 5], [64, 64]]}\n", "s.yaml")
    out = tmp_path / "out"
    for args in (("gen", src, "-o", out), ("emulate", out), ("verify", out)):
        r = run_cli(*args, "--jobs", 2)
        assert r.exit_code == 0, r.output[-2000:]
    assert "6 PASS" in r.output


def _fails_on_three(x):
    if x == 3:
        raise ValueError("three")
    return x * x


def test_a_forked_runners_calls_each_get_their_own_result_or_exception():
    """Runner(forked=True): calls wait for a result to be asked for, then run together on forked workers; one
    call's exception is raised from its own result() only; a worker's death is WorkerLost, in run.lost."""
    from aclnn_cli.pipeline.parallel import Runner, WorkerLost

    with Runner(2, forked=True) as run:
        calls = [run.submit(_fails_on_three, x) for x in range(6)]
        assert not any(c.done for c in calls)  # (nothing ran yet)
        assert calls[5].result() == 25 and all(c.done for c in calls)
        assert [c.result() for c in calls if c is not calls[3]] == [0, 1, 4, 16, 25]
        with pytest.raises(ValueError, match="three"):
            calls[3].result()
        lost = run.submit(os._exit, 4)
        with pytest.raises(run.lost) as info:
            lost.result()
        assert isinstance(info.value, WorkerLost) and "exit status 4" in str(info.value)
        assert run.map(_fails_on_three, [(7,), (8,)]) == [49, 64]
    assert _no_children_left()


def test_what_waits_for_the_workers_runs_once_however_often_it_was_asked():
    """forkpool.while_waiting: a function queued twice (a process verifying without workers, twice) runs once, in
    this process, at the next wait for workers, and not at the one after."""
    calls = []

    def note():
        calls.append(os.getpid())
    forkpool.while_waiting(note)
    forkpool.while_waiting(note)
    _run(lambda b: b, [1, 2])
    _run(lambda b: b, [3])
    assert calls == [os.getpid()]
