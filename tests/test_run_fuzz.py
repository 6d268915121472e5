"""Structured fuzzing of what a runner hands back: its reply lines (parsed alone, and read from a real
pipe by a real process), status.txt, run-verdict.txt, and a 'done' checked against the case's files.

Strategies build near-valid input: the protocol's own lines and files with hostile leaves (statuses
that are not int32 decimals, ids of other cases, long and odd unicode text, NUL and CR bytes, FIFOs
and directories in a file's place). The only allowed outcomes are a result or our one-line UserError.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import strategies as st

from aclnn_cli.casedir import manifest as M

from aclnn_cli.casedir import dirs as casedirs
from aclnn_cli.device import outcome
from aclnn_cli.device.outcome import VERDICT_LIMIT, VERDICTS, check_done, read_status_file, read_verdict
from aclnn_cli.device.process import RunnerGone
from aclnn_cli.device.replies import INT32, MAX_LINE, MESSAGE, LineReader, MalformedReply, parse_reply
from aclnn_cli.device.run import Runner
from fuzzing import allowed_outcome, fuzz_target, scratch

CASE = "silu_backward-a-3"

odd_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200),
    st.sampled_from(["\x00", "\r", "\u2028", "\ufeff", "²", "٣", "１", "\x1b[2J", "é" * 50, " ", "\t"]),
    st.integers(1, 6000).map(lambda n: "x" * n),
)
status_tokens = st.one_of(
    st.integers(-(1 << 31), (1 << 31) - 1).map(str),  # valid
    st.integers(-(1 << 70), 1 << 70).map(str),  # out of int32
    st.integers(4000, 6000).map(lambda n: "9" * n),  # beyond int()'s digit limit, around MAX_LINE
    st.sampled_from(["--5", "+5", "0x10", "1e3", "nan", "inf", "-0", "007", "1_000", "", " 0", "0 ", "1 2", "²",
                     "٣", "１２", "-", "0\x00"]),
    odd_text,
)
case_ids = st.one_of(st.just(CASE), st.just(CASE + " extra"), st.just(CASE[:-1]), st.just(""), odd_text)
reply_lines = st.one_of(
    st.builds(lambda w, i, s: f"{w} {i} {s}", st.just("done"), case_ids, status_tokens),
    st.builds(lambda w, i, m: f"{w} {i} {m}", st.sampled_from(["error", "fault"]), case_ids, odd_text),
    st.builds(lambda m: f"fatal {m}", odd_text),
    st.builds(lambda v, s: f"ready {v} {s}", st.sampled_from(["aclnn-runner/1", "aclnn-runner/0", ""]), odd_text),
    st.builds(lambda w, r: f"{w}{r}", st.sampled_from(["done", "DONE", "ready", "", "done\t"]), odd_text),
)


def encoded(lines: list[str], garbage: bytes, newline: bool) -> bytes:
    data = "\n".join(lines).encode("utf-8", "surrogatepass") + garbage
    return data + b"\n" if newline else data


@fuzz_target(lines=st.lists(reply_lines, max_size=6), garbage=st.binary(max_size=64), newline=st.booleans(),
             cuts=st.lists(st.integers(0, 20000), max_size=8), before_ready=st.booleans())
def test_fuzz_reply_lines(lines, garbage, newline, cuts, before_ready):
    """LineReader over arbitrary chunk boundaries, then parse_reply on each line: a Reply or one line."""
    data = encoded(lines, garbage, newline)
    reader, bounds = LineReader(), sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    for start, stop in zip(bounds, bounds[1:]):
        reader.feed(data[start:stop])
        while True:
            try:
                line = reader.line()
            except MalformedReply as exc:
                allowed_outcome(exc)
                return
            if line is None:
                break
            assert len(line) <= MAX_LINE and b"\n" not in line
            try:
                reply = parse_reply(line, None if before_ready else CASE)
            except MalformedReply as exc:
                allowed_outcome(exc)
                continue
            if reply.word == "done":
                assert reply.status in INT32 and line.startswith(f"done {CASE} ".encode())
            elif reply.word != "ready":
                assert len(reply.detail) <= MESSAGE and "\n" not in reply.detail


@fuzz_target(lines=st.lists(reply_lines, min_size=1, max_size=4), garbage=st.binary(max_size=64),
             newline=st.booleans(), ending=st.sampled_from(["exit 0", "exit 3", "kill -SEGV $$", 'eval "exec $2>&-"; exec 3>&-; sleep 5',
                                    "sleep 5"]))
def test_fuzz_a_runner_process_replying(lines, garbage, newline, ending):
    """A real process writes the bytes to the reply pipe, then exits, crashes or closes it and lingers:
    the start is a Runner or one line, each later line a Reply, a MalformedReply or the runner gone."""
    with scratch() as d:
        data = d / "replies"
        data.write_bytes(encoded(lines, garbage, newline))
        # sh -c SCRIPT DATA --reply-fd N: $0 is the data file, $2 the descriptor
        command = ["/bin/sh", "-c", f'exec 3>&"$2"; cat "$0" >&3; {ending}', str(data)]
        try:
            runner = Runner(command, dict(os.environ), timeout=0.5)
        except Exception as exc:  # noqa: BLE001 - the outcome is what is tested
            allowed_outcome(exc)
            return
        try:
            for _ in range(len(lines) + 1):
                try:
                    parse_reply(runner.process.line(), CASE)
                except RunnerGone as gone:
                    assert gone.verdict in ("CRASH", "TIMEOUT") and "\n" not in gone.detail
                    break
                except MalformedReply as exc:
                    allowed_outcome(exc)
                    break
        finally:
            runner.kill()


status_contents = st.one_of(
    st.builds(lambda s, pre, post: f"{pre}{s}{post}".encode(), status_tokens,
              st.sampled_from(["", " ", "\ufeff", "\t"]), st.sampled_from(["\n", "\r\n", "", "\n\n", "\x00"])),
    st.binary(max_size=100),
    st.integers(60, 70).map(lambda n: b"0" * n),
)


def place(path: Path, content: bytes, kind: str) -> None:
    """What a runner may leave in a file's place."""
    if kind == "file":
        path.write_bytes(content)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    elif kind == "dangling":
        path.symlink_to(path.with_name("nowhere"))
    elif kind == "loop":
        path.symlink_to(path)


kinds = st.sampled_from(["file"] * 6 + ["fifo", "dir", "dangling", "loop", "none"])


@fuzz_target(content=status_contents, kind=kinds)
def test_fuzz_status_file(content, kind):
    with scratch() as d:
        path = d / "status.txt"
        place(path, content, kind)
        try:
            status = read_status_file(str(path))
        except Exception as exc:  # noqa: BLE001
            allowed_outcome(exc)
            return
        assert status is None or status in INT32
        assert (status is None) == (kind in ("none", "dangling"))


verdict_contents = st.one_of(
    st.builds(lambda v, detail, junk: f"{v}\n{detail}\n".encode("utf-8", "surrogatepass") + junk,
              st.one_of(st.sampled_from(VERDICTS), st.sampled_from(["PASS", "crash", " CRASH ", ""]), odd_text),
              odd_text, st.binary(max_size=32)),
    st.binary(max_size=200),
    st.integers(VERDICT_LIMIT - 2, VERDICT_LIMIT + 2).map(lambda n: b"CRASH\n" + b"y" * n),
)


@fuzz_target(content=verdict_contents, kind=kinds)
def test_fuzz_run_verdict_file(content, kind):
    """read_verdict never raises: a verdict file no one can trust is the case's ERROR, never a PASS."""
    with scratch() as d:
        place(d / outcome.RUN_VERDICT_FILE, content, kind)
        got = read_verdict(d)
        if kind in ("none", "dangling"):
            assert got is None
            return
        verdict, detail = got
        assert verdict in VERDICTS and len(detail) <= VERDICT_LIMIT
        first = content.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        trusted = kind == "file" and len(content) <= VERDICT_LIMIT and first in VERDICTS
        assert verdict == (first if trusted else "ERROR")


_suite: dict[str, Path] = {}


def generated_case() -> Path:
    """One generated case, made once per process (targets take no fixtures); copied per example."""
    if "case" not in _suite:
        from helpers import run_cli, write_yaml

        root = Path(tempfile.mkdtemp(prefix="aclnn-fuzz-suite-"))
        atexit.register(shutil.rmtree, root, True)
        text = "op: aclnnSiluBackward\ncases:\n  - {name: a, shape: [3], dtype: float32}\n"
        assert run_cli("gen", write_yaml(root, text), "-o", root / "out").exit_code == 0
        _suite["case"], = casedirs.find_cases(root / "out")
    return _suite["case"]


@fuzz_target(status=st.one_of(st.integers(-(1 << 31), (1 << 31) - 1), st.sampled_from([0, 0, 161002])),
             content=status_contents, kind=kinds, dump_kind=kinds)
def test_fuzz_done_against_the_files(status, content, kind, dump_kind):
    """check_done on whatever a runner left: None only when the status file, the reply, the expected
    status and the dump all agree; otherwise a verdict with a one-line reason."""
    with scratch() as d:
        case = d / generated_case().name
        shutil.copytree(generated_case(), case)
        m = M.load(case)
        for t in m.tensors:
            if t.dump:
                Path(t.dump).unlink(missing_ok=True)
                place(Path(t.dump), b"\0" * 12, dump_kind)
        place(case / M.STATUS_FILE, content, kind)
        got = check_done(m, status)
        if got is None:
            assert status == 0 and read_status_file(str(case / M.STATUS_FILE)) == 0 and dump_kind == "file"
        else:
            verdict, reason = got
            assert verdict in ("ERROR", "MISSING", "STATUS") and "\n" not in reason and len(reason) < 2 * MAX_LINE
            assert str(status) in reason or verdict != "STATUS"
