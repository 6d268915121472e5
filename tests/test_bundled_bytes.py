"""The bundled suite's bytes are unchanged by restructuring (see bundled_digest.py).

This compares the tool with a recorded earlier version of itself: it guards refactors, it does not
show the goldens are right (the oracle tests do).
"""

from bundled_digest import produce, read_reference


def _differences(found: dict, expected: dict) -> list[str]:
    """Recorded cases that are gone or whose bytes changed. Cases the record does not know (an op or
    a case added since) are not differences: the guard is for what existed."""
    missing = sorted(set(expected) - set(found))
    changed = sorted(k for k in set(found) & set(expected) if found[k] != expected[k])
    return [f"missing {k}" for k in missing] + [f"changed {k}" for k in changed]


def test_bundled_suite_bytes_match_the_recorded_digests(tmp_path):
    diffs = _differences(produce(tmp_path / "one", jobs=1), read_reference())
    assert not diffs, f"{len(diffs)} cases differ, first: {diffs[:10]}"


def test_two_workers_write_the_same_bytes(tmp_path):
    diffs = _differences(produce(tmp_path / "two", jobs=2), read_reference())
    assert not diffs, f"{len(diffs)} cases differ, first: {diffs[:10]}"
