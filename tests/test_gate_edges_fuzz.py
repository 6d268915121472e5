"""Structured fuzzing of the tolerance readers (issue 18, part 1): a case file's `standard`/`tolerance` and
verify's `--tolerance KEY=VALUE`. Near-valid documents with hostile leaves; the only outcomes allowed
are a one-line refusal, or values that still fail a sign-flipped and an all-zero result."""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import yaml
from hypothesis import strategies as st

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.cases.loader import load_file
from aclnn_cli.judge.compare import Metrics, apply_rule, element_errors
from aclnn_cli.standards.rules import STANDARDS, find_standard

from fuzzing import allowed_outcome, fuzz_target, scratch
from gate_edges import case_dirs, write_broken
from helpers import run_cli, write_yaml

KEYS = sorted({k for s in STANDARDS.values() for d in (D.FLOAT16, D.FLOAT32) for k in s.defaults(d)}
              | {a for s in STANDARDS.values() for a in (s.aliases or {})})
EDGES = [0.0, -0.0, 1e-300, 2.0**-1074, 1 / 32, 0.03125000000000001, 0.1, 0.25, 0.2500000000000001, 0.5,
         0.5000000000000001, 0.75, 0.7499999999999999, 1 - 2**-53, 1.0, 1.0000000000000002, 2.0, 16.0, 17.0,
         128.0, 129.0, 2.0**20, 1e6, 1e6 + 1, 2.0**21, 2.0**22, 2.0**23, 1e300, 10**400, -1]
HOSTILE = st.one_of(st.sampled_from(EDGES), st.floats(allow_nan=True, allow_infinity=True),
                    st.integers(min_value=-(10**30), max_value=10**30), st.booleans(), st.none(),
                    st.text(max_size=30), st.sampled_from(["nan", ".inf", "-inf", "1e-3", "0x10", "1_0", " 0.5 "]),
                    st.lists(st.floats(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))
TOLERANCE = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=12) | st.integers(), HOSTILE, max_size=5)
STANDARD = st.sampled_from([*STANDARDS, None, "MERE-MARE", "ulp ", 5, ["ulp"]])


def _broken_fails(std_name: str, dtype: D.DType, params: dict) -> None:
    """A sign-flipped and an all-zero result on an ordinary case (a quarter informative, |g| >= 1/8, the rest
    zero goldens; an exact benchmark) fail with these accepted parameters."""
    rng = np.random.default_rng(0)
    g = np.zeros(1024)
    g[:256] = rng.uniform(0.125, 2.0, 256) * rng.choice([-1.0, 1.0], 256)
    g = g.astype(dtype.np_dtype)
    std = find_standard(std_name)
    for broken in ("sign", "zero"):
        a = (-g.astype(np.float64) if broken == "sign" else np.zeros(g.size)).astype(dtype.np_dtype)
        m, bench = Metrics(), Metrics()
        e = element_errors(a, g, dtype.smallest_normal, dtype, flush_ok=std.flush_ok)
        apply_rule(e, std.rule(params))
        m.add(e, 0, track_small=True)
        b = element_errors(g, g, dtype.smallest_normal, dtype)
        apply_rule(b, std.rule(params))
        bench.add(b, 0, track_small=True)
        assert not std.judge(m, params, dtype, bench).passed, (std_name, dtype.name, broken, params)


@fuzz_target(standard=STANDARD, tolerance=TOLERANCE, dtype=st.sampled_from(["float16", "bfloat16", "float32"]))
def test_fuzz_case_file_tolerances(standard, tolerance, dtype):
    case = {"name": "c", "dtype": dtype, "shape": [4], "tolerance": tolerance}
    if standard is not None:
        case["standard"] = standard
    with scratch() as d:
        path = d / "cases.yaml"
        try:
            path.write_text(yaml.safe_dump({"op": "aclnnSiluBackward", "cases": [case]}, allow_unicode=True))
        except (yaml.YAMLError, UnicodeEncodeError):
            return  # (not a document a user could write)
        try:
            cases = load_file(path)
        except Exception as exc:  # noqa: BLE001 - the outcome is what is checked
            allowed_outcome(exc)
            return
    for c in cases:
        name = c.standard or "mere-mare"
        dt = D.lookup(dtype)
        _broken_fails(name, dt, find_standard(name).params(dt, dict(c.tolerance)))


@functools.lru_cache(maxsize=1)
def _broken_suite() -> Path:
    """A small fp16 and fp32 case, sign-flipped and zeroed, generated once per process."""
    root = Path(tempfile.mkdtemp(prefix="aclnn-fuzz-gate-"))
    atexit.register(shutil.rmtree, root, True)  # (made once per process: gone when it ends, not left in /tmp)
    text = ("op: aclnnSiluBackward\ncases:\n" + "".join(
        f"  - {{name: {b}-{d}, dtype: {d}, shape: [64], seed: 3}}\n" for b in ("sign", "zero")
        for d in ("float16", "float32")))
    assert run_cli("gen", write_yaml(root, text), "-o", root / "out").exit_code == 0
    for case in case_dirs(root / "out"):
        write_broken(case, case.name.split("-")[1])
    return root / "out"


PAIR_VALUE = st.one_of(st.sampled_from(EDGES).map(repr), st.floats(allow_nan=True).map(repr), st.text(max_size=20))


@fuzz_target(standard=st.sampled_from([*STANDARDS, None]),
             pairs=st.lists(st.tuples(st.sampled_from(KEYS) | st.text(max_size=8), PAIR_VALUE), max_size=4))
def test_fuzz_command_line_tolerances(standard, pairs):
    args = ["--standard", standard] if standard else []
    for k, v in pairs:
        args += ["--tolerance", f"{k}={v}"]
    with scratch() as d:
        r = run_cli("verify", _broken_suite(), "-j", "1", *args, "--json", d / "v.json")
        assert "Traceback" not in r.output
        assert r.exit_code in (1, 2), r.output  # never 0: the dumps are broken
        if r.exit_code == 2:
            lines = [ln for ln in r.output.splitlines() if ln.strip() and not ln.startswith("verify: ")]
            assert lines[-1].startswith(("aclnn-cli: error:", "Error: ")) and len(lines[-1]) < 600, r.output
            return
        statuses = {c["status"] for c in json.loads((d / "v.json").read_text())["cases"]}
        assert statuses == {"FAIL"}, (args, statuses)
