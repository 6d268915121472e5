"""Red-team probes: every way bad input can crash aclnn-cli or leave junk behind (issue 8, 'Done when').

This is the issue-8 'Done when' list, run as a new user would run it: the CLI in a process of its own
(clifork.py: the entry point in a forked process, so exit codes and tracebacks are real; the installed script
started anew where a probe's limits concern the start), on a tiny suite generated once per module and copied
per test. The
promise every probe checks:

* bad input (a case file, manifest, dump, status file, path or option) -> exit 2 and exactly one
  line on stderr, ``aclnn-cli: error: ...`` (or click's ``Usage: ... Error: ...`` for option
  parsing); progress lines (``gen: 2/3 cases ...``) do not count;
* never a ``Traceback``, on stdout or stderr;
* nothing half-written: no ``.partial-*``, ``.old-*`` or ``.tmp-*`` left behind, and nothing
  written outside the output directory (each run's working directory is empty and must stay so);
* where a verdict is the right answer, the verdict: the broken case is ERROR (MISSING, FAIL), the
  other cases still PASS, and ``--json`` / ``--junit`` are still written and parse (the JSON
  strictly: no NaN or Infinity tokens).

Probes that fail describe work still to do; none is marked xfail on purpose. Every run has
RLIMIT_FSIZE set, so a gen that ignores a size limit fails fast instead of filling the disk.
Permission probes run as root without CAP_DAC_OVERRIDE (so file modes apply) and disk-full probes
on a 2 MiB tmpfs; both skip where that is impossible. Set ACLNN_CLI to probe another command
line (e.g. ``"python -m aclnn_cli"``).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from clifork import cli_process


def _cli() -> list[str]:
    """$ACLNN_CLI if set, else the entry point beside this interpreter (the venv running the tests: .venv
    or make test-latest's .venv-latest), else this interpreter."""
    script = Path(sys.executable).parent / "aclnn-cli"
    if os.environ.get("ACLNN_CLI"):
        return os.environ["ACLNN_CLI"].split()
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from aclnn_cli.cli.main import main; sys.argv[0] = 'aclnn-cli'; main()"]


CLI = _cli()
FILE_LIMIT = 256 << 20  # no probe needs a bigger file; a runaway gen hits EFBIG instead of filling the disk
PROGRESS = re.compile(r"^(gen|emulate|verify): \d+/\d+ cases")
JUNK = re.compile(r"\.(partial|old|tmp)-")
SIZE_UNITS = re.compile(r"\d(\.\d+)? ?[KMGTPEZY]i?B\b")

SUITE = """\
op: aclnnSiluBackward
defaults: {dtype: float32, seed: 1}
cases:
  - {name: a, shape: [16]}
  - {name: b, shape: [4, 8]}
  - {name: c, shape: [8], dtype: float16}
"""
A, B, C = "silu_backward-a", "silu_backward-b", "silu_backward-c"
DUMP, GOLDEN, STATUS = "gradInput.dump.bin", "gradInput.golden.bin", "status.txt"
HEAD = "op: aclnnSiluBackward\ncases:\n"


# ---------------------------------------------------------------- running the CLI

@dataclass
class Run:
    code: int
    out: str
    err: str
    created: set = field(default_factory=set)  # paths the run added under the sandbox

    @property
    def lines(self) -> list[str]:
        """stderr without blank and progress lines."""
        return [ln for ln in self.err.splitlines() if ln.strip() and not PROGRESS.match(ln)]

    def summary(self) -> str:
        """Exit code and the error line, or the traceback's last frame and exception."""
        frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', self.err)
        if "Traceback" in self.err and frames:
            file, line, fn = frames[-1]
            return f"exit {self.code}, traceback at {Path(file).name}:{line} {fn}: {self.lines[-1][:300]}"
        lines = self.lines or ["(stderr empty)"]
        last = f" ... {lines[-1][:200]}" if len(lines) > 1 else ""
        return f"exit {self.code}, {len(lines)} line(s): {lines[0][:300]}{last}"

    def __str__(self) -> str:
        return f"{self.summary()}\n--- stderr:\n{self.err[-3000:]}\n--- stdout:\n{self.out[-1500:]}"


def expect(ok, why: str, r: Run | None = None) -> None:
    """Fail with `why` and the run's summary first (the line pytest's -rf report shows)."""
    if not ok:
        pytest.fail(f"{why}; {r}" if r is not None else why, pytrace=False)


def _drop_dac() -> None:
    """As root, give up CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH so that file modes apply."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (1, 2):
            if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _limits(mem: int | None = None, unprivileged: bool = False):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
        if mem:
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        if unprivileged:
            _drop_dac()
    return apply


class Sandbox:
    """A test's directory; the CLI runs in its empty `cwd`, and each run records what it created."""

    def __init__(self, root: Path) -> None:
        self.root, self.cwd = root, root / "cwd"
        self.cwd.mkdir(exist_ok=True)

    def tree(self) -> set[Path]:
        return set(self.root.rglob("*"))

    def run(self, *args, timeout: float = 60, mem: int | None = None, unprivileged: bool = False) -> Run:
        """The command in a process of its own: forked from clifork's server (the same entry point, a new process),
        or the installed script started anew where the start is part of the probe (a memory limit: the address
        space a new process maps; file modes for an unprivileged process) or ACLNN_CLI names another command."""
        before = self.tree()
        if mem or unprivileged or os.environ.get("ACLNN_CLI"):
            p = subprocess.run(CLI + [str(a) for a in args], cwd=self.cwd, capture_output=True, text=True,
                               errors="replace", timeout=timeout, preexec_fn=_limits(mem, unprivileged))
        else:
            p = cli_process(*args, cwd=self.cwd, timeout=timeout, fsize=FILE_LIMIT)
        return Run(p.returncode, p.stdout, p.stderr, self.tree() - before)

    def junk(self) -> list[Path]:
        return sorted(p for p in self.tree() if JUNK.search(p.name))


@pytest.fixture
def sb(tmp_path) -> Sandbox:
    return Sandbox(tmp_path)


# ---------------------------------------------------------------- the promises

def assert_tidy(sb: Sandbox, r: Run, *allowed: Path) -> None:
    """No traceback, no half-written files anywhere, nothing created outside `allowed` (OUT, --json ...)."""
    expect("Traceback" not in r.out + r.err, "traceback", r)
    expect(not sb.junk(), f"left behind {[str(p.relative_to(sb.root)) for p in sb.junk()][:3]}", r)
    outside = sorted(str(p.relative_to(sb.root)) for p in r.created
                     if not any(p == a or a in p.parents for a in allowed))
    expect(not outside, f"written outside the output: {outside[:3]}", r)


def assert_error(sb: Sandbox, r: Run, *mentions: str, allowed: tuple = (), usage_ok: bool = False) -> str:
    """Exit 2 with one error line that names each of `mentions`; tidy. Returns the line."""
    assert_tidy(sb, r, *allowed)
    expect(r.code == 2, "exit code is not 2", r)
    lines = r.lines
    if usage_ok and lines and lines[0].startswith("Usage:"):
        expect(lines[-1].startswith("Error:"), "not click's usage error", r)
    else:
        expect(len(lines) == 1 and lines[0].startswith("aclnn-cli: error:"), "not one 'aclnn-cli: error:' line", r)
    for m in mentions:
        expect(m in lines[-1], f"{m!r} not named", r)
    return lines[-1]


def assert_nothing_in(out: Path) -> None:
    made = sorted(str(p.relative_to(out)) for p in out.rglob("*")) if out.is_dir() else []
    expect(not made, f"wrote into {out.name} although refused: {made[:3]}")


def strict_json(path: Path):
    """Parsed JSON; fails the test on NaN / Infinity tokens (or a missing file)."""
    def refuse(token):
        raise ValueError(f"non-standard token {token}")
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)
    except (OSError, ValueError) as exc:
        pytest.fail(f"{path.name}: {exc}", pytrace=False)


def verdicts(sb: Sandbox, out: Path, *extra) -> tuple[Run, dict[str, dict]]:
    """verify OUT with --json and --junit; both must be written and parse. Cases keyed by directory."""
    js, xml = sb.root / "r.json", sb.root / "r.xml"
    r = sb.run("verify", out, "--jobs", "1", "--json", js, "--junit", xml, *extra)
    assert_tidy(sb, r, js, xml)
    expect(js.is_file() and xml.is_file(), "--json/--junit not written", r)
    cases = strict_json(js)["cases"]
    expect(len(list(ET.parse(xml).getroot().iter("testcase"))) == len(cases), "JUnit and JSON disagree", r)
    return r, {Path(c.get("path") or c["case_id"]).name: c for c in cases}


# ---------------------------------------------------------------- suites

def _must(r: Run) -> None:
    expect(r.code == 0 and "Traceback" not in r.err, "a good run failed", r)


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    """root/cases.yaml, root/gen (generated, no dumps), root/out (emulated: verifies with exit 0)."""
    root = tmp_path_factory.mktemp("suite")
    box = Sandbox(root)
    (root / "cases.yaml").write_text(SUITE)
    _must(box.run("gen", root / "cases.yaml", "-o", root / "gen", "--jobs", "1"))
    shutil.copytree(root / "gen", root / "out")
    _must(box.run("emulate", root / "out", "--jobs", "1"))
    _must(box.run("verify", root / "out", "--jobs", "1"))
    shutil.rmtree(box.cwd)
    return root


@pytest.fixture(scope="module")
def sign_slip(suite, tmp_path_factory) -> Path:
    """The suite emulated by a broken kernel (every case fails)."""
    out = tmp_path_factory.mktemp("slip") / "out"
    shutil.copytree(suite / "gen", out)
    _must(Sandbox(out.parent).run("emulate", out, "--defect", "sign-slip", "--jobs", "1"))
    return out


def copy(src: Path, sb: Sandbox, name: str = "out") -> Path:
    return Path(shutil.copytree(src, sb.root / name))


@pytest.fixture(scope="module")
def unprivileged(tmp_path_factory) -> None:
    """Runs where file modes apply (as root: without CAP_DAC_OVERRIDE), or skip."""
    locked = tmp_path_factory.mktemp("perm") / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        r = subprocess.run(["touch", str(locked / "x")], preexec_fn=_limits(unprivileged=True), capture_output=True)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot drop root's permission override: {exc}")
    finally:
        locked.chmod(0o700)
    if r.returncode == 0:
        pytest.skip("file modes do not apply to this user; cannot make a path unwritable")


# ---------------------------------------------------------------- gen: bad case files

def _alias_bomb(depth: int = 9, width: int = 9) -> str:
    """Billion laughs in ~450 bytes: 9**9 'lol's once expanded."""
    parts = ["&a0 [" + ", ".join(['"lol"'] * width) + "]"]
    parts += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, depth)]
    return "[" + ", ".join(parts) + "]"


_BIG = ", ".join(["100000000000000000"] * 7)  # 18 digits each; with a 0 dim the tensor is empty
BAD_CASE_FILES = {
    "not UTF-8": b"op: aclnnSiluBackward\ncases:\n  - {name: caf\xe9, shape: [4]}\n",
    "NUL byte": HEAD + "  - {name: a\x00, shape: [4]}\n",
    "standard is a list": HEAD + "  - {name: a, shape: [4], standard: [ulp]}\n",
    "standard is a mapping": HEAD + "  - {name: a, shape: [4], standard: {ulp: 1}}\n",
    "duplicate key op": "op: aclnnSiluBackward\nop: aclnnSiluBackward\ncases:\n  - {name: a, shape: [4]}\n",
    "duplicate key shape": HEAD + "  - {name: a, shape: [4], shape: [8]}\n",
    "dtype empty list": HEAD + "  - {name: a, shape: [4], dtype: []}\n",
    "product empty list": HEAD + "  - {name: a, shape: [4], product: []}\n",
    "id over 255 bytes": HEAD + f"  - {{name: {'a' * 100}, shape: [[0, {_BIG}], [1]], dtype: [float32, bfloat16]}}\n",
    "tolerance negative": HEAD + "  - {name: a, shape: [4], tolerance: {T: -1}}\n",
    "tolerance NaN": HEAD + "  - {name: a, shape: [4], tolerance: {T: .nan}}\n",
    "value too big for float": HEAD + "  - {name: a, shape: [4], inputs: {self: {values: [" + "9" * 400 + "]}}}\n",
    "nested 5000 deep": HEAD.replace("cases:\n", "cases: ") + "[" * 5000 + "]" * 5000 + "\n",
}


@pytest.mark.parametrize("text", BAD_CASE_FILES.values(), ids=BAD_CASE_FILES.keys())
def test_bad_case_file_is_one_line_and_writes_nothing(sb, text):
    case_file = sb.root / "bad.yaml"
    case_file.write_bytes(text if isinstance(text, bytes) else text.encode())
    out = sb.root / "out"
    r = sb.run("gen", case_file, "-o", out, "--jobs", "1")
    assert_error(sb, r, "bad.yaml", allowed=(out,))
    assert_nothing_in(out)


def test_yaml_alias_bomb_is_refused_in_bounded_memory(sb):
    case_file = sb.root / "bomb.yaml"
    case_file.write_text(HEAD + f"  - {{name: {_alias_bomb()}, shape: [4]}}\n")  # printing the name expands it
    out = sb.root / "out"
    r = sb.run("gen", case_file, "-o", out, "--jobs", "1", mem=3 << 29, timeout=60)
    line = assert_error(sb, r, "bomb.yaml", allowed=(out,))
    expect(len(line) < 300 and len(r.out + r.err) < 2000, "printed the expanded value", r)
    assert_nothing_in(out)


HUGE = {
    "shape 1e6 x 1e6 x 1e6": "shape: [1000000, 1000000, 1000000]",
    "shape 1e6 x 1e6": "shape: [1000000, 1000000]",
    "storage_shape 1e12": "shape: [4], tensors: {self: {layout: {strides: [1], storage_shape: [1000000000000]}}}",
    "offset 1e12": "shape: [4], tensors: {self: {layout: {offset: 1000000000000}}}",
    "offset 1e20": "shape: [4], tensors: {self: {layout: {offset: 100000000000000000000}}}",
    "dimension 2**63": "shape: [9223372036854775808]",
}
BEYOND_INT64 = {"offset 1e20", "dimension 2**63"}  # for these, an error naming the file and key does as well


@pytest.mark.parametrize("name, spec", HUGE.items(), ids=HUGE.keys())
def test_gen_refuses_a_huge_case_before_writing_anything(sb, name, spec):
    case_file = sb.root / "huge.yaml"
    case_file.write_text(HEAD + f"  - {{name: a, dtype: float32, {spec}}}\n")
    out = sb.root / "out"
    r = sb.run("gen", case_file, "-o", out, "--jobs", "1", timeout=30)
    line = assert_error(sb, r, allowed=(out,))
    named = name in BEYOND_INT64 and "huge.yaml" in line
    expect(SIZE_UNITS.search(line) or named, "no size in human units (GiB, TiB)", r)
    assert_nothing_in(out)


def test_gen_max_bytes_option(sb):
    case_file = sb.root / "c.yaml"
    case_file.write_text(HEAD + "  - {name: a, dtype: float32, shape: [1000000]}\n")
    out = sb.root / "out"
    line = assert_error(sb, sb.run("gen", case_file, "-o", out, "--jobs", "1", "--max-bytes", "1MiB"), allowed=(out,))
    expect(SIZE_UNITS.search(line), f"no size in human units: {line}")
    assert_nothing_in(out)
    case_file.write_text(HEAD + "  - {name: a, dtype: float32, shape: [16]}\n")
    _must(sb.run("gen", case_file, "-o", out, "--jobs", "1", "--max-bytes", "1MiB"))


# ---------------------------------------------------------------- gen: output paths

def test_gen_out_is_a_regular_file(sb, suite):
    target = sb.root / "afile"
    target.write_text("keep me")
    assert_error(sb, sb.run("gen", suite / "cases.yaml", "-o", target, "--jobs", "1"), "afile")
    expect(target.read_text() == "keep me", "overwrote the file given as -o")


def test_gen_out_under_a_regular_file(sb, suite):
    (sb.root / "afile").write_text("keep me")
    assert_error(sb, sb.run("gen", suite / "cases.yaml", "-o", sb.root / "afile" / "sub", "--jobs", "1"), "afile")


def test_gen_out_empty_string_writes_nothing_in_cwd(sb, suite):
    assert_error(sb, sb.run("gen", suite / "cases.yaml", "-o", "", "--jobs", "1"), usage_ok=True)
    expect(not any(sb.cwd.iterdir()), f"wrote into the working directory: {sorted(sb.cwd.iterdir())[:3]}")


def test_gen_nonexistent_case_file(sb):
    out = sb.root / "out"
    assert_error(sb, sb.run("gen", sb.root / "nope.yaml", "-o", out, "--jobs", "1"), "nope.yaml")
    assert_nothing_in(out)


def test_gen_out_not_writable(sb, suite, unprivileged):
    locked = sb.root / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        for out in (locked, locked / "sub"):
            r = sb.run("gen", suite / "cases.yaml", "-o", out, "--jobs", "1", unprivileged=True)
            assert_error(sb, r, str(locked))
        assert_nothing_in(locked)
    finally:
        locked.chmod(0o700)


def test_gen_unreadable_case_file(sb, suite, unprivileged):
    case_file = Path(shutil.copy(suite / "cases.yaml", sb.root / "c.yaml"))
    case_file.chmod(0)
    out = sb.root / "out"
    r = sb.run("gen", case_file, "-o", out, "--jobs", "1", unprivileged=True)
    assert_error(sb, r, "c.yaml", allowed=(out,), usage_ok=True)
    assert_nothing_in(out)


@pytest.fixture
def tmpfs(sb):
    """A 2 MiB file system at sb.root/mnt (unmounted afterwards), or skip."""
    mnt = sb.root / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a 2 MiB tmpfs (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_gen_disk_full(sb, tmpfs):
    case_file = sb.root / "c.yaml"
    case_file.write_text(HEAD + "  - {name: small, dtype: float32, shape: [4]}\n"
                         "  - {name: big, dtype: float32, shape: [1000000]}\n")  # 16 MB > 2 MiB
    out = tmpfs / "out"
    r = sb.run("gen", case_file, "-o", out, "--jobs", "1")
    assert_error(sb, r, str(tmpfs), allowed=(out,))
    left = sorted(p.name for p in out.rglob("*big*"))
    expect(not left, f"left a partial case: {left[:3]}", r)


def _fill_up(mnt: Path) -> None:
    block = b"\0" * 65536
    with open(mnt / "filler", "wb") as f:
        try:
            while True:
                f.write(block)
                f.flush()
        except OSError:
            pass


def test_emulate_disk_full(sb, suite, tmpfs):
    out = Path(shutil.copytree(suite / "gen", tmpfs / "out"))
    _fill_up(tmpfs)
    r = sb.run("emulate", out, "--jobs", "1")
    assert_error(sb, r, str(tmpfs), allowed=(out,))


def test_verify_json_on_a_full_disk(sb, suite, tmpfs):
    out = copy(suite / "out", sb)
    _fill_up(tmpfs)
    js = tmpfs / "r.json"
    assert_error(sb, sb.run("verify", out, "--jobs", "1", "--json", js), str(tmpfs), allowed=(js,))


def test_gen_will_not_replace_a_regular_file_with_a_case(sb, suite):
    out = sb.root / "out"
    out.mkdir()
    (out / A).write_text("my notes")
    r = sb.run("gen", suite / "cases.yaml", "-o", out, "--jobs", "1")
    assert_error(sb, r, A, allowed=(out,))
    expect((out / A).is_file() and (out / A).read_text() == "my notes", "replaced the user's file", r)


# ---------------------------------------------------------------- gen: interrupted runs

def _live_partial(out: Path, timeout: float = 30) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p for p in out.iterdir() if ".partial-" in p.name] if out.is_dir() else []
        if found:
            return found[0]
        time.sleep(0.01)
    pytest.fail(f"no .partial- directory appeared in {out.name} within {timeout} s", pytrace=False)


def test_kill_9_during_gen_then_rerun(sb):
    case_file = sb.root / "big.yaml"
    case_file.write_text(HEAD + "  - {name: big, dtype: float32, shape: [30000000]}\n")  # 120 MB per file
    out = sb.root / "out"
    args = CLI + ["gen", str(case_file), "-o", str(out), "--jobs", "1"]
    proc = subprocess.Popen(args, cwd=sb.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=_limits())
    try:
        stale = _live_partial(out)
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    expect(stale.exists() and proc.returncode == -signal.SIGKILL, "gen finished before it could be killed")
    try:
        r = sb.run("gen", case_file, "-o", out, "--jobs", "1")
        expect(r.code == 0, "rerun after kill -9 failed", r)
        assert_tidy(sb, r, out)
        expect(not stale.exists(), f"stale {stale.name} not removed", r)
        _must(sb.run("emulate", out, "--jobs", "1"))
        _must(sb.run("verify", out, "--jobs", "1"))
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_gen_removes_stale_partials_of_dead_processes_only(sb, suite):
    out = sb.root / "out"
    out.mkdir()
    done = subprocess.Popen(["true"])
    done.wait()
    dead = done.pid
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        stale = [out / f".{A}.partial-{dead}", out / f".{A}.old-{dead}"]
        live = out / f".{B}.partial-{sleeper.pid}"
        for d in (*stale, live):
            d.mkdir()
            (d / "case.json").write_text("{}")
        r = sb.run("gen", suite / "cases.yaml", "-o", out, "--jobs", "1")
        _must(r)
        expect(not [d for d in stale if d.exists()], f"stale dirs of a dead process not removed: "
               f"{[d.name for d in stale if d.exists()]}", r)
        expect(live.is_dir(), "removed the .partial- directory of a process that is still running", r)
        expect((out / A / "case.json").is_file(), "case not generated", r)
    finally:
        sleeper.kill()
        sleeper.wait()


# ---------------------------------------------------------------- verify: one broken case among three

def _replace_with_dir(name):
    def f(d: Path):
        (d / name).unlink(missing_ok=True)
        (d / name).mkdir()
    return f


def _write(name, data: bytes):
    return lambda d: (d / name).write_bytes(data)


def _flip(name, offset, n=1):
    def f(d: Path):
        b = bytearray((d / name).read_bytes())
        for i in range(offset, offset + n):
            b[i] ^= 0xFF
        (d / name).write_bytes(bytes(b))
    return f


def _edit(fn):
    def f(d: Path):
        m = json.loads((d / "case.json").read_text())
        fn(m)
        (d / "case.json").write_text(json.dumps(m))  # NaN in a value is written as the NaN token
    return f


def _out(m) -> dict:
    return next(t for t in m["tensors"] if t["name"] == "gradInput")


CHANGED = r"chang|modif|checksum|sha256|digest"
_NAN32 = b"\x00\x00\xc0\x7f" * 16
_INF32 = b"\x00\x00\x80\x7f" * 16
# name: (break case A, A's verdict, exit code, patterns A's reason must match)
BROKEN = {
    "dump is a directory": (_replace_with_dir(DUMP), "ERROR", 2, ()),
    "dump of the wrong size": (_write(DUMP, b"\0" * 10), "ERROR", 2, ()),
    "dump missing": (lambda d: (d / DUMP).unlink(), "MISSING", 1, ()),
    "dump all NaN": (_write(DUMP, _NAN32), "FAIL", 1, ()),
    "dump all inf": (_write(DUMP, _INF32), "FAIL", 1, ()),
    "status.txt is a directory": (_replace_with_dir(STATUS), "ERROR", 2, ()),
    "status.txt binary garbage": (_write(STATUS, bytes(range(256))), "ERROR", 2, ()),
    "status.txt empty": (_write(STATUS, b""), "ERROR", 2, ()),
    "case.json not JSON": (_write("case.json", b"not json"), "ERROR", 2, ()),
    "case.json a list": (_write("case.json", b"[]"), "ERROR", 2, ()),
    "case.json an empty object": (_write("case.json", b"{}"), "ERROR", 2, ()),
    "tensors a string": (_edit(lambda m: m.update(tensors="abc")), "ERROR", 2, ()),
    "tensors missing": (_edit(lambda m: m.pop("tensors")), "ERROR", 2, ()),
    "tensor shape a string": (_edit(lambda m: _out(m).update(shape="16")), "ERROR", 2, ()),
    "op unknown": (_edit(lambda m: m.update(op="aclnnNope")), "ERROR", 2, ()),
    "storage_shape edited": (_edit(lambda m: _out(m).update(storage_shape=[17])), "ERROR", 2, ()),
    "storage_shape empty": (_edit(lambda m: _out(m).update(storage_shape=[])), "ERROR", 2, ()),
    "shape and strides edited to fit": (_edit(lambda m: _out(m).update(shape=[8], strides=[2])), "ERROR", 2, ()),
    "expect_status unknown": (_edit(lambda m: m.update(expect_status=7)), "ERROR", 2, ()),
    "output role edited": (_edit(lambda m: _out(m).update(role="input")), "ERROR", 2, ()),
    "standard a list": (_edit(lambda m: m.update(standard=["ulp"])), "ERROR", 2, ()),
    "tolerance NaN": (_edit(lambda m: m.update(tolerance={"T": float("nan")})), "ERROR", 2, ()),
    "tolerance a list": (_edit(lambda m: m.update(tolerance=[1])), "ERROR", 2, ()),
    "standard unknown": (_edit(lambda m: m.update(standard="nope")), "ERROR", 2, ()),
    "case.json nested 100000 deep": (_write("case.json", b"[" * 100000 + b"]" * 100000), "ERROR", 2, ()),
    "golden 4 bytes changed": (_flip(GOLDEN, 4, 4), "ERROR", 2, ("golden", CHANGED)),  # never FAIL
    "input byte changed": (_flip("self.bin", 5), "ERROR", 2, ("self", CHANGED)),
}


@pytest.mark.parametrize("breaker, verdict, code, reason", BROKEN.values(), ids=BROKEN.keys())
def test_one_broken_case_gets_its_verdict_and_the_others_still_pass(sb, suite, breaker, verdict, code, reason):
    out = copy(suite / "out", sb)
    breaker(out / A)
    r, cases = verdicts(sb, out)
    got = {k: c["status"] for k, c in cases.items()}
    expect(got == {A: verdict, B: "PASS", C: "PASS"}, f"verdicts {got}, reason {cases.get(A, {}).get('reason')!r}", r)
    expect(r.code == code, f"exit code is not {code}", r)
    for pattern in reason:
        expect(re.search(pattern, cases[A]["reason"], re.I), f"reason does not match {pattern!r}: {cases[A]['reason']}")


def test_unreadable_dump_is_error(sb, suite, unprivileged):
    out = copy(suite / "out", sb)
    (out / A / DUMP).chmod(0)
    js = sb.root / "r.json"
    r = sb.run("verify", out, "--jobs", "1", "--json", js, unprivileged=True)
    assert_tidy(sb, r, js)
    cases = {c["case_id"]: c["status"] for c in strict_json(js)["cases"]}
    expect(cases == {A: "ERROR", B: "PASS", C: "PASS"} and r.code == 2, f"verdicts {cases}", r)


def test_leftover_partial_and_old_dirs_are_not_cases(sb, suite):
    out = copy(suite / "out", sb)
    shutil.copytree(out / A, out / f".{A}.partial-4194999")  # what a killed gen can leave
    shutil.copytree(out / B, out / f".{B}.old-4194999")
    js = sb.root / "r.json"
    r = sb.run("verify", out, "--jobs", "1", "--json", js)
    expect(r.code == 0 and sorted(c["case_id"] for c in strict_json(js)["cases"]) == [A, B, C],
           "verified a leftover directory as a case", r)
    r = sb.run("emulate", out, "--jobs", "1")
    expect(r.code == 0 and "emulated 3 cases" in r.out, "emulated a leftover directory as a case", r)


def test_case_dir_copied_under_another_name(sb, suite):
    """Its manifest names another directory's case: ERROR, so that the results keep one entry per case id."""
    out = copy(suite / "out", sb)
    shutil.copytree(out / A, out / "copy-of-a")
    r, cases = verdicts(sb, out)
    got = {k: c["status"] for k, c in cases.items()}
    expect(got == {A: "PASS", "copy-of-a": "ERROR", B: "PASS", C: "PASS"} and r.code == 2, f"verdicts {got}", r)


# ---------------------------------------------------------------- verify: paths and options

@pytest.mark.parametrize("what", ["nonexistent", "a file", "an empty dir"])
def test_verify_bad_out(sb, what):
    target = sb.root / "target"
    if what == "a file":
        target.write_text("x")
    elif what == "an empty dir":
        target.mkdir()
    assert_error(sb, sb.run("verify", target, "--jobs", "1"), "target")


OUTPUT_PATHS = {
    "--json under a file": ("--json", "afile/x.json"),
    "--json a directory": ("--json", "adir"),
    "--json empty": ("--json", ""),
    "--junit under a file": ("--junit", "afile/x.xml"),
    "--junit a directory": ("--junit", "adir"),
    "--csv-errors under a file": ("--csv-errors", "afile/csv"),
    "--csv-errors a file": ("--csv-errors", "afile"),
    "--csv-errors empty": ("--csv-errors", ""),
}


@pytest.mark.parametrize("option, path", OUTPUT_PATHS.values(), ids=OUTPUT_PATHS.keys())
def test_unwritable_output_path_is_refused_before_any_work(sb, suite, option, path):
    out = copy(suite / "out", sb)
    (sb.root / "afile").write_text("x")
    (sb.root / "adir").mkdir()
    target = sb.root / path if path else ""
    r = sb.run("verify", out, "--jobs", "1", option, target)
    assert_error(sb, r, *([path.split("/")[0]] if path else []), usage_ok=True)
    expect("PASS" not in r.out, f"judged the cases before checking {option}", r)


def test_json_in_unwritable_dir_is_refused_before_any_work(sb, suite, unprivileged):
    out = copy(suite / "out", sb)
    locked = sb.root / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        r = sb.run("verify", out, "--jobs", "1", "--json", locked / "r.json", unprivileged=True)
        assert_error(sb, r, "locked")
        expect("PASS" not in r.out, "judged the cases before checking --json", r)
    finally:
        locked.chmod(0o700)


BAD_TOLERANCES = {
    "allclose rtol nan": ("rtol", ["--standard", "allclose", "--rtol", "nan"]),
    "allclose rtol -1": ("rtol", ["--standard", "allclose", "--rtol", "-1"]),
    "allclose rtol inf": ("rtol", ["--standard", "allclose", "--rtol", "inf"]),
    "allclose atol nan": ("atol", ["--standard", "allclose", "--atol", "nan"]),
    "default rtol nan": ("rtol", ["--rtol", "nan"]),
    "ulp ulps=nan": ("ulps", ["--standard", "ulp", "--tolerance", "ulps=nan"]),
    "T=abc": ("T", ["--tolerance", "T=abc"]),
    "T=0": ("T", ["--tolerance", "T=0"]),
    "nokey=1": ("nokey", ["--tolerance", "nokey=1"]),
    "bitwise rtol": ("rtol", ["--standard", "bitwise", "--rtol", "0.1"]),
}


@pytest.mark.parametrize("key, args", BAD_TOLERANCES.values(), ids=BAD_TOLERANCES.keys())
def test_bad_tolerance_is_refused_before_judging(sb, suite, key, args):
    r = sb.run("verify", copy(suite / "out", sb), "--jobs", "1", *args)
    assert_error(sb, r, key, usage_ok=True)
    expect("PASS" not in r.out, "judged the cases before refusing the tolerance", r)


@pytest.mark.parametrize("key, args", BAD_TOLERANCES.values(), ids=BAD_TOLERANCES.keys())
def test_bad_tolerance_never_passes_a_broken_kernel(sb, sign_slip, key, args):
    r = sb.run("verify", sign_slip, "--jobs", "1", *args)
    expect(r.code != 0 and "Traceback" not in r.err, "a broken kernel passed (or crashed)", r)


SHARDS = {"0/1": "0/1", "2/1": "2/1", "a/b": "a/b", "1/0": "1/0", "-1/2": "-1/2", "empty": ""}


@pytest.mark.parametrize("shard", SHARDS.values(), ids=SHARDS.keys())
def test_bad_shard(sb, suite, shard):
    assert_error(sb, sb.run("verify", suite / "out", "--jobs", "1", "--shard", shard), usage_ok=True)


@pytest.mark.parametrize("jobs", ["0", "-1", "x"])
def test_bad_jobs(sb, suite, jobs):
    assert_error(sb, sb.run("verify", suite / "out", "--jobs", jobs), usage_ok=True)


@pytest.mark.parametrize("command", ["gen", "emulate", "verify"])
def test_shard_of_a_billion(sb, suite, command):
    """Valid but absurd: either refused in one line, or shard 1 takes exactly one case (the largest)."""
    out = copy(suite / "out", sb)
    target = [suite / "cases.yaml", "-o", out] if command == "gen" else [out]
    r = sb.run(command, *target, "--jobs", "1", "--shard", "1/1000000000", timeout=30)
    if r.code == 2:
        assert_error(sb, r, allowed=(out,))
    else:
        _must(r)
        assert_tidy(sb, r, out)


# ---------------------------------------------------------------- emulate

def test_emulate_refuses_a_case_whose_input_changed(sb, suite):
    out = copy(suite / "gen", sb)
    _flip("self.bin", 5)(out / A)
    r = sb.run("emulate", out, "--jobs", "1")
    assert_error(sb, r, A, allowed=(out,))
    expect(not (out / A / DUMP).exists(), "wrote a dump for the case it refused", r)


@pytest.mark.parametrize("what", ["nonexistent", "an empty dir"])
def test_emulate_bad_out(sb, what):
    target = sb.root / "target"
    if what == "an empty dir":
        target.mkdir()
    assert_error(sb, sb.run("emulate", target, "--jobs", "1"), "target", allowed=(target,))


# ---------------------------------------------------------------- report

@pytest.fixture(scope="module")
def results(suite) -> str:
    """A good verify --json file's text."""
    js = suite / "results.json"
    _must(Sandbox(suite).run("verify", suite / "out", "--jobs", "1", "--json", js))
    return js.read_text()


BAD_RESULTS = {
    "unknown status": lambda j: j["cases"][0].update(status="WEIRD"),
    "cases a string": lambda j: j.update(cases="abc"),
    "cases missing": lambda j: j.pop("cases"),
    "case missing keys": lambda j: j.update(cases=[{"case_id": "x"}]),
    "case a string": lambda j: j.update(cases=["x"]),
    "metrics a string": lambda j: j["cases"][0].update(metrics="x"),
    "worst a string": lambda j: j["cases"][0].update(worst="x"),
    "op a number": lambda j: j["cases"][0].update(op=5),
}


@pytest.mark.parametrize("breaker", BAD_RESULTS.values(), ids=BAD_RESULTS.keys())
def test_report_on_a_malformed_results_file(sb, results, breaker):
    data = json.loads(results)
    breaker(data)
    results = sb.root / "results"
    results.mkdir()
    (results / "r.json").write_text(json.dumps(data))
    merged = sb.root / "all.json"
    r = sb.run("report", results, "--json", merged, "--junit", sb.root / "all.xml")
    assert_error(sb, r, "r.json")


@pytest.mark.parametrize("what", ["a non-JSON file", "an empty dir", "nonexistent"])
def test_report_on_bad_input(sb, what):
    target = sb.root / "results"
    if what == "a non-JSON file":
        target.write_text("not json")
    elif what == "an empty dir":
        target.mkdir()
    assert_error(sb, sb.run("report", target, "--json", sb.root / "all.json"), "results")


def test_report_on_results_with_a_nan_token(sb, results):
    """Refused in one line, or merged into strict JSON: never NaN passed on to the next tool."""
    folder = sb.root / "results"
    folder.mkdir()
    (folder / "r.json").write_text(results.replace('"max_abs_error": ', '"max_abs_error": NaN, "x": ', 1))
    merged = sb.root / "all.json"
    r = sb.run("report", folder, "--json", merged)
    if r.code == 2:
        assert_error(sb, r, "r.json")
    else:
        assert_tidy(sb, r, merged)
        strict_json(merged)
