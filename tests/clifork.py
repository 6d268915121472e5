"""aclnn-cli as a process of its own, forked from a server process that has already imported it.

`cli_process(*args)` stands for `subprocess.run([sys.executable, "-m", "aclnn_cli", *args], capture_output=True,
text=True)`: the command runs through the same entry point (`aclnn_cli.__main__.console`) in a new process with its own
argv, environment, working directory, pipes, limits and exit status, and its children are its own. What it skips is
the start: an interpreter, NumPy and the tool's imports cost about 0.15 s of CPU a process, most of the CPU of a test
that runs the CLI a few times on a small suite.

The server is started once per test process (one `python` process, stdin a socket) and forks a child per command.
It never runs a command itself, so every child starts from the same state as a new process would: no user op
loaded, no registry read whole, no memo filled; only modules are imported (bundled op modules included, which
register themselves on import as they would when first looked up). Tests of what a fresh interpreter does (which
modules a command imports, `python -OO`, NumPy's CPU dispatch set in the environment, the installed script, signals
to the process group) start a real process instead.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

_HEADER = struct.Struct("!I")
_server: socket.socket | None = None
_server_pid: int | None = None  # (the process that started it: a forked test child starts its own)
CHILDREN_CPU = [0.0]  # CPU seconds of the commands run here (the server reaps them: conftest.py's timeline adds it)


def _send(sock: socket.socket, obj, fds=()) -> None:
    data = pickle.dumps(obj)
    message = _HEADER.pack(len(data)) + data
    if fds:
        socket.send_fds(sock, [message], list(fds))
    else:
        sock.sendall(message)


def _receive(sock: socket.socket, with_fds: int = 0):
    fds: list[int] = []
    if with_fds:
        head, fds, _, _ = socket.recv_fds(sock, _HEADER.size, with_fds)
    else:
        head = sock.recv(_HEADER.size)
    if not head:
        raise EOFError
    while len(head) < _HEADER.size:
        more = sock.recv(_HEADER.size - len(head))
        if not more:
            raise EOFError
        head += more
    (size,) = _HEADER.unpack(head)
    data = b""
    while len(data) < size:
        more = sock.recv(size - len(data))
        if not more:
            raise EOFError
        data += more
    return pickle.loads(data), fds


def _start() -> socket.socket:
    """The server's socket, starting the server first where this process has none. The server is not this
    process's child (it is started through a process that forks it and exits): tests that check a process has no
    children left, or wait for any child, must not meet it."""
    global _server, _server_pid
    if _server is not None and _server_pid == os.getpid():
        return _server
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    here = str(Path(__file__).parent)
    subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r}); import clifork; clifork.serve()"],
                   stdin=theirs, close_fds=True, check=True)
    theirs.close()
    _server, _server_pid = ours, os.getpid()
    return _server


def cli_process(*args, env: dict | None = None, cwd=None, timeout: float | None = None,
                nofile: int | None = None, fsize: int | None = None) -> subprocess.CompletedProcess:
    """`python -m aclnn_cli *args` in a process of its own (see the module's docstring): its exit status, stdout and
    stderr as text. env: the whole environment (default: this process's); nofile: its limit on open files; fsize:
    on the size of a file it writes (RLIMIT_FSIZE: past it, a write fails with EFBIG)."""
    argv = [str(a) for a in args]
    sock = _start()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    request = {"argv": argv, "env": dict(os.environ if env is None else env),
               "cwd": str(cwd) if cwd is not None else os.getcwd(), "nofile": nofile, "fsize": fsize}
    try:
        _send(sock, request, (out_w, err_w))
    finally:
        os.close(out_w)
        os.close(err_w)
    (pid,), _ = _receive(sock)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}

    def drain(fd: int) -> None:
        with open(fd, "rb", closefd=True) as f:
            while block := f.read1(1 << 16):
                chunks[fd].append(block)

    readers = [threading.Thread(target=drain, args=(fd,), daemon=True) for fd in (out_r, err_r)]
    for r in readers:
        r.start()
    timed_out, deadline = False, None if timeout is None else time.monotonic() + timeout
    for r in readers:  # (one deadline for both pipes, as subprocess.run's timeout is one)
        r.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if r.is_alive():  # (the command, or something it left holding its pipes, is still running)
            timed_out = True
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
    (status, cpu), _ = _receive(sock)
    CHILDREN_CPU[0] += cpu
    for r in readers:
        r.join(5)
    out, err = (b"".join(chunks[fd]).decode(errors="replace") for fd in (out_r, err_r))
    command = [sys.executable, "-m", "aclnn_cli", *argv]
    if timed_out:
        raise subprocess.TimeoutExpired(command, timeout, out, err)
    return subprocess.CompletedProcess(command, os.waitstatus_to_exitcode(status), out, err)


# ---- the server: runs in its own process ----------------------------------------------------------------------------

def _preload() -> None:
    import importlib

    import aclnn_cli.__main__  # noqa: F401
    import aclnn_cli.cli.main  # noqa: F401  (imported for its effect: the commands)
    from aclnn_cli.ops.registry import BUNDLED

    for module in BUNDLED.values():
        importlib.import_module(f"aclnn_cli.ops.{module}")
    # (not the device's modules: the defect catalogue is read at their import, and in a new process that comes
    # after --ops has loaded the user's ops)
    for name in ("aclnn_cli.golden.gen", "aclnn_cli.judge.verify", "aclnn_cli.report.formats", "aclnn_cli.report.junit",
                 "aclnn_cli.cases.loader", "aclnn_cli.pipeline.parallel", "aclnn_cli.pipeline.forkpool",
                 "concurrent.futures.process", "yaml", "rich.console", "rich.table"):
        try:
            importlib.import_module(name)
        except ImportError:  # (a module renamed since: the child imports what it needs)
            pass
    from aclnn_cli.ops import user
    from aclnn_cli.ops.registry import OPS

    assert not OPS.complete and not user._loaded, "a preloaded module read the registry whole: the child would not"


def _child(request: dict, out_fd: int, err_fd: int) -> None:
    """In the forked child: become the command's process, run it, exit with its status (never returns)."""
    code = 1
    try:
        import atexit

        atexit._clear()  # (a process of its own has none of the test worker's exit functions: console() runs its own)
        # (as a shell starts a command: nothing blocked, the signals at Python's defaults, whatever the test worker
        # that started the server had)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGALRM, signal.SIGQUIT, signal.SIGUSR1,
                    signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        for fd in (null, out_fd, err_fd):
            os.close(fd)
        import resource

        for limit, key in ((resource.RLIMIT_NOFILE, "nofile"), (resource.RLIMIT_FSIZE, "fsize")):
            if request[key] is not None:
                resource.setrlimit(limit, (request[key], request[key]))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["aclnn-cli", *request["argv"]]
        from aclnn_cli.__main__ import console

        try:
            console()
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:  # (what an uncaught exception does to a process: its traceback, status 1)
            import traceback

            traceback.print_exc()
            code = 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                code = code or 120
    finally:
        os._exit(code)


def serve() -> None:
    """Answer requests on stdin (a socket): fork a child per command, send its pid, then its wait status and CPU.
    Forked off first, and its parent exits at once (see _start); it ends when the socket's other end closes."""
    if os.fork() != 0:
        os._exit(0)
    os.setsid()  # (its own session: a signal to the test worker's process group is not a command's)
    _preload()
    sock = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    while True:
        try:
            request, fds = _receive(sock, with_fds=2)
        except (EOFError, ConnectionError, OSError):
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            sock.close()
            _child(request, *fds)
        for fd in fds:
            os.close(fd)
        _send(sock, (pid,))
        _, status, usage = os.wait4(pid, 0)
        _send(sock, (status, usage.ru_utime + usage.ru_stime))
