"""The defect matrix: every emulated variant x every standard over a suite -> how many cases each fails.

A defect is caught by a standard when at least one case does not pass; a
legitimate variant should be caught by none (a false alarm otherwise).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ..casedir import manifest as M

from ..casedir import dirs as casedirs
from ..device.defects import catalogue, find_variant
from ..device.emulate import emulate_case
from ..errors import UserError
from ..files.regular import read_regular
from ..ops import find_op
from ..pipeline.parallel import Runner
from ..standards.rules import DEFAULT_STANDARD, STANDARDS
from .results import PASS
from .verify import Options, verify_case

MATRIX_MAX_ELEMENTS = 200_000  # the large cases add time, not coverage


def matrix_cases(suite: Path, max_elements: int = MATRIX_MAX_ELEMENTS) -> list[tuple[Path, str]]:
    """(directory, op name) of the positive cases of a generated suite small enough for the matrix, those whose
    judged outputs are views first: a defect stops at its first failing case (first_failure), and the defects that
    only views show (a write past the view, strides ignored) otherwise ran through nearly every case to find one."""
    views, packed = [], []
    for d in casedirs.find_cases(suite):
        m = M.load(d)
        if m.expect_status == 0 and m.output.layout.numel <= max_elements:
            strided = any(not t.layout.is_contiguous for t in m.judged)
            (views if strided else packed).append((d, m.op.name))
    return views + packed


def _cases_for(name: str | None, cases: list[tuple[Path, str]]) -> list[str]:
    """An op's own variant changes only that op's cases (the others play the correct kernel): only those."""
    variant = find_variant(name) if name else None
    if variant is None or not variant.op_kernel:
        return [str(d) for d, _ in cases]
    return [str(d) for d, op in cases if name in find_op(op).variants]


def _link(src: str, dst: str) -> str:
    """A hard link where the file system allows it, else a copy: emulate and verify write nothing in place (a
    dump, a status, a stat cache: a temporary name renamed over the old one), so a link is never written through."""
    try:
        os.link(src, dst)
        return dst
    except OSError:
        return shutil.copy2(src, dst)


_copies: dict[tuple[str, str], M.CaseManifest] = {}  # (scratch, case directory) -> this process's working copy


def _copy(scratch: str, case: str) -> M.CaseManifest:
    """This process's working copy of a case, made and loaded once in `scratch` and reused by every variant the
    process runs: each variant's emulate rewrites every dump and the status, so nothing of the one before is left to
    judge, and its case.json is gen's, never written (a copy per variant and case cost more than the matrix's
    emulating and judging: one mkdir, a copy of each file, and their removal, for some 40,000 case runs; so did
    loading its manifest again for each)."""
    key = (scratch, case)
    if key not in _copies:
        target = Path(scratch) / str(os.getpid()) / Path(case).name
        shutil.copytree(case, target, copy_function=_link)
        _copies[key] = M.load(target)
    return _copies[key]


def _scratch(suite: Path) -> tempfile.TemporaryDirectory:
    """Where the working copies live: the system's temporary directory if it is on the suite's file system (the
    copies are hard links), else a hidden directory inside the suite (no command takes it for a case) where the
    suite can be written: a copy of every file of every case costs more than the matrix's judging (gen's 1.8 GB
    suite: 64 s of which 40 s copying, against 23 s with links)."""
    tmp = tempfile.TemporaryDirectory(prefix="aclnn-matrix-")
    if _same_device(suite, Path(tmp.name)):
        return tmp
    try:
        inside = tempfile.TemporaryDirectory(prefix=".aclnn-matrix-", dir=suite)
    except OSError:  # (a read-only suite: copies, then)
        return tmp
    tmp.cleanup()
    return inside


def _same_device(a: Path, b: Path) -> bool:
    return os.stat(a).st_dev == os.stat(b).st_dev


def _written(m: M.CaseManifest) -> bytes:
    """What verify reads of the device's run: the status and every judged output's dump (a digest of them)."""
    h = hashlib.sha256(read_regular(m.dir / M.STATUS_FILE, sys.maxsize))
    for t in m.judged:
        try:
            data = None if t.dump is None else read_regular(t.dump, sys.maxsize)  # (one open and read: a variant's
        except OSError:  # every case run asks this)
            data = None
        h.update(b"\0" if data is None else b"\1")  # (a missing dump is not an empty one)
        h.update(data or b"")
    return h.digest()


def _correct(args: tuple[list[str], list[str], str, bool]) -> tuple[dict[str, int], dict[str, tuple]]:
    """The correct kernel on a share of the cases: its failing counts, and per case what it wrote (a digest) with
    its verdict under each standard asked."""
    dirs, standards, scratch, first_failure = args
    failing = dict.fromkeys(standards, 0)
    seen = {}
    for d in dirs:
        m = _copy(scratch, d)
        emulate_case(m)
        passed = {}
        for std in standards:
            if not (first_failure and failing[std]):
                passed[std] = verify_case(m, Options(standard=std)).status == PASS
                failing[std] += not passed[std]
        seen[d] = (_written(m), passed)
    return failing, seen


def _one_variant(args: tuple[str, list[str], list[str], str, bool, dict]) -> tuple[str, dict[str, int]]:
    """A variant's failing counts. Where it writes what the correct kernel wrote (a legitimate variant mostly does,
    a defect often where it changes nothing), verify's verdict is the correct kernel's: not judged again."""
    name, dirs, standards, scratch, first_failure, correct = args
    variant = find_variant(name)
    failing = dict.fromkeys(standards, 0)
    for d in dirs:
        asked = [std for std in standards if not (first_failure and failing[std])]
        if not asked:  # (failed under every standard: the rest cannot change a cell)
            break
        m = _copy(scratch, d)
        try:
            emulate_case(m, variant=variant)
        except UserError:  # (a kernel that cannot run on the case's inputs, as a generic defect on integer ones: it
            for std in asked:  # writes no dump, which fails the case; the copy's dump is another variant's)
                failing[std] += 1
            continue
        written, passed = correct.get(d, (None, {}))
        same = written is not None and _written(m) == written
        for std in asked:
            ok = passed[std] if same and std in passed else verify_case(m, Options(standard=std)).status == PASS
            failing[std] += not ok
    return name, failing


def defect_matrix(suite: Path, variants: list[str] | None = None, standards: list[str] | None = None,
                  jobs: int = 2, first_failure: bool = False,
                  correct_standards: list[str] | None = None) -> dict[str, dict[str, int]]:
    """{variant: {standard: failing cases}}, with the correct emulated kernel as the first row.

    variants: the catalogue's names to run (None: all of them; [] the correct kernel only). first_failure: a cell
    only says whether the variant fails a case under that standard (1) or none (0): a standard that has failed one
    is not asked again, and a variant stops once every standard has (a defect caught, or a false alarm, needs
    one failing case; a pass needs them all).
    correct_standards: the standards of the correct kernel's row, if not `standards` (its emulated dumps judged
    under each: one emulation for every column).
    The correct kernel runs first, its cases shared among the workers; then each variant, which verify judges only
    where it wrote something else."""
    cases = matrix_cases(suite)
    names = list(catalogue()) if variants is None else variants
    stds = standards or list(STANDARDS)
    first = correct_standards or stds
    jobs = max(1, min(jobs, len(cases)))  # (no worker without a case to judge)
    shares = [share for i in range(jobs * 4) if (share := [str(d) for d, _ in cases[i::jobs * 4]])]
    with _scratch(suite) as scratch:
        try:
            with Runner(jobs) as run:  # (its workers freeze what they inherit from this process: see Runner)
                row, correct = dict.fromkeys(first, 0), {}
                for failing, seen in run.map(_correct, [((share, first, scratch, first_failure),) for share in shares]):
                    row = {std: row[std] + failing[std] for std in first}
                    correct.update(seen)
                if first_failure:
                    row = {std: min(n, 1) for std, n in row.items()}
                tasks = []
                for n in names:
                    dirs = _cases_for(n, cases)
                    tasks.append(((n, dirs, stds, scratch, first_failure, {d: correct[d] for d in dirs}),))
                table = {"(correct kernel)": row, **dict(run.map(_one_variant, tasks))}
        finally:
            for key in [k for k in _copies if k[0] == scratch]:
                del _copies[key]
    return table


def markdown(table: dict[str, dict[str, int]], cases: int) -> str:
    stds = list(next(iter(table.values())))
    head = "| kernel | kind | " + " | ".join(f"`{s}`" + (" (default)" if s == DEFAULT_STANDARD else "") for s in stds) + " |"
    lines = [head, "|" + "---|" * (len(stds) + 2)]
    for name, row in table.items():
        v = catalogue().get(name)
        kind = "defect" if v and not v.legit else "legitimate"
        cells = []
        for s in stds:
            n = row[s]
            if kind == "defect":
                cells.append(f"caught ({n})" if n else "**missed**")
            else:
                cells.append(f"**false alarm** ({n})" if n else "passes")
        lines.append(f"| {name} | {kind} | " + " | ".join(cells) + " |")
    lines.append(f"\nCells count the failing cases out of {cases} bundled positive cases (those up to "
                 f"{MATRIX_MAX_ELEMENTS:,} elements).")
    return "\n".join(lines)
