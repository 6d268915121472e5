"""The tolerance property (tolerances.py) for a user op: an elementwise op declared outside aclnn-cli
(tests/user_ops/my_hardtanh_backward.py, its functions guarded) gets every accepted edge of every standard
from its case file, in every dtype; sign-flipped and all-zero dumps still FAIL through `--ops` in fresh
processes (the user module never enters this test process's registry).

The user rows op (my_center_backward) is not here: no one case makes both its outputs ordinary (its row
output cancels where its summed output does not), and the property is claimed for ordinary cases only."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

import harness
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.standards.rules import find_standard
from aclnn_cli.standards.tolerances import ORDINARY_MAGNITUDE, ORDINARY_SHARE

from gate_edges import BROKEN, DTYPES, TUNABLE, case_dirs, edge_sets
from clifork import cli_process

USER_OP = Path(__file__).parent / "user_ops" / "my_hardtanh_backward.py"


def cli(*args) -> subprocess.CompletedProcess:
    return cli_process("--ops", str(USER_OP), *map(str, args), timeout=600)


def _break(case: Path, broken: str) -> np.ndarray:
    """Every output's dump as its golden sign-flipped or zeroed (from the manifest's numbers alone); the
    golden, as float64, for the ordinary-magnitude check."""
    m = harness.load(case)
    golden = None
    for t in m["tensors"]:
        if t["role"] == "output":
            g = harness.storage(case, t, "golden")
            (-g if broken == "sign" else np.zeros_like(g)).tofile(case / t["dump"])
            golden = harness.view(g, t).astype(np.float64)
    return golden


@pytest.mark.parametrize("std_name", TUNABLE)
def test_a_user_ops_cases_at_every_accepted_edge_fail_broken_dumps(tmp_path, std_name):
    std = find_standard(std_name)
    lines = ["op: aclnnMyHardtanhBackward", "cases:"]
    for d in DTYPES:
        for i, edge in enumerate(edge_sets(std, D.lookup(d))):
            tol = ", ".join(f"{k}: {v!r}" for k, v in edge.values.items())
            lines.append(f"  - {{name: e{i}-{d}, dtype: {d}, shape: [128], seed: 7, standard: {std_name}, "
                         f"tolerance: {{{tol}}}}}")
    cases = tmp_path / "user.yaml"
    cases.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    done = cli("gen", cases, "-o", out)
    assert done.returncode == 0, done.stderr[-2000:]
    for broken in BROKEN:
        for case in case_dirs(out):
            g = _break(case, broken)
            # (of ordinary magnitude: a quarter nonzero at least, one |g| >= 1/8; hardtanh's window is half of x)
            assert np.mean(g != 0) >= ORDINARY_SHARE and np.abs(g).max() >= ORDINARY_MAGNITUDE, case.name
        done = cli("verify", out, "--json", tmp_path / "v.json")
        assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
        records = json.loads((tmp_path / "v.json").read_text())["cases"]
        assert {c["standard"] for c in records} == {std_name}
        assert {c["status"] for c in records} == {"FAIL"}, [(c["case_id"], c["reason"]) for c in records
                                                             if c["status"] != "FAIL"]
