"""judge/rowrelief.py's `_distinct`: the sorted distinct blocks of flagged elements and each element's place among
them, as np.unique and searchsorted give them, whether the blocks come in order (no sort taken) or not."""

import numpy as np
from hypothesis import given, strategies as st

from aclnn_cli.judge.rowrelief import _distinct

BLOCKS = st.lists(st.integers(0, 50), max_size=200)


@given(BLOCKS, st.booleans())
def test_distinct_is_unique_and_searchsorted(blocks, in_order):
    block_of = np.array(sorted(blocks) if in_order else blocks, dtype=np.int64)
    wanted, among = _distinct(block_of)
    expected = np.unique(block_of)
    assert wanted.dtype == block_of.dtype and np.array_equal(wanted, expected)
    assert np.array_equal(among, np.searchsorted(expected, block_of))
