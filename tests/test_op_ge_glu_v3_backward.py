"""aclnnGeGluV3Backward: every test is in tests/test_op_ge_glu_backward.py (the same kernel; its oracle, gate,
ops-nn golden and TTK tests run on V3's cases, activateLeft both ways). Here: its bundled cases against the
same mpmath oracle, so each op file has its own exhaustive test."""

from __future__ import annotations

from rowblocks import generated_yaml
from test_op_ge_glu_backward import assert_goldens_equal_the_oracle

V3_YAML = """\
op: aclnnGeGluV3Backward
defaults: {product: "950", seed: 33, dtype: [float32, bfloat16], attributes: {approximate: [0, 1], activateLeft: true}}
cases:
  - {name: middle, shape: [2, 6, 3], attributes: {dim: 1, approximate: [0, 1], activateLeft: true}}
"""


def test_every_v3_golden_equals_the_oracle_rounded_once(tmp_path_factory):
    assert_goldens_equal_the_oracle(generated_yaml(tmp_path_factory, V3_YAML, "geglu_v3_oracle"), 4)
