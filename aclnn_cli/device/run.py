"""`aclnn-cli run`: drive a built aclnn-runner over generated cases, one case at a time.

The runner sets the device up once per process and answers one line per case. A case that
crashes the runner or outlives its timeout costs only itself: its verdict (CRASH or TIMEOUT,
with the tail of the runner's output) is written beside its manifest, a fresh runner takes the
remaining cases, and `verify` reports the verdict. The request format is "The harness contract"
in docs/harness.md.

The runner is a suspect, like the kernel: every wait is bounded by the timeout (process.py), its
replies are parsed strictly (replies.py), and a 'done' answer must agree with the files it wrote and
the status the case expects (outcome.py); when it does not, the case gets a failing verdict too.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

from ..tensor import dtypes as D
from ..casedir import manifest as M
from ..errors import UserError
from ..casedir.manifest import CaseManifest
from ..ops.base import AttrSpec
from ..files.text import clip
from .outcome import RUN_VERDICT_FILE, check_done, forget_run_verdict, read_verdict, write_verdict
from .process import RunnerGone, RunnerProcess
from .replies import SHOW, MalformedReply, parse_reply, quote

__all__ = ["PROTOCOL", "RUN_VERDICT_FILE", "RunOptions", "RunSummary", "forget_run_verdict", "read_verdict", "request",
           "run_cases", "soc_product"]

PROTOCOL = "aclnn-runner/1"  # what the runner's "ready" line must name (runner.cpp's kProtocol)

# SoC name (aclrtGetSocName) prefix -> product, most specific first.
SOC_PRODUCTS = (("Ascend950", "950"), ("Ascend910_93", "A3"), ("Ascend910B", "A2"), ("Ascend910", "910"),
                ("Ascend310P", "310P"))


def soc_product(soc: str) -> str | None:
    """The product (as case files name it) of a SoC name the runtime reports, or None if unknown."""
    return next((product for prefix, product in SOC_PRODUCTS if soc.startswith(prefix)), None)


def _line_safe(text: str, what: str, where: Path) -> str:
    if "\n" in text or "\r" in text or text != text.strip() or not text:
        raise UserError(f"{what} {quote(text)} cannot be passed to the runner (line breaks or surrounding spaces)",
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
    if attr.kind == "int":
        return f"int {int(value)}"
    if attr.kind in ("double", "float"):  # a hex float: the exact bits through strtod (inf, -inf, nan too)
        return f"{attr.kind} {float.hex(float(value))}"
    if attr.kind in ("int_list", "bool_list"):
        return " ".join([attr.kind, str(len(value)), *(str(int(v)) for v in value)])
    raise UserError(f"attribute {attr.name!r} of kind {attr.kind!r} cannot be passed to the runner", where=str(where))


def request(m: CaseManifest) -> str:
    """One case in the runner's line format: the API's arguments in order, then status and end."""
    lines = [f"case {_line_safe(m.case_id, 'case id', m.dir)}", f"op {m.op.name}"]
    tensors = {t.name: t for t in m.tensors}
    # Absolute paths for the runner, whose working directory is not ours: the directory resolved once, its files
    # named in it (plain names, manifest.py checks; a file that is a link is followed by the runner's open alike).
    real = os.path.realpath(m.dir)

    def path(file: str | Path) -> str:
        return _line_safe(os.path.join(real, os.path.basename(file)), "path", m.dir)

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
                  path(t.file)]
        lines.append(" ".join(fields))
        if t.role == "output" and t.dump is not None:
            lines.append(f"dump {path(t.dump)}")
    lines += [f"status {path(M.STATUS_FILE)}", "end", ""]
    return "\n".join(lines)


def clear_outputs(m: CaseManifest) -> None:
    """Remove what an earlier run (or emulate) left, so a crashed case can never be judged on a stale dump."""
    for path in [m.dir / M.STATUS_FILE, m.dir / RUN_VERDICT_FILE] + [Path(t.dump) for t in m.tensors if t.dump]:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise UserError(f"cannot remove an earlier result: {exc.strerror}", where=str(path)) from None


class Runner:
    """A started runner that said 'ready' in the protocol this aclnn-cli speaks: its process and SoC."""

    def __init__(self, command: list[str], env: Mapping[str, str] | None, timeout: float) -> None:
        self.process = RunnerProcess(command, env, timeout)
        try:
            self.soc = self._handshake(command[0])
        except UserError:  # it may be ending on its own (after 'fatal'): let it, within the timeout
            self.end()
            raise
        except BaseException:  # Ctrl-C while it starts: nothing of it may stay
            self.kill()
            raise

    def _handshake(self, where: str) -> str:
        try:
            ready = parse_reply(self.process.line(), None)
        except RunnerGone as gone:
            tail = self.process.tail()
            raise UserError(f"the runner did not start: {gone.detail}" +
                            (f"; it printed: {clip(tail[-300:], 300)}" if tail else ""), where=where) from None
        except MalformedReply as bad:
            raise UserError(f"the runner did not start: {bad}", where=where) from None
        if ready.word == "fatal":
            raise UserError(f"the runner did not start: fatal {ready.detail}", where=where)
        version, _, soc = ready.detail.partition(" ")
        if version != PROTOCOL:
            raise UserError(f"the runner speaks {quote(version) if version else 'an older protocol'}, this aclnn-cli "
                            f"{PROTOCOL!r}: run 'aclnn-cli harness' again and rebuild", where=where)
        return soc.strip() or "unknown"

    def end(self) -> list[str]:
        """After the last case: let it exit (bounded), end its group; what went wrong at the end."""
        try:
            return self.process.finish()
        except BaseException:  # Ctrl-C while it ends: no more waiting
            self.process.terminate()
            raise
        finally:
            self.process.close()

    def kill(self) -> None:
        """End it now (a timeout, a crash, an untrusted answer, Ctrl-C): its whole group."""
        self.process.terminate()
        self.process.close()


@dataclass
class RunSummary:
    statuses: Counter = field(default_factory=Counter)  # phase-one status -> cases that completed as expected
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (case id, verdict, detail)
    other_products: Counter = field(default_factory=Counter)  # product -> cases left for another device
    ending_problems: list[str] = field(default_factory=list)  # runners that ended badly after a completed case
    soc: str = ""  # as the runner reported it, clipped for printing
    product: str = ""
    runners_started: int = 0

    @property
    def ran(self) -> int:
        return sum(self.statuses.values()) + len(self.failed)


MAX_TIMEOUT = 7 * 86400.0  # seconds: a week; more is a typo


def check_timeout(seconds: float) -> float:
    """--timeout: finite, above 0, at most MAX_TIMEOUT (every wait of a run is bounded by it)."""
    if not (isinstance(seconds, (int, float)) and 0 < seconds <= MAX_TIMEOUT):  # (NaN fails both)
        raise UserError(f"must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}", where="--timeout")
    return float(seconds)


@dataclass(frozen=True)
class RunOptions:
    runner: Path
    device: int = 0
    timeout: float = 120.0  # seconds for each wait: the runner's start, each case, its end
    product: str | None = None  # the device's product; default: from the SoC name the runtime reports
    env: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        check_timeout(self.timeout)


def run_cases(manifests: Iterable[CaseManifest], opts: RunOptions,
              on_case: Callable[[CaseManifest], None] = lambda m: None) -> RunSummary:
    """Run every case for this device's product through the runner; see the module docstring."""
    command = [os.path.abspath(opts.runner), "--device", str(opts.device)]  # (a bare name is not looked up in PATH)
    summary = RunSummary()
    runner: Runner | None = Runner(command, opts.env, opts.timeout)
    summary.runners_started = 1
    summary.soc = clip(runner.soc, SHOW)
    summary.product = opts.product or soc_product(runner.soc) or ""
    if not summary.product:
        runner.end()
        raise UserError(f"cannot tell the product from the SoC name {quote(runner.soc)}; pass --product")
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
                runner, no_runner = _fresh_runner(command, opts.env, opts.timeout)
                summary.runners_started += runner is not None
            if runner is None:
                _record(summary, m, "ERROR", f"not run: {no_runner}")
            elif not _one_case(summary, m, runner, text):
                runner = None
            on_case(m)
    except BaseException:
        if runner is not None:  # Ctrl-C, SIGTERM or a bug: do not wait for the runner, free the device now
            runner.kill()
            runner = None
        raise
    finally:
        if runner is not None:
            summary.ending_problems += runner.end()
    return summary


def _fresh_runner(command: list[str], env, timeout: float) -> tuple[Runner | None, str]:
    """A new runner after one ended; a device recovering from a killed process gets one more try."""
    for attempt in range(2):
        try:
            return Runner(command, env, timeout), ""
        except UserError as exc:
            reason = str(exc)
            if attempt == 0:
                time.sleep(2.0)
    return None, reason


def _one_case(summary: RunSummary, m: CaseManifest, runner: Runner, text: str) -> bool:
    """Send one case and settle its answer against the case's files; False when the runner has ended here."""
    try:
        runner.process.send(text)
        reply = parse_reply(runner.process.line(), m.case_id)
    except RunnerGone as gone:
        tail = runner.process.tail()
        _record(summary, m, gone.verdict, gone.detail + (f"; its last output:\n{tail}" if tail else ""))
        runner.kill()  # already dead or killed: its ending is the verdict above
        return False
    except MalformedReply as bad:  # a line over MAX_LINE, an unknown word, id or status: not trusted further
        runner.end()
        _record(summary, m, "ERROR", str(bad))
        return False
    if reply.word == "done":
        problem = check_done(m, reply.status)
        if problem is None:
            summary.statuses[reply.status] += 1
        else:
            _record(summary, m, *problem)
        return True
    if reply.word == "error":
        _record(summary, m, "ERROR", reply.detail)
        return True
    runner.end()  # fault: failed once launched (the stream may be unusable; it exits); fatal: it gave up
    if reply.word == "fault":
        _record(summary, m, "CRASH", f"the device call failed: {reply.detail}")
    else:
        _record(summary, m, "ERROR", f"the runner answered fatal {quote(reply.detail)}")
    return False


def _record(summary: RunSummary, m: CaseManifest, verdict: str, detail: str) -> None:
    summary.failed.append((m.case_id, verdict, detail))
    write_verdict(m.dir, verdict, detail)
