"""Relief of a few flagged elements, batched across chunks.

A correct kernel's errors exceed the default standard's per-element bound only where the result nearly
cancels: a few elements in most chunks of a large case (1,619 of 64M for a float32 SiluBackward).
Re-judging them chunk by chunk cost a quarter of a millisecond of fixed overhead per chunk (their
inputs gathered, the op's float64 terms and edge results computed, for one or two elements): a fifth
of verify. So the flagged elements of a chunk are held: copied out (their errors are all relief needs)
and taken out of the chunk's metrics (their relative and signed errors zeroed, their violation
cleared), then re-judged in one batch when many are held or the range ends, and folded into the
metrics as the chunk would have folded them:

- counts (violations, relieved) and the first violation: exact;
- the largest relative error and its first index: exact (ties go to the lower index, as chunk order
  gives them);
- the worst elements: the same candidates offered;
- sums of relative and signed errors: the same terms, added in another order (float64: they agree to
  its rounding, far below any standard's threshold).

Chunks with NaN/Inf disagreements, many flagged elements (a broken kernel: one batch per chunk is no
worse), or per-element data to report are re-judged at once, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .compare import NO_INDEX, WORST_K, ElementErrors, Metrics
from .sums import magnitude_sum, total64

HOLD_PER_CHUNK = 256  # a chunk with more flagged elements is re-judged at once (0: never hold)
HOLD_LIMIT = 8192  # held elements re-judged in one batch once this many are held


@dataclass
class Held:
    """Flagged elements held for relief: their errors (a subset per chunk) and logical indices."""

    parts: list[ElementErrors] = field(default_factory=list)
    flat: list[np.ndarray] = field(default_factory=list)
    size: int = 0

    def take(self, e: ElementErrors, base: int, at: np.ndarray | None = None) -> bool:
        """Hold e's flagged elements (chunk positions `at`, if e holds a subset); False (nothing held) when
        the chunk is better re-judged at once."""
        if e.special.size or e.violation is None:
            return False
        flagged = e.violation.nonzero()[0]
        if flagged.size > HOLD_PER_CHUNK:
            return False
        self.parts.append(e.subset(flagged))
        self.flat.append(base + (flagged if at is None else at[flagged]))
        self.size += flagged.size
        e.rel[flagged] = 0  # (folded back in by fold(), relieved or not)
        e.signed[flagged] = 0
        e.violation = None  # (every flagged element is held: none is left for Metrics.add to count)
        return True

    @property
    def full(self) -> bool:
        return self.size >= HOLD_LIMIT

    def batch(self) -> tuple[ElementErrors, np.ndarray] | None:
        """(the held elements' errors as one ElementErrors, their logical indices), emptied; None if none."""
        if not self.parts:
            return None
        parts, flat = self.parts, np.concatenate(self.flat)
        self.parts, self.flat, self.size = [], [], 0
        cat = (lambda name: None if getattr(parts[0], name) is None else np.concatenate([getattr(p, name) for p in parts]))
        e = ElementErrors(cat("a"), cat("g"), cat("abs"), cat("rel"), cat("signed"), cat("ulp"), cat("golden_abs"),
                          parts[0].dtype, NO_INDEX, NO_INDEX)
        e.violation = np.ones(flat.size, dtype=bool)
        return e, flat


def fold(metrics: Metrics, e: ElementErrors, flat: np.ndarray, still: np.ndarray) -> None:
    """Fold re-judged held elements into metrics (e: their errors after relief; flat: their logical indices,
    ascending; still: which of them the rule flags after relief). Called once the chunks they came from are
    added: a tie of the largest error then goes to the lower index whichever was added first."""
    metrics._settle()
    metrics.sum_rel += magnitude_sum(e.rel)
    metrics.sum_signed += total64(e.signed)
    metrics.relieved += int(still.size - np.count_nonzero(still))
    hits = int(np.count_nonzero(still))
    if hits:
        metrics.violations += hits
        first = int(flat[int(np.argmax(still))])
        if metrics.first_violation < 0 or first < metrics.first_violation:
            metrics.first_violation = first
    i = int(e.rel.argmax())
    value, at = float(e.rel[i]), int(flat[i])
    if value > metrics.max_rel or (value == metrics.max_rel and 0 <= at < metrics.max_rel_at):
        metrics.max_rel, metrics.max_rel_at = value, at
    floor = metrics.worst[0][0] if len(metrics.worst) >= WORST_K else 0.0
    for k in np.flatnonzero(e.rel >= floor if floor > 0 else e.rel > 0):  # (a tie may go to a held, lower index)
        metrics._push((float(e.rel[k]), int(flat[k])))
