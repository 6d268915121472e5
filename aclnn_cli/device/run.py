"""`aclnn-cli run`: drive a built aclnn-runner over generated cases, one case at a time.

The runner sets the device up once per process and answers one line per case. A case that
crashes the runner or outlives its timeout costs only itself: its verdict (CRASH or TIMEOUT,
with the tail of the runner's output) is written beside its manifest, a fresh runner takes the
remaining cases, and `verify` reports the verdict. The request format is "The harness contract"
in the README.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

from .. import dtypes as D
from .. import manifest as M
from ..errors import UserError
from ..regular import read_head
from ..manifest import CaseManifest
from ..ops.base import AttrSpec
from ..storage import atomic_write_text

PROTOCOL = "aclnn-runner/1"  # what the runner's "ready" line must name (runner.cpp's kProtocol)
RUN_VERDICT_FILE = "run-verdict.txt"  # first line CRASH | TIMEOUT | ERROR, then what the runner said
TAIL_BYTES = 2000

# SoC name (aclrtGetSocName) prefix -> product, most specific first.
SOC_PRODUCTS = (("Ascend950", "950"), ("Ascend910_93", "A3"), ("Ascend910B", "A2"), ("Ascend910", "910"),
                ("Ascend310P", "310P"))


def soc_product(soc: str) -> str | None:
    """The product (as case files name it) of a SoC name the runtime reports, or None if unknown."""
    return next((product for prefix, product in SOC_PRODUCTS if soc.startswith(prefix)), None)


def _line_safe(text: str, what: str, where: Path) -> str:
    if "\n" in text or "\r" in text or text != text.strip() or not text:
        raise UserError(f"{what} {text!r} cannot be passed to the runner (line breaks or surrounding spaces)",
                        where=str(where))
    return text


def attribute_line(attr: AttrSpec, value, where: Path) -> str:
    """One attribute value (as the manifest was loaded: None is a null pointer) as a request line."""
    if value is None:
        return "null"
    if attr.kind == "scalar":  # hex floats are exact, inf and nan included
        number = float.hex(value) if isinstance(value, float) else str(int(value))
        return f"scalar {D.lookup(attr.scalar_dtype).acl_id} {number}"
    if attr.kind == "bool":
        return f"bool {int(value)}"
    if attr.kind == "string":
        return f"string {_line_safe(value, 'string attribute', where)}" if value else "string "
    raise UserError(f"attribute {attr.name!r} of kind {attr.kind!r} cannot be passed to the runner", where=str(where))


def request(m: CaseManifest) -> str:
    """One case in the runner's line format: the API's arguments in order, then status and end."""
    lines = [f"case {_line_safe(m.case_id, 'case id', m.dir)}", f"op {m.op.name}"]
    tensors = {t.name: t for t in m.tensors}
    given, declared = dict(m.attributes), {a.name: a for a in m.op.attributes}
    for name, kind in m.op.api_params:
        if kind != "tensor":
            lines.append(attribute_line(declared[name], given.get(name), m.dir))
            continue
        t = tensors[name]
        if t.null:
            lines.append("null")
            continue
        lay = t.layout
        # storage dims: the view's shape for a packed tensor (as the docs' examples pass it), else 1-D
        storage = lay.shape if lay.is_contiguous else (lay.storage_size,)
        fields = ["tensor", "out" if t.role == "output" else "in", str(t.dtype.acl_id), "2",
                  str(t.dtype.itemsize), str(len(lay.shape)), *map(str, lay.shape), *map(str, lay.strides),
                  str(lay.offset), str(len(storage)), *map(str, storage),
                  _line_safe(str(Path(t.file).resolve()), "path", m.dir)]
        lines.append(" ".join(fields))
        if t.role == "output" and t.dump is not None:
            lines.append(f"dump {_line_safe(str(Path(t.dump).resolve()), 'path', m.dir)}")
    lines += [f"status {_line_safe(str((m.dir / M.STATUS_FILE).resolve()), 'path', m.dir)}", "end", ""]
    return "\n".join(lines)


def clear_outputs(m: CaseManifest) -> None:
    """Remove what an earlier run (or emulate) left, so a crashed case can never be judged on a stale dump."""
    for path in [m.dir / M.STATUS_FILE, m.dir / RUN_VERDICT_FILE] + [Path(t.dump) for t in m.tensors if t.dump]:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise UserError(f"cannot remove an earlier result: {exc.strerror}", where=str(path)) from None


class RunnerGone(Exception):
    """The runner process ended (crash) or was killed (timeout); detail says how."""

    def __init__(self, verdict: str, detail: str) -> None:
        super().__init__(detail)
        self.verdict, self.detail = verdict, detail


class Runner:
    """One runner process: requests on its stdin, replies on a pipe of their own, output to a log file."""

    def __init__(self, command: list[str], env: Mapping[str, str] | None, init_timeout: float) -> None:
        self.log = tempfile.TemporaryFile()
        read_fd, write_fd = os.pipe()
        try:
            self.proc = subprocess.Popen([*command, "--reply-fd", str(write_fd)], stdin=subprocess.PIPE,
                                         stdout=self.log, stderr=self.log, pass_fds=(write_fd,),
                                         env=dict(env) if env is not None else None, start_new_session=True)
        except OSError as exc:
            os.close(read_fd)
            raise UserError(f"cannot start the runner: {exc.strerror}", where=command[0]) from None
        finally:
            os.close(write_fd)
        self.replies, self.buffer, self.mark = read_fd, b"", 0
        try:
            ready = self.reply(init_timeout)
        except RunnerGone as gone:
            tail = self.tail()
            self.close()
            raise UserError(f"the runner did not start: {gone.detail}" + (f"; it printed: {tail[-300:]}" if tail else ""),
                            where=command[0]) from None
        word, version, soc = (ready.split(" ", 2) + ["", ""])[:3]
        if word != "ready":
            self.close()
            raise UserError(f"the runner did not start: {ready}", where=command[0])
        if version != PROTOCOL:
            self.close()
            raise UserError(f"the runner speaks {version or 'an older protocol'!r}, this aclnn-cli {PROTOCOL!r}: "
                            f"run 'aclnn-cli harness' again and rebuild", where=command[0])
        self.soc = soc.strip() or "unknown"

    def tail(self) -> str:
        """What the runner printed since the current case began (its last TAIL_BYTES)."""
        self.log.flush()
        end = os.fstat(self.log.fileno()).st_size
        start = max(self.mark, end - TAIL_BYTES)
        data = os.pread(self.log.fileno(), end - start, start)
        return data.decode("utf-8", "replace").strip()

    def send(self, text: str) -> None:
        self.mark = os.fstat(self.log.fileno()).st_size
        try:
            self.proc.stdin.write(text.encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._gone()

    def reply(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise RunnerGone("TIMEOUT", f"no answer within {timeout:g} s; the runner was killed")
            ready, _, _ = select.select([self.replies], [], [], left)
            if ready:
                chunk = os.read(self.replies, 65536)
                if not chunk:
                    self._gone()
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def _gone(self):
        code = self.proc.wait()
        how = (f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals()
               else f"exited with status {code}")
        raise RunnerGone("CRASH", f"the runner {how}")

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # stuck in the driver (uninterruptible): leave it, do not hang the run
            pass

    def close(self) -> str | None:
        """End the runner: EOF lets it release the device; one that does not leave is killed.

        Returns what went wrong at the end (a non-zero exit, e.g. a sanitizer's leak report), if anything.
        """
        self.mark = os.fstat(self.log.fileno()).st_size
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout=30)
            problem = None if code == 0 else f"the runner exited with status {code} at the end"
        except subprocess.TimeoutExpired:
            self.kill()
            problem = "the runner did not exit within 30 s of its last case and was killed"
        if problem and self.tail():
            problem += f"; its last output:\n{self.tail()}"
        os.close(self.replies)
        self.log.close()
        return problem


@dataclass
class RunSummary:
    statuses: Counter = field(default_factory=Counter)  # phase-one status -> cases
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (case id, CRASH|TIMEOUT|ERROR, detail)
    other_products: Counter = field(default_factory=Counter)  # product -> cases left for another device
    ending_problems: list[str] = field(default_factory=list)  # runners that ended badly after a completed case
    soc: str = ""
    product: str = ""
    runners_started: int = 0

    @property
    def ran(self) -> int:
        return sum(self.statuses.values()) + len(self.failed)


@dataclass(frozen=True)
class RunOptions:
    runner: Path
    device: int = 0
    timeout: float = 120.0
    product: str | None = None  # the device's product; default: from the SoC name the runtime reports
    env: Mapping[str, str] | None = None


def run_cases(manifests: Iterable[CaseManifest], opts: RunOptions,
              on_case: Callable[[CaseManifest], None] = lambda m: None) -> RunSummary:
    """Run every case for this device's product through the runner; see the module docstring."""
    command = [str(opts.runner), "--device", str(opts.device)]
    init_timeout = max(opts.timeout, 300.0)
    summary = RunSummary()
    runner: Runner | None = Runner(command, opts.env, init_timeout)
    summary.runners_started = 1
    summary.soc = runner.soc
    summary.product = opts.product or soc_product(runner.soc) or ""
    if not summary.product:
        runner.close()
        raise UserError(f"cannot tell the product from the SoC name {runner.soc!r}; pass --product")
    no_runner = ""  # why no fresh runner could be started: the remaining cases cannot run
    try:
        for m in manifests:
            if m.product != summary.product:
                summary.other_products[m.product] += 1
                continue
            try:
                text = request(m)
                clear_outputs(m)
            except UserError as exc:
                _record(summary, m, "ERROR", str(exc))
                on_case(m)
                continue
            if runner is None and not no_runner:
                runner, no_runner = _fresh_runner(command, opts.env, init_timeout)
                summary.runners_started += runner is not None
            if runner is None:
                _record(summary, m, "ERROR", f"not run: {no_runner}")
            elif not _one_case(summary, m, runner, text, opts.timeout):
                runner = None
            on_case(m)
    except BaseException:
        if runner is not None:  # Ctrl-C or a bug: do not wait for the runner, free the device now
            runner.kill()
            runner = None
        raise
    finally:
        if runner is not None:
            problem = runner.close()
            if problem:
                summary.ending_problems.append(problem)
    return summary


def _fresh_runner(command: list[str], env, init_timeout: float) -> tuple[Runner | None, str]:
    """A new runner after one ended; a device recovering from a killed process gets one more try."""
    for attempt in range(2):
        try:
            return Runner(command, env, init_timeout), ""
        except UserError as exc:
            reason = str(exc)
            if attempt == 0:
                time.sleep(2.0)
    return None, reason


def _one_case(summary: RunSummary, m: CaseManifest, runner: Runner, text: str, timeout: float) -> bool:
    """Send one case and settle its answer; False when the runner has ended (closed here)."""
    try:
        runner.send(text)
        answer = runner.reply(timeout)
    except RunnerGone as gone:
        tail = runner.tail()
        _record(summary, m, gone.verdict, gone.detail + (f"; its last output:\n{tail}" if tail else ""))
        runner.close()  # already dead or killed: its ending is the verdict above
        return False
    word, _, rest = answer.partition(" ")
    case_id, _, detail = rest.partition(" ")
    if word == "done" and case_id == m.case_id and detail.lstrip("-").isdigit():
        summary.statuses[int(detail)] += 1
        return True
    if word == "error" and case_id == m.case_id:
        _record(summary, m, "ERROR", detail)
        return True
    if word == "fault" and case_id == m.case_id:  # failed once launched: the runner ends itself
        runner.close()
        _record(summary, m, "CRASH", f"the device call failed: {detail}")
        return False
    runner.close()  # "fatal", or an answer out of step: this runner cannot be trusted with more cases
    _record(summary, m, "ERROR", f"the runner answered {answer!r}")
    return False


def _record(summary: RunSummary, m: CaseManifest, verdict: str, detail: str) -> None:
    summary.failed.append((m.case_id, verdict, detail))
    atomic_write_text(m.dir / RUN_VERDICT_FILE, f"{verdict}\n{detail}\n")


def forget_run_verdict(case_dir: Path | str) -> None:
    """Drop a device run's verdict (emulate writes results of its own)."""
    path = os.path.join(case_dir, RUN_VERDICT_FILE)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise UserError(f"cannot remove an earlier run verdict: {exc.strerror}", where=path) from None


def read_verdict(case_dir: Path | str) -> tuple[str, str] | None:
    """(CRASH|TIMEOUT|ERROR, detail) if the last run of this case did not complete, else None."""
    path = os.path.join(case_dir, RUN_VERDICT_FILE)
    try:
        text = read_head(path, TAIL_BYTES * 4).decode("utf-8", "replace")  # (a FIFO there: refused, not waited on)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return "ERROR", f"{path}: cannot read the run verdict: {exc.strerror}"
    verdict, _, detail = text.partition("\n")
    verdict = verdict.strip()
    return (verdict if verdict in ("CRASH", "TIMEOUT", "ERROR") else "ERROR"), detail.strip()[:TAIL_BYTES + 200]
