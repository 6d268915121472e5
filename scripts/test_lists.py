"""Rewrite tests/file-times.txt and tests/slow-tests.txt from a whole run's timeline.

    ACLNN_TEST_TIMELINE=/tmp/timeline.txt make test && python scripts/test_lists.py /tmp/timeline.txt
    ACLNN_TEST_TIMELINE=/tmp/check.txt make check && python scripts/test_lists.py /tmp/timeline.txt /tmp/check.txt

The timeline (tests/conftest.py) has one line per test: worker, start, end, CPU seconds (the worker's and its
reaped children's), node id. file-times.txt orders the files for the workers (the longest first); slow-tests.txt
names the tests make check leaves out: those over SLOW seconds, setup and teardown included, in the whole run; with make check's own timeline also those over SLOW
there (a test that builds what its slow neighbours built first in the whole run: the C++ stub, a session suite).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

SLOW = 0.2
TESTS = Path(__file__).resolve().parent.parent / "tests"


def _seconds(timeline: Path, cpu: bool = False) -> dict[str, float]:
    """Seconds per test: its wall-clock time, or (cpu) the CPU time of its worker and the worker's children."""
    seconds: dict[str, float] = {}
    for line in timeline.read_text().splitlines():
        _, start, end, used, node = line.split(maxsplit=4)
        seconds[node] = seconds.get(node, 0.0) + (float(used) if cpu else float(end) - float(start))
    return seconds


def main(timeline: Path, check: Path | None = None) -> None:
    seconds = _seconds(timeline)
    slow = {n for n, s in seconds.items() if s > SLOW}
    if check is not None:
        previous = [line for line in (TESTS / "slow-tests.txt").read_text().splitlines() if line and line[0] != "#"]
        slow |= set(previous) | {n for n, s in _seconds(check).items() if s > SLOW}
    per_file, cpu_per_file = Counter(), Counter()
    for node, s in seconds.items():
        per_file[node.split("::")[0]] += s
    for node, s in _seconds(timeline, cpu=True).items():
        cpu_per_file[node.split("::")[0]] += s
    (TESTS / "file-times.txt").write_text(
        "# Seconds each test file took in a whole run, and the CPU seconds it used (scripts/test_lists.py): the\n"
        "# workers take the longest first, those that mostly wait interleaved at the start (conftest.py).\n"
        + "".join(f"{s:.0f} {cpu_per_file[name]:.0f} {name}\n" for name, s in per_file.most_common() if s >= 1))
    (TESTS / "slow-tests.txt").write_text(
        f"# Tests `make check` leaves out (make test runs them all): each took over {SLOW} s in a whole run, setup\n"
        "# included (scripts/test_lists.py).\n" + "".join(f"{n}\n" for n in sorted(slow)))


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) == 3 else None)
