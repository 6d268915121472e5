"""Shards in an output directory: the record gen --shard writes, and the cases verify, emulate and run act on.

`gen --shard I/N -o OUT` writes `OUT/aclnn-shard-I-of-N.json` (the suite's digest and size, I, N and
the shard's case ids) before its first case, so an OUT never looks unsharded while it is filled. An
OUT holding records is a sharded OUT: its cases are exactly the recorded ones (a missing or a foreign
case is one line, exit 2), verify, emulate and run act on all of them, and a `--shard` that names no
recorded shard is refused instead of splitting the cases again. An OUT without records is split as
before (`--shard` over one gen's whole suite, e.g. on a shared file system).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..files import jsonsafe
from . import manifest as M
from . import dirs as casedirs
from ..files.text import clip, show
from ..errors import UserError
from .shard import Coverage, empty_shard, shard_ids, some, suite_digest
from ..tensor.storage import atomic_write_text

RECORD_SCHEMA = "aclnn-cli/shard/1"
RECORD_RE = re.compile(r"aclnn-shard-([1-9][0-9]{0,18})-of-([1-9][0-9]{0,18})\.json")
MAX_RECORD_BYTES = 256 << 20  # the case ids of one shard: millions of them


def record_name(index: int, count: int) -> str:
    return f"aclnn-shard-{index}-of-{count}.json"


@dataclass(frozen=True)
class ShardRecord:
    """One shard gen wrote into OUT (its coverage names exactly one shard)."""

    path: Path
    coverage: Coverage

    @property
    def index(self) -> int:
        return self.coverage.shards[0]

    @property
    def name(self) -> str:
        return f"{self.index}/{self.coverage.count}"


def write_record(out: Path, coverage: Coverage) -> None:
    """gen's record of its shard (via a temporary name and a rename)."""
    data = {"schema": RECORD_SCHEMA, "tool_version": __version__, **coverage.to_json()}
    atomic_write_text(out / record_name(coverage.shards[0], coverage.count), json.dumps(data, indent=1) + "\n")


def read_records(out: Path) -> list[ShardRecord]:
    """The shard records in OUT, by shard number; UserError names a record that does not load."""
    try:
        with os.scandir(out) as entries:
            names = sorted(e.name for e in entries if e.name.startswith("aclnn-shard-") and RECORD_RE.fullmatch(e.name))
    except OSError:
        return []
    records = [_read_record(out / n) for n in names]
    return sorted(records, key=lambda r: (r.coverage.count, r.index))


def _read_record(path: Path) -> ShardRecord:
    where = str(path)
    try:
        data = jsonsafe.loads(jsonsafe.decode_utf8(_small_file(path)))
    except jsonsafe.JsonRefused as exc:
        raise UserError(f"shard record is not readable JSON: {exc}", where=where) from None
    if not isinstance(data, dict) or data.get("schema") != RECORD_SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else data
        raise UserError(f"not a shard record: schema is {show(got)}, this tool reads {RECORD_SCHEMA!r} "
                        f"(gen --shard writes it; do not name other files aclnn-shard-I-of-N.json)", where=where)
    coverage = Coverage.from_json(data, where, key="")
    m = RECORD_RE.fullmatch(path.name)
    if len(coverage.shards) != 1 or (coverage.shards[0], coverage.count) != (int(m.group(1)), int(m.group(2))):
        raise UserError(f"records shards {show(list(coverage.shards))} of {coverage.count}, not what its name "
                        f"says (renamed?)", where=where)
    return ShardRecord(path, coverage)


def _small_file(path: Path) -> bytes:
    """A regular file's bytes, refused past MAX_RECORD_BYTES (non-blocking: a FIFO must not hang us)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise UserError(f"cannot read the shard record: {exc.strerror}", where=str(path)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UserError("a shard record must be a regular file", where=str(path))
        data = os.read(fd, MAX_RECORD_BYTES + 1)
        if len(data) > MAX_RECORD_BYTES:
            raise UserError(f"shard record over {MAX_RECORD_BYTES >> 20} MiB; gen writes one id per case", where=str(path))
        return data
    except OSError as exc:
        raise UserError(f"cannot read the shard record: {exc.strerror}", where=str(path)) from None
    finally:
        os.close(fd)


def _describe(records: list[ShardRecord]) -> str:
    c = records[0].coverage
    shards = some((r.name for r in records), len(records))
    return f"shard{'s' if len(records) > 1 else ''} {shards} of suite {c.suite[:12]} ({records[0].path.name}" + \
        (f" and {len(records) - 1} more records)" if len(records) > 1 else ")")


# ------------------------------------------------------------------------------------------------ gen

def gen_shard(cases: list, shard: tuple[int, int], where: str) -> tuple[list, Coverage | None]:
    """gen's cases of this shard (shard: 0-based index, count) and the coverage to record (None unsharded)."""
    index, count = shard[0] + 1, shard[1]
    if count == 1:
        return cases, None
    pairs = [(c.case_id, c.numel) for c in cases]
    if count > len(pairs):
        raise empty_shard(index, count, len(pairs), where) if index > len(pairs) else _too_many(count, len(pairs), where)
    mine = shard_ids(pairs, index - 1, count)
    label = f"{index}/{count}"
    chosen = [dataclasses.replace(c, shard=label) for c in cases if c.case_id in mine]
    return chosen, Coverage(suite_digest(pairs), len(pairs), count, (index,), tuple(sorted(mine)))


def _too_many(count: int, cases: int, where: str) -> UserError:
    return UserError(f"{count} shards for {cases} cases: some shards would hold no case (use at most {cases})",
                     where=where)


def check_gen(out: Path, cases: list, coverage: Coverage | None) -> None:
    """Refuse, before gen writes anything, a gen that would mix suites or splits in a sharded OUT.

    Regenerating some of OUT's own cases without --shard (a failing case's repro line) is fine; so is
    gen of the same shard again (its record is replaced, e.g. after the suite changed).
    """
    records = read_records(out) if out.is_dir() else []
    if coverage is None:
        recorded = {c for r in records for c in r.coverage.cases}
        foreign = [c.case_id for c in cases if c.case_id not in recorded]
        if records and foreign:
            raise UserError(f"this directory holds {_describe(records)}; gen without --shard would add case "
                            f"{some(foreign, len(foreign))} to it: gen into another directory (or repeat the gen's "
                            f"--shard)", where=str(out))
        return
    own = record_name(coverage.shards[0], coverage.count)
    for r in records:
        if r.path.name != own and (r.coverage.suite, r.coverage.count) != (coverage.suite, coverage.count):
            raise UserError(f"this directory holds {_describe([r])}; this gen is shard {coverage.shards[0]}/"
                            f"{coverage.count} of suite {coverage.suite[:12]}: gen each suite or split into its "
                            f"own directory", where=str(out))


# ------------------------------------------------------------------------------- verify, emulate, run

@dataclass
class Selection:
    """The case directories a command acts on, and what they must cover (None: no shard in play).
    manifests/broken: loaded already (when the split needed them), else None."""

    dirs: list[Path]
    coverage: Coverage | None
    manifests: list | None = None
    broken: list = field(default_factory=list)

    def loaded(self) -> tuple[list, list]:
        """(manifests, [(dir, error)]) of the selected cases."""
        if self.manifests is None:
            self.manifests, self.broken = M.load_all(self.dirs)
        return self.manifests, self.broken


def select(out: Path, shard: tuple[int, int]) -> Selection:
    """The cases of OUT that verify, emulate or run act on (shard: 0-based index, count; (0, 1): all).

    A sharded OUT: all its cases, or those of the recorded shard --shard names (refused if it names none).
    Otherwise --shard splits the cases found (the same split on every runner that sees the same OUT).
    """
    records = read_records(out) if not (out / casedirs.MANIFEST).is_file() and out.is_dir() else []
    if records:
        return _recorded(out, records, shard)
    dirs = casedirs.find_cases(out)
    if shard[1] == 1:
        return Selection(dirs, None)
    return _split(out, dirs, shard[0] + 1, shard[1])


def _split(out: Path, dirs: list[Path], index: int, count: int) -> Selection:
    manifests, broken = M.load_all(dirs)
    sharded = next((m for m in manifests if m.raw.get("shard")), None)
    if sharded is not None:  # (a sharded gen's OUT whose records are gone: splitting again judges other cases)
        label = str(sharded.raw["shard"])
        raise UserError(f"case {clip(sharded.case_id)} was written by gen --shard {clip(label)}, but this directory "
                        f"holds no shard record (aclnn-shard-*.json): run that gen again to restore it, or verify "
                        f"every case here without --shard", where=str(out))
    pairs = [(m.case_id, m.output.layout.numel) for m in manifests] + [(d.name, 0) for d, _ in broken]
    if count > len(pairs):
        raise empty_shard(index, count, len(pairs), str(out)) if index > len(pairs) else \
            _too_many(count, len(pairs), str(out))
    mine = shard_ids(pairs, index - 1, count)
    coverage = Coverage(suite_digest(pairs), len(pairs), count, (index,), tuple(sorted(mine)))
    manifests = [m for m in manifests if m.case_id in mine]
    broken = [(d, e) for d, e in broken if d.name in mine]
    return Selection(sorted([m.dir for m in manifests] + [d for d, _ in broken]), coverage, manifests, broken)


def _recorded(out: Path, records: list[ShardRecord], shard: tuple[int, int]) -> Selection:
    first = records[0].coverage
    for r in records[1:]:
        if (r.coverage.suite, r.coverage.count) != (first.suite, first.count):
            raise UserError(f"{r.path.name} is shard {r.name} of suite {r.coverage.suite[:12]} but "
                            f"{records[0].path.name} is shard {records[0].name} of suite {first.suite[:12]}: "
                            f"gens of different suites or splits mixed here", where=str(out))
    owner: dict[str, ShardRecord] = {}
    for r in records:
        for c in r.coverage.cases:
            if c in owner:
                raise UserError(f"case {clip(c)} is in {owner[c].path.name} and in {r.path.name}", where=str(out))
            owner[c] = r
    present = [n for n in casedirs.subdirs(out) if os.path.exists(casedirs.join(casedirs.join(str(out), n), casedirs.MANIFEST))]
    foreign = [n for n in present if n not in owner]
    if foreign:
        raise UserError(f"case{'s' if len(foreign) > 1 else ''} {some(foreign, len(foreign))} in no shard gen "
                        f"recorded here ({_describe(records)}): left from another gen? delete "
                        f"{'them' if len(foreign) > 1 else 'it'} or gen into a fresh directory", where=str(out))
    chosen = records
    if shard[1] != 1:
        chosen = [r for r in records if (r.index, r.coverage.count) == (shard[0] + 1, shard[1])]
        if not chosen:
            raise UserError(f"--shard {shard[0] + 1}/{shard[1]} disagrees with gen: this directory holds "
                            f"{_describe(records)}", where=str(out))
    ids = sorted(c for r in chosen for c in r.coverage.cases)
    there = set(present)
    missing = [c for c in ids if c not in there]
    if missing:
        raise UserError(f"case{'s' if len(missing) > 1 else ''} {some(missing, len(missing))} of "
                        f"{_describe(chosen)} missing: gen wrote {'them' if len(missing) > 1 else 'it'} here "
                        f"(deleted or moved?); run the same gen again", where=str(out))
    coverage = Coverage(first.suite, first.suite_cases, first.count, tuple(r.index for r in chosen), tuple(ids))
    return Selection([out / c for c in ids], coverage)
