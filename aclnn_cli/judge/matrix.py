"""The defect matrix: every emulated variant x every standard over a suite -> how many cases each fails.

A defect is caught by a standard when at least one case does not pass; a
legitimate variant should be caught by none (a false alarm otherwise).
"""

from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ..casedir import manifest as M

from ..casedir import dirs as casedirs
from ..device.defects import catalogue, find_variant
from ..device.emulate import emulate_case
from ..ops import find_op
from ..standards.rules import DEFAULT_STANDARD, STANDARDS
from .results import PASS
from .verify import Options, verify_case

MATRIX_MAX_ELEMENTS = 200_000  # the large cases add time, not coverage


def matrix_cases(suite: Path, max_elements: int = MATRIX_MAX_ELEMENTS) -> list[tuple[Path, str]]:
    """(directory, op name) of the positive cases of a generated suite small enough for the matrix."""
    out = []
    for d in casedirs.find_cases(suite):
        m = M.load(d)
        if m.expect_status == 0 and m.output.layout.numel <= max_elements:
            out.append((d, m.op.name))
    return out


def _cases_for(name: str | None, cases: list[tuple[Path, str]]) -> list[str]:
    """An op's own variant changes only that op's cases (the others play the correct kernel): only those."""
    variant = find_variant(name) if name else None
    if variant is None or not variant.op_kernel:
        return [str(d) for d, _ in cases]
    return [str(d) for d, op in cases if name in find_op(op).variants]


def _one_variant(args: tuple[str | None, list[str], list[str]]) -> tuple[str, dict[str, int]]:
    name, dirs, standards = args
    variant = find_variant(name) if name else None
    with tempfile.TemporaryDirectory(prefix="aclnn-matrix-") as tmp:
        copies = []
        for d in map(Path, dirs):
            target = Path(tmp) / d.name
            shutil.copytree(d, target)
            copies.append(target)
        manifests = [M.load(d) for d in copies]
        for m in manifests:
            emulate_case(m, variant=variant)
        failing = {}
        for std in standards:
            failing[std] = sum(verify_case(m, Options(standard=std)).status != PASS for m in manifests)
    return name or "(correct kernel)", failing


def defect_matrix(suite: Path, variants: list[str] | None = None, standards: list[str] | None = None,
                  jobs: int = 2) -> dict[str, dict[str, int]]:
    """{variant: {standard: failing cases}}, with the correct emulated kernel as the first row.

    variants: the catalogue's names to run (None: all of them; [] the correct kernel only)."""
    cases = matrix_cases(suite)
    names: list[str | None] = [None, *(list(catalogue()) if variants is None else variants)]
    stds = standards or list(STANDARDS)
    tasks = [(n, _cases_for(n, cases), stds) for n in names]
    if jobs <= 1:
        results = map(_one_variant, tasks)
    else:
        pool = ProcessPoolExecutor(max_workers=jobs)
        results = pool.map(_one_variant, tasks)
    table = dict(results)
    if jobs > 1:
        pool.shutdown()
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
