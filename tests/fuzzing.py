"""Structured fuzzing of the readers of outside bytes: one hypothesis target per reader.

A target is a function of hypothesis-drawn values only (no pytest fixtures; make temporary files
with `scratch()`), decorated with `@fuzz_target(name=strategy, ...)`. Its only allowed outcomes are a
result or a `UserError` (one line, exit 2 at the CLI): `allowed_outcome` checks the latter.

- In `make test` each target runs SHORT_EXAMPLES examples (a few seconds).
- In `make fuzz` (ACLNN_FUZZ_TOTAL_SECONDS, 600 by default) the time is shared out evenly among the
  collected targets, and each runs round after round of fresh random examples until its share is used.
  `make fuzz FUZZ_SECONDS=3600` runs an hour. A failing example is printed by hypothesis, with the
  seed to replay it (`--hypothesis-seed`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from aclnn_cli.errors import UserError

SHORT_EXAMPLES = int(os.environ.get("ACLNN_FUZZ_EXAMPLES", "40"))
ROUND_EXAMPLES = 200
MAX_LINE = 500  # a one-line error, however hostile the input, stays short (a temporary path included)

budget = {"seconds": 0.0}  # per target; set by conftest.py from ACLNN_FUZZ_TOTAL_SECONDS


def fuzz_target(**strategies):
    """A pytest test (marked `fuzz`) running `fn` under hypothesis: briefly, or for its time budget."""

    def wrap(fn):
        def rounds(examples: int):
            return settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                            suppress_health_check=list(HealthCheck))(given(**strategies)(fn))

        def test() -> None:
            seconds = budget["seconds"]
            if seconds <= 0:
                rounds(SHORT_EXAMPLES)()
                return
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                rounds(ROUND_EXAMPLES)()

        # (no functools.wraps: pytest would follow __wrapped__ and ask for fn's arguments as fixtures)
        test.__name__, test.__qualname__, test.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
        test.__module__ = fn.__module__
        return pytest.mark.fuzz(test)

    return wrap


def allowed_outcome(exc: BaseException) -> None:
    """Assert that an exception a reader raised is the tool's one-line refusal."""
    assert isinstance(exc, UserError), f"{type(exc).__name__}: {exc!s:.500}"
    text = str(exc)
    assert "\n" not in text and len(text) <= MAX_LINE, repr(text[:600])


@contextlib.contextmanager
def scratch():
    """A temporary directory for one example (targets take no fixtures)."""
    path = Path(tempfile.mkdtemp(prefix="aclnn-fuzz-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
