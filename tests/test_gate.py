"""Issue 8: a gate with no holes. Correct kernels pass special-value suites; no setting opens the gate;
changed files are reported as changed (exit 2), never as a kernel's FAIL; outputs parse as strict JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.judge.compare import Metrics, apply_rule, element_errors
from aclnn_cli.values.fill import BLOCK, generate, parse_fill
from aclnn_cli.standards.rules import STANDARDS, find_standard

from helpers import manifest, read_storage, run_cli, tensor, write_yaml
import harness
from independent_kernels import run as independent


def _strict(text: str):
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def _suite(tmp_path, text, *gen_args):
    out = tmp_path / "out"
    r = run_cli("gen", write_yaml(tmp_path, text), "-o", out, *gen_args)
    assert r.exit_code == 0, r.output
    return out


INF_GRAD = """
op: aclnnFastGeluBackward
cases:
  - name: inf_grad
    dtype: float16
    shape: [4096]
    seed: 3
    inputs: {gradOutput: {values: [-inf, inf]}, self: {normal: [-77, 12]}}
"""


def test_infinite_gradient_times_underflowing_factor_accepts_the_float32_nan_and_nothing_else(tmp_path):
    """ATK's FastGelu fp16 case: golden is the exact limit (+-inf), every float32 kernel gives NaN (inf * 0)."""
    out = _suite(tmp_path, INF_GRAD)
    case = out / "fast_gelu_backward-inf_grad"
    m = manifest(case)
    gold = read_storage(case, tensor(m, "gradInput"), "golden").astype(np.float64)
    x = read_storage(case, tensor(m, "self")).astype(np.float64)
    assert np.isinf(gold[x < -60]).all()  # the exact limit, not NaN
    # The emulator and an independent float32 kernel both give NaN there, and both pass.
    assert run_cli("emulate", out).exit_code == 0
    dump = read_storage(case, tensor(m, "gradInput"), "dump").astype(np.float64)
    assert np.isnan(dump[x < -60]).sum() > 1000
    r = run_cli("verify", out, "--json", tmp_path / "v.json")
    assert r.exit_code == 0, r.output
    res = _strict((tmp_path / "v.json").read_text())["cases"][0]
    assert res["status"] == "PASS" and res["metrics"]["relieved"] > 1000
    harness.run_case(case, independent)
    assert run_cli("verify", out).exit_code == 0
    # An infinity of the wrong sign, or a finite value, where the golden is an infinity, still fails.
    path = case / tensor(m, "gradInput")["dump"]
    for wrong in (-gold, np.where(np.isinf(gold), 0.0, gold)):
        wrong.astype(np.float16).tofile(path)
        r = run_cli("verify", out)
        assert r.exit_code == 1 and "NaN/Inf mismatches" in r.output, r.output


def test_exact_zero_factor_keeps_its_zero_under_an_infinite_gradient(tmp_path):
    """Hardsigmoid outside (-3, 3) is +0 whatever the gradient: NaN there is a real bug, not an edge."""
    text = ("op: aclnnHardsigmoidBackward\ncases:\n  - {name: out, dtype: float32, shape: [64], "
            "inputs: {gradOutput: {constant: inf}, self: {uniform: [4, 8]}}}\n")
    out = _suite(tmp_path, text)
    assert run_cli("emulate", out).exit_code == 0
    case = out / "hardsigmoid_backward-out"
    np.full(64, np.nan, np.float32).tofile(case / "out.dump.bin")
    assert run_cli("verify", out).exit_code == 1


SMALL = """
op: aclnnSiluBackward
cases:
  - {name: a, dtype: float16, shape: [300], seed: 1}
  - {name: b, dtype: float32, shape: [300], seed: 2}
  - {name: strided, dtype: float32, shape: [8, 8], tensors: {gradInput: {layout: {step: 2}}}}
"""


@pytest.fixture()
def emulated(tmp_path):
    out = _suite(tmp_path, SMALL)
    assert run_cli("emulate", out).exit_code == 0
    return out


def _flip(path, offset=10, count=1):
    data = bytearray(path.read_bytes())
    for i in range(count):
        data[offset + i] ^= 0x5A
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name, what", [("gradInput.golden.bin", "golden"), ("self.bin", "input self"),
                                        ("gradOutput.bin", "input gradOutput")])
def test_a_changed_byte_is_reported_as_changed_never_as_the_kernels_fail(emulated, tmp_path, name, what):
    _flip(emulated / "silu_backward-a" / name, count=4)
    r = run_cli("verify", emulated, "--json", tmp_path / "v.json", "--junit", tmp_path / "v.xml")
    assert r.exit_code == 2
    cases = {c["case_id"]: c for c in _strict((tmp_path / "v.json").read_text())["cases"]}
    bad = cases["silu_backward-a"]
    assert bad["status"] == "ERROR" and f"{what} changed since gen" in bad["reason"], bad["reason"]
    assert cases["silu_backward-b"]["status"] == "PASS" and (tmp_path / "v.xml").exists()


def test_emulate_refuses_changed_inputs_and_writes_no_dump(emulated):
    case = emulated / "silu_backward-a"
    (case / "gradInput.dump.bin").unlink()
    _flip(case / "self.bin")
    r = run_cli("emulate", emulated)
    assert r.exit_code == 2 and "input self changed since gen" in r.output
    assert not (case / "gradInput.dump.bin").exists()
    assert (emulated / "silu_backward-b" / "gradInput.dump.bin").exists()
    assert not [p for p in case.iterdir() if ".tmp-" in p.name]


def test_emulate_refuses_a_changed_initial_output_storage_where_it_reaches_the_dump(emulated):
    """A strided output's storage outside the view is copied into the dump: it must be what gen wrote."""
    case = emulated / "silu_backward-strided"
    (case / "gradInput.dump.bin").unlink()
    _flip(case / "gradInput.bin", offset=4)  # element 1: outside the step-2 view
    r = run_cli("emulate", emulated)
    assert r.exit_code == 2 and "initial output storage changed since gen" in r.output, r.output
    assert not (case / "gradInput.dump.bin").exists()


def test_an_edited_manifest_is_an_error_not_a_layout_verdict(emulated, tmp_path):
    path = emulated / "silu_backward-strided" / "case.json"
    m = json.loads(path.read_text())
    out = tensor(m, "gradInput")
    out["strides"], out["shape"] = [1, 8], [8, 8]  # same storage size, now a different view
    path.write_text(json.dumps(m))
    r = run_cli("verify", emulated, "--json", tmp_path / "v.json")
    assert r.exit_code == 2
    cases = _strict((tmp_path / "v.json").read_text())["cases"]
    statuses = sorted(c["status"] for c in cases)
    assert statuses == ["ERROR", "PASS", "PASS"]
    assert "edited after gen" in next(c["reason"] for c in cases if c["status"] == "ERROR")


@pytest.mark.parametrize("broken", ["not json", '{"schema": "aclnn-cli/case/1", "tensors": "oops"}', "[1, 2]",
                                    '{"schema": "aclnn-cli/case/1", "tensors": [1]}', "NaN"])
def test_a_broken_manifest_costs_only_its_case(emulated, tmp_path, broken):
    (emulated / "silu_backward-b" / "case.json").write_text(broken)
    r = run_cli("verify", emulated, "--json", tmp_path / "v.json")
    assert r.exit_code == 2 and "Traceback" not in r.output
    cases = _strict((tmp_path / "v.json").read_text())["cases"]
    assert sorted(c["status"] for c in cases) == ["ERROR", "PASS", "PASS"]


@pytest.mark.parametrize("make", ["dir", "binary", "empty"])
def test_a_bad_status_file_or_dump_is_that_cases_error(emulated, tmp_path, make):
    case = emulated / "silu_backward-a"
    target = case / ("status.txt" if make != "dir" else "gradInput.dump.bin")
    target.unlink()
    if make == "dir":
        target.mkdir()
    else:
        target.write_bytes(b"\xff\xfe\x00garbage" if make == "binary" else b"")
    r = run_cli("verify", emulated, "--json", tmp_path / "v.json")
    assert r.exit_code == 2
    cases = {c["case_id"]: c for c in _strict((tmp_path / "v.json").read_text())["cases"]}
    assert cases["silu_backward-a"]["status"] == "ERROR" and cases["silu_backward-b"]["status"] == "PASS"


# --- No setting opens the gate ----------------------------------------------------------------------

BAD_VALUES = ["nan", "-nan", "inf", "-inf", "-1", "0", "1e400", "abc"]


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("std, key", [("allclose", "rtol"), ("allclose", "atol"), ("ulp", "ulps"), ("ulp", "share"),
                                      ("mere-mare", "T"), ("msopst", "max_rel"), ("benchmark", "ratio")])
def test_no_invalid_tolerance_from_the_command_line_is_accepted(emulated, std, key, value):
    r = run_cli("verify", emulated, "--standard", std, "--tolerance", f"{key}={value}")
    assert r.exit_code == 2, r.output
    assert key in r.output or "KEY=NUMBER" in r.output


@pytest.mark.parametrize("tol", ["{T: -1}", "{T: .nan}", "{rtol: 2}", "{T: .inf}", "{T: [1]}", "{T: 'x'}"])
def test_no_invalid_tolerance_from_yaml_is_accepted(tmp_path, tol):
    text = f"op: aclnnSiluBackward\ncases:\n  - {{name: a, shape: [4], dtype: float32, tolerance: {tol}}}\n"
    r = run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / "out")
    assert r.exit_code == 2 and "tolerance" in r.output, r.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_sign_slip_never_passes_with_any_cli_tolerance(tmp_path):
    out = _suite(tmp_path, "op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: float32, shape: [512]}\n")
    assert run_cli("emulate", out, "--defect", "sign-slip").exit_code == 0
    for std, key in [("allclose", "rtol"), ("ulp", "ulps"), ("mere-mare", "T"), ("thousandth", "share")]:
        for value in BAD_VALUES:
            assert run_cli("verify", out, "--standard", std, "--tolerance", f"{key}={value}").exit_code != 0


def _broken_metrics(std_name: str, dtype: D.DType, params: dict, broken: str):
    rng = np.random.default_rng(0)
    g = rng.uniform(0.5, 2.0, 4096).astype(dtype.np_dtype)
    a = (-g.astype(np.float64) if broken == "sign" else np.zeros(g.size)).astype(dtype.np_dtype)
    std = find_standard(std_name)
    e = element_errors(a, g, dtype.smallest_normal, dtype, flush_ok=std.flush_ok)
    apply_rule(e, std.rule(params))
    m = Metrics()
    m.add(e, 0, track_small=True)
    return std, m


@settings(max_examples=400, deadline=None)
@given(std_name=st.sampled_from([s for s in STANDARDS if s not in ("benchmark", "bitwise")]),
       dtype=st.sampled_from([D.FLOAT16, D.BFLOAT16, D.FLOAT32]), broken=st.sampled_from(["sign", "zero"]),
       data=st.data())
def test_property_no_accepted_tolerance_passes_a_sign_flipped_or_zero_result(std_name, dtype, broken, data):
    """Every value Standard.params accepts, for any keys of any standard, still fails a sign flip or zeros
    (outputs of ordinary magnitude, 0.5 to 2)."""
    keys = sorted(find_standard(std_name).defaults(dtype))
    edges = [0.0, -0.0, 0.1, 0.5, 1.0, 1 - 2**-53, 2.0, 2.0**22, 1e300, 1e-300]
    chosen = data.draw(st.dictionaries(st.sampled_from(keys), st.floats(allow_nan=True, allow_infinity=True) |
                                       st.sampled_from(edges), max_size=4) if keys else st.just({}))  # (exact: none)
    try:
        params = find_standard(std_name).params(dtype, chosen)
    except ValueError:
        return  # refused: a usage error
    std, m = _broken_metrics(std_name, dtype, params, broken)
    assert not std.judge(m, params, dtype, None).passed, (std_name, dtype.name, broken, params)


# --- Strict JSON, and what a NaN mismatch says ---------------------------------------------------------

def test_json_is_strict_and_a_nan_mismatch_says_what_disagreed(tmp_path):
    text = "op: aclnnSiluBackward\ncases:\n  - {name: n, dtype: float32, shape: [8], inputs: {self: {constant: .nan}}}\n"
    out = _suite(tmp_path, text)
    assert run_cli("emulate", out).exit_code == 0
    np.zeros(8, np.float32).tofile(out / "silu_backward-n" / "gradInput.dump.bin")
    r = run_cli("verify", out, "--json", tmp_path / "v.json", "--junit", tmp_path / "v.xml")
    assert r.exit_code == 1 and "expected NaN, got 0" in r.output
    data = _strict((tmp_path / "v.json").read_text())
    worst = data["cases"][0]["worst"][0]
    assert worst["expected"] == "nan" and worst["actual"] == 0.0 and worst["mismatch"] == "expected NaN, got 0"
    # report reads it back (strings for non-finite numbers) and says the same
    r = run_cli("report", tmp_path / "v.json", "--json", tmp_path / "merged.json")
    assert r.exit_code == 1 and "expected NaN, got 0" in r.output
    assert _strict((tmp_path / "merged.json").read_text())["cases"][0]["worst"][0]["expected"] == "nan"


@pytest.mark.parametrize("mutate", [lambda d: d["cases"][0].update(status="SORT_OF"), lambda d: d.update(cases="x"),
                                    lambda d: d["cases"][0].pop("case_id"), lambda d: d["cases"].append(7)])
def test_report_refuses_malformed_results_in_one_line(emulated, tmp_path, mutate):
    assert run_cli("verify", emulated, "--json", tmp_path / "v.json").exit_code == 0
    data = json.loads((tmp_path / "v.json").read_text())
    mutate(data)
    (tmp_path / "v.json").write_text(json.dumps(data))
    r = run_cli("report", tmp_path / "v.json")
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "aclnn-cli: error:" in r.output, r.output


# --- Paths and sizes checked before any work -----------------------------------------------------------

def test_unwritable_report_paths_fail_before_the_run(emulated, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    for opt in ("--json", "--junit", "--csv-errors"):
        r = run_cli("verify", emulated, opt, blocker / "x")
        assert r.exit_code == 2 and "is a file, not a directory" in r.output and "PASS" not in r.output, r.output
    r = run_cli("verify", emulated, "--json", tmp_path)
    assert r.exit_code == 2 and "is a directory" in r.output


def test_gen_refuses_sizes_beyond_reason_before_creating_anything(tmp_path):
    text = "op: aclnnSiluBackward\ncases:\n  - {name: huge, dtype: float32, shape: [1000000, 1000000]}\n"
    out = tmp_path / "out"
    r = run_cli("gen", write_yaml(tmp_path, text), "-o", out)
    assert r.exit_code == 2 and "TiB" in r.output and "--max-case-bytes" in r.output, r.output
    assert not out.exists()
    small = "op: aclnnSiluBackward\ncases:\n  - {name: s, dtype: float32, shape: [1024], seed: 1}\n"
    r = run_cli("gen", write_yaml(tmp_path, small, "s.yaml"), "-o", out, "--max-bytes", "10KiB")
    assert r.exit_code == 2 and "16.0 KiB" in r.output and not out.exists(), r.output
    assert run_cli("gen", tmp_path / "s.yaml", "-o", out, "--max-bytes", "16KiB").exit_code == 0


def test_gen_into_a_file_is_one_line(tmp_path):
    target = tmp_path / "afile"
    target.write_text("keep me")
    r = run_cli("gen", write_yaml(tmp_path, SMALL), "-o", target)
    assert r.exit_code == 2 and "not a directory" in r.output and target.read_text() == "keep me"


def test_gen_removes_only_the_stale_temporaries_of_dead_processes(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stale = [out / f".silu_backward-a.partial-{dead.pid}", out / f".x.old-{dead.pid}"]
        busy = out / f".silu_backward-b.partial-{live.pid}"
        for d in (*stale, busy):
            d.mkdir()
            (d / "big.bin").write_bytes(b"\0" * 1000)
        assert run_cli("gen", write_yaml(tmp_path, SMALL), "-o", out).exit_code == 0
        assert not any(d.exists() for d in stale) and busy.exists()
    finally:
        live.kill()
        live.wait()


def test_shard_count_far_beyond_the_cases_is_refused_at_once(emulated):
    """More shards than cases: some runner's shard would be empty, so no run of them all can pass (issue 18)."""
    r = run_cli("verify", emulated, "--shard", "1/1000000000")
    assert r.exit_code == 2 and r.output.strip() == (f"aclnn-cli: error: {emulated}: 1000000000 shards for 3 cases: "
                                                     f"some shards would hold no case (use at most 3)"), r.output
    r = run_cli("verify", emulated, "--shard", "5/1000000000")  # an empty shard: verify over no cases is an error
    assert r.exit_code == 2 and r.output.strip() == (f"aclnn-cli: error: {emulated}: shard 5/1000000000 holds no "
                                                     f"case: the suite has 3 cases, so use at most 3 shards"), r.output


# --- The generator's bytes, pinned across a block boundary ---------------------------------------------

def test_random_fills_are_pinned_across_the_65536_element_block_boundary():
    u = generate(parse_fill({"uniform": [-8, 8]}), D.FLOAT32, 42, 1, BLOCK - 3, BLOCK + 3)
    assert u.view(np.uint32).tolist() == [3214100386, 1076688302, 3230623480, 1068247511, 1057145549, 1083753334]
    n = generate(parse_fill({"normal": [0, 1]}), D.BFLOAT16, 42, 0, BLOCK - 3, BLOCK + 3)
    assert n.astype(float).tolist() == [0.28125, -0.486328125, -0.177734375, 0.80078125, 0.12255859375, -1.3671875]
    # The scheme, rebuilt from numpy alone: block b of slot s draws from PCG64(SeedSequence([seed, s, b])).
    first = np.random.Generator(np.random.PCG64(np.random.SeedSequence([42, 1, 1]))).random(1)[0]
    assert u[3] == np.float32(-8 + 16 * first)
    # Any split of the range gives the same bytes.
    parts = [generate(parse_fill({"uniform": [-8, 8]}), D.FLOAT32, 42, 1, a, b)
             for a, b in ((BLOCK - 3, BLOCK - 1), (BLOCK - 1, BLOCK + 1), (BLOCK + 1, BLOCK + 3))]
    assert np.concatenate(parts).tobytes() == u.tobytes()


@pytest.fixture()
def tiny_disk(tmp_path):
    """A 2 MiB tmpfs (root only); skipped with the reason where mounting is not allowed."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {r.stderr.strip() or r.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_disk_that_fills_up_is_one_line_and_leaves_no_partial_case(tiny_disk, tmp_path, monkeypatch):
    text = ("op: aclnnSiluBackward\ncases:\n  - {name: small, dtype: float32, shape: [1000]}\n"
            "  - {name: big, dtype: float32, shape: [300000]}\n")
    cases = write_yaml(tmp_path, text)
    r = run_cli("gen", cases, "-o", tiny_disk / "out", "--jobs", "1")  # predicted: refused before writing
    assert r.exit_code == 2 and "only 2.0 MiB is free" in r.output, r.output
    assert not list((tiny_disk / "out").iterdir())
    # Unpredicted (another process filled the disk meanwhile): the write fails, named, and is cleaned up.
    monkeypatch.setattr("aclnn_cli.golden.gen.check_free_space", lambda root, needed: None)
    r = run_cli("gen", cases, "-o", tiny_disk / "out", "--jobs", "1")
    assert r.exit_code == 2 and "No space left on device" in r.output and "silu_backward-big" in r.output, r.output
    lines = [ln for ln in r.output.splitlines() if not ln.startswith("gen: ")]  # progress lines in a CI log
    assert len(lines) == 1, r.output
    left = sorted(p.name for p in (tiny_disk / "out").iterdir())
    assert left in ([], ["silu_backward-small"]), left  # finished cases stay; no partial one


def test_an_independent_kernel_passes_suites_built_like_ops_nn_atk_and_ttk(tmp_path):
    """The ATK/TTK-shaped files in tests/data (special-value ranges, nd distributions, full-range
    bf16, 0-d and 8-d shapes), through a float32 kernel that shares no code with the tool."""
    from pathlib import Path

    data = Path(__file__).parent / "data"
    out = tmp_path / "out"
    files = [data / "atk_small.json", data / "ttk_kernel_small.csv"]
    assert run_cli("gen", *files, "-o", out).exit_code == 0
    dirs = sorted(p.parent for p in out.glob("*/case.json"))
    positive = [d for d in dirs if manifest(d)["expect_status"] == 0]
    assert len(positive) >= 8
    for d in positive:
        harness.run_case(d, independent)
    r = run_cli("verify", out, "--json", tmp_path / "v.json")
    assert r.exit_code == 0, r.output
    statuses = {c["status"] for c in _strict((tmp_path / "v.json").read_text())["cases"]}
    assert statuses <= {"PASS", "MISTRUSTED"}


@pytest.mark.parametrize("kind", ["random", "standard_normal"])
def test_a_blocks_draws_do_not_depend_on_how_many_are_drawn(kind):
    """fill draws only the prefix of a 65,536-element block that a small tensor needs: same values."""
    full = getattr(np.random.Generator(np.random.PCG64(np.random.SeedSequence([3, 1, 0]))), kind)(BLOCK)
    for k in (1, 2, 7, 100, 4096, BLOCK - 1):
        part = getattr(np.random.Generator(np.random.PCG64(np.random.SeedSequence([3, 1, 0]))), kind)(k)
        assert part.tobytes() == full[:k].tobytes()
