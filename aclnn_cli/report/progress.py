"""Progress of long runs: a rich bar on a terminal, plain lines in CI logs."""

from __future__ import annotations

import sys
import time


class Progress:
    """Counts cases (and elements, when known); prints a line per ~10% when not on a terminal."""

    def __init__(self, verb: str, total_cases: int, total_elements: int | None) -> None:
        self.verb, self.total, self.elements_total = verb, total_cases, total_elements
        self.done = self.elements = 0
        self.start = time.monotonic()
        self.tty = sys.stderr is not None and sys.stderr.isatty()
        self._bar = None
        self._next_report = 0

    def __enter__(self) -> "Progress":
        if self.tty and self.total > 1:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn,
                                       TimeRemainingColumn)  # (here: a terminal only; CI logs never load it)

            self._bar = RichProgress(TextColumn(f"{self.verb}"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("{task.fields[rate]}"), TimeRemainingColumn(), transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.verb, total=self.total, rate="")
        return self

    def advance(self, case_id: str, elements: int) -> None:
        self.done += 1
        self.elements += elements
        elapsed = max(time.monotonic() - self.start, 1e-9)
        rate = f"{self.elements / elapsed / 1e6:.1f} M elem/s" if self.elements else ""
        if self._bar is not None:
            self._bar.update(self._task, advance=1, rate=rate)
        elif self.total > 1 and (self.done >= self._next_report or self.done == self.total):
            print(f"{self.verb}: {self.done}/{self.total} cases {rate} ({case_id})", file=sys.stderr, flush=True)
            self._next_report = self.done + max(1, self.total // 10)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
