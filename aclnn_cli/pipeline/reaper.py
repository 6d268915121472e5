"""Nothing a command started outlives it: its workers, the runner, and whatever they or a user's op started.

On Linux the command becomes a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a process its descendants leave
behind (a user reference that forks, a runner's child that calls setsid) is reparented to it instead of to
init. When the command returns, `end_descendants` kills and reaps every child it still has, round after round
(ending one may orphan its own children to us), until none is left. A process group would not do: setsid leaves
it, and the group is the shell's job (`| head` sits in it too). Elsewhere only direct children are ended.
"""

from __future__ import annotations

import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
ROUNDS = 50


def adopt_orphans() -> bool:
    """Make this process the subreaper of its descendants (Linux); False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children(pid: int | None = None) -> list[int]:
    """The live child processes of `pid` (this one by default), from /proc: each of its threads' `children` list
    (one small read per thread), else a scan of every process's stat (a kernel without CONFIG_PROC_CHILDREN)."""
    me = os.getpid() if pid is None else pid
    listed = _listed_children(me)
    return listed if listed is not None else _scanned_children(me)


def _listed_children(pid: int) -> list[int] | None:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        found = []
        for tid in tasks:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found += [int(x) for x in f.read().split()]
        return found
    except (OSError, ValueError):  # (no such file: the kernel does not list them; a thread gone meanwhile: scan)
        return None


def _scanned_children(me: int) -> list[int]:
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # (after the command name, which may hold spaces)
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(name))
    return found


def end_descendants() -> int:
    """Kill and reap every child this process has, and those orphaned to it meanwhile; how many were ended."""
    ended = 0
    for _ in range(ROUNDS):
        kids = children()
        if not kids:
            break
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        deadline = time.monotonic() + 2.0
        for pid in kids:
            while True:
                try:
                    done, _status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    break
                if done or time.monotonic() > deadline:
                    break
                time.sleep(0.005)
            ended += 1
    return ended
