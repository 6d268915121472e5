"""Which files gen wrote are unchanged since their digest was taken, known without reading them.

verify must never blame a kernel for a golden or an input changed since gen, so it checks their
sha256. Nothing in the device loop writes them, yet hashing them on every verify cost more than the
comparison. As git's index does, a verify that hashed them records each file's stat
data beside its digest in the case's `.stat-cache.json`; a later verify re-hashes a file only when
its stat data differs, or when the record is "racily clean", or with `--rehash`.

- Stat data: size, mtime and ctime in nanoseconds, inode, device. Rewriting a file moves its mtime
  and ctime; putting the mtime back (`touch -r`) moves the ctime, which only the kernel sets; a
  replacement file has another inode (and a new ctime).
- Racily clean: a file changed in the same clock tick as the stat that was recorded can keep the
  very same stat data. A record is trusted only if both of its times are older than the moment it
  was taken by more than RACY_NS (timestamps are as coarse as 2 s on some file systems); else the
  file is hashed again, and the record renewed once it is old enough.
- gen does not write the record: taken right after the files are written it would always be racy.
  The first verify at least RACY_NS after gen hashes the files (as it must) and writes it.
- The record is a cache, not part of the manifest: case.json keeps only digests, so gen's output
  stays byte-for-byte reproducible. A missing or unreadable record means: hash everything.
"""

from __future__ import annotations

import json
import os
import stat
import time

from .regular import regular_file_bytes

CACHE_FILE = ".stat-cache.json"
FORMAT = "aclnn-cli/stat-cache/1"
RACY_NS = 2_000_000_000
WORTH_BYTES = 4 << 20  # below this (all of a case's hashed files together), hashing them costs less than
# writing a record (an exclusive create and a rename: ~0.4 ms here); such cases are simply hashed
MAX_CACHE_BYTES = 1 << 16

StatData = tuple[int, int, int, int, int]  # size, mtime_ns, ctime_ns, inode, device


def stat_data(path: str) -> StatData | None:
    """The stat data of a regular file (not following a symlink), or None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev


def snapshot(case_dir: str, names: list[str]) -> tuple[int, dict[str, StatData]]:
    """(now, stat data of each file): taken before the files are hashed, so that a change made while
    or after they are read moves what a later check compares (the ctime at least)."""
    taken = time.time_ns()
    data = {name: sd for name in names if (sd := stat_data(os.path.join(case_dir, name))) is not None}
    return taken, data


def record(case_dir: str, taken: tuple[int, dict[str, StatData]], digests: dict[str, str]) -> None:
    """Write the record: each file's digest beside the stat data it had before it was hashed.

    Not written for small cases (under WORTH_BYTES, hashing is the cheaper proof), nor when it would be
    racily clean (a file changed within RACY_NS of the snapshot): such a
    record proves nothing, and writing thousands of them right after gen cost more than the hashing.
    Best effort: a cache that cannot be written (read-only OUT, full disk) only costs re-hashing.
    """
    when, data = taken
    if sum(sd[0] for sd in data.values()) < WORTH_BYTES:
        return
    if any(sd[1] >= when - RACY_NS or sd[2] >= when - RACY_NS for sd in data.values()):
        return
    files = {name: [digests[name], *data[name]] for name in digests if name in data}
    text = json.dumps({"format": FORMAT, "taken_ns": when, "files": files}, sort_keys=True)
    _cache_written(os.path.join(case_dir, CACHE_FILE), text)


def _cache_written(path: str, text: str) -> None:
    """A cache file's text written to a temporary name (the pid and a random part: two hosts sharing OUT may share
    a pid) and renamed into place. Best effort: a cache that cannot be written only costs hashing again."""
    tmp = f"{path}.{os.getpid()}-{os.urandom(4).hex()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(text.encode())
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def unchanged(case_dir: str, digests: dict[str, str]) -> bool:
    """True if every named file is proven unchanged since a digest equal to the recorded one was taken:
    the record exists and agrees on the digest, the stat data is the same, and the record is not racy."""
    raw = regular_file_bytes(os.path.join(case_dir, CACHE_FILE), MAX_CACHE_BYTES)
    if raw is None:
        return False
    try:
        doc = json.loads(raw)
        if doc.get("format") != FORMAT:
            return False
        taken, files = int(doc["taken_ns"]), doc["files"]
        for name, digest in digests.items():
            entry = files.get(name)
            if not isinstance(entry, list) or len(entry) != 6 or entry[0] != digest:
                return False
            recorded = tuple(int(v) for v in entry[1:])
            if recorded[1] >= taken - RACY_NS or recorded[2] >= taken - RACY_NS:  # racily clean
                return False
            if stat_data(os.path.join(case_dir, name)) != recorded:
                return False
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError):  # (a cache: any
        return False  # trouble, a nest as deep as the file allows too, means only that the files are hashed)
    return True


# ---- one record for a suite's many small cases ------------------------------------------------------------------
#
# A small case's files are cheaper to hash than to record one by one (WORTH_BYTES), yet verifying 2,000 of them
# spent a third of each case's time reading and hashing inputs and goldens that the device loop never writes. A
# suite's small cases therefore share one record, with `.stat-cache.json`'s rules, in one file at the root verify
# was given: read once before the workers fork (they inherit it), and written again only where what it proves
# changed. Per case, one line per file: "name digest size mtime ctime inode device" (line()); a file whose line the
# record holds is proven by comparing that text, no number parsed.

SUITE_FILE = ".suite-stat-cache.json"
SUITE_FORMAT = "aclnn-cli/suite-stat-cache/1"
MAX_SUITE_BYTES = 1 << 27  # about 300,000 cases of three files; a larger record is not read (everything is hashed)


def line(name: str, digest: str, st: os.stat_result) -> str:
    """A file's line in the suite's record: its name, the digest it was proven to hold, and its stat data then."""
    return f"{name} {digest} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino} {st.st_dev}"


def settled(st: os.stat_result, taken: int) -> bool:
    """Whether a file's stat data (taken at or after `taken`, before it was hashed) may be recorded: both of its
    times older than `taken` by more than RACY_NS (else racily clean: a change in the same tick could hide)."""
    return st.st_mtime_ns < taken - RACY_NS and st.st_ctime_ns < taken - RACY_NS


class SuiteRecord:
    """The suite's record as loaded (what it proves), and how this run's proofs are written back."""

    def __init__(self, root: str, taken: int, previous: dict, trusted: bool) -> None:
        self.root, self.taken, self.previous = root, taken, previous
        self.known = previous if trusted else {}  # (--rehash: nothing proven, everything recorded anew)
        self.prefix = "" if os.path.normpath(root) == "." else root.rstrip(os.sep) + os.sep  # (`verify .`: the
        # case directories are then relative paths, Path("./x") being "x")

    @classmethod
    def load(cls, root: str, rehash: bool = False) -> "SuiteRecord":
        """The record at root (empty if missing, unreadable or not this format). taken: now, before this run looks
        at any file: what its new lines are dated by."""
        taken, previous = time.time_ns(), {}
        raw = regular_file_bytes(os.path.join(root, SUITE_FILE), MAX_SUITE_BYTES)
        if raw is not None:
            try:
                doc = json.loads(raw)
                if type(doc) is dict and doc.get("format") == SUITE_FORMAT and type(doc.get("cases")) is dict:
                    previous = doc["cases"]
            except (ValueError, RecursionError):
                pass
        return cls(root, taken, previous, not rehash)

    def __reduce__(self):
        """Sent to a pool's worker (where there is no fork) without its lines: that worker hashes everything."""
        return SuiteRecord, (self.root, self.taken, {}, False)

    def case_key(self, case_dir: str) -> str | None:
        """A case's key: its directory's path under the root (None: not under it)."""
        return case_dir[len(self.prefix):] if case_dir.startswith(self.prefix) else None

    def lines(self, key: str | None) -> list | tuple:
        """The case's lines the record holds (anything else there: none)."""
        have = self.known.get(key) if key is not None else None
        return have if type(have) is list else ()

    def write(self, examined: list[str], fresh: dict[str, list[str]]) -> None:
        """Record what this run proved: the cases whose files it looked at (keys) hold `fresh`'s lines alone (a case
        absent from fresh had a file that could not be recorded: it is hashed next time); the other cases' lines
        stay where their directory does. Written only if that changes the record; best effort, as record()."""
        if not examined:  # (nothing looked at, nothing proven: the record stands; not a stat of each case's folder)
            return
        cases = dict(self.previous)
        for key in examined:
            cases.pop(key, None)
        for key in [k for k in cases if not os.path.isdir(self.prefix + k)]:
            del cases[key]  # (a case no longer there)
        cases.update(fresh)
        if cases == self.previous:
            return
        text = json.dumps({"format": SUITE_FORMAT, "cases": cases}, separators=(",", ":"))
        if len(text) > MAX_SUITE_BYTES:
            return
        _cache_written(os.path.join(self.root, SUITE_FILE), text)
