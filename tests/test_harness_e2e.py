"""The device loop end to end with no NPU: gen -> harness -> cmake build against the stub CANN -> run -> verify.

The stub (tests/stub_cann) is a test double for the device: it declares exactly the public CANN
API and computes every bundled op as the device does. What this proves: the generated runner
compiles unchanged against those declarations, drives the API correctly from the manifest's
numbers (views, null tensors, statuses, whole output storage), and the gate catches what a
broken kernel does, a crash and a hang included, each costing only its case. The goldens the
stub's results are judged against come from gen (float64 with certified rounding), not from
the stub: the two were written independently.

Everything is built once per session: the stub, a plain runner and an ASan/UBSan runner.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from aclnn_cli.ops import OPS as REGISTERED

from cann_build import SANITIZE, build_runner, stub_ops, tools_missing
from helpers import run_cli, write_yaml
from shared import cases_of, linked_copy, object_cache, shared_stub_root

pytestmark = pytest.mark.skipif(tools_missing() is not None, reason=f"cannot build C++ here: {tools_missing()}")

SOCS = {"A2": "Ascend910B1", "A3": "Ascend910_9391", "950": "Ascend950PR_9599", "910": "Ascend910A",
        "310P": "Ascend310P3"}


cmake_build = build_runner


@pytest.fixture(scope="session")
def stub_root(tmp_path_factory) -> Path:
    return shared_stub_root(tmp_path_factory)


# The registered ops the stub toolkit implements (a newly added op has no stub kernel: it is reported
# by test_ops_the_stub_does_not_implement_are_reported, not built into the runner).
STUBBED = sorted(name for name in REGISTERED if name in stub_ops())


@pytest.fixture(scope="session")
def harness_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("harness") / "h"
    result = run_cli("harness", "-o", out, *(a for name in STUBBED for a in ("--op", name)))
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="session")
def runner(harness_dir, stub_root, tmp_path_factory) -> Path:
    return cmake_build(harness_dir, tmp_path_factory.mktemp("build"), stub_root, cache=object_cache(tmp_path_factory))


@pytest.fixture(scope="session")
def asan_runner(harness_dir, stub_root, tmp_path_factory) -> Path:
    return cmake_build(harness_dir, tmp_path_factory.mktemp("build-asan"), stub_root, SANITIZE,
                       cache=object_cache(tmp_path_factory))


@pytest.fixture(scope="session")
def bundled(tmp_path_factory, bundled_gen) -> Path:
    """The bundled cases of every op the stub implements, from conftest.py's bundled_gen (generated once per
    session; read only: tests run on a fresh_copy). Complex cases are left out: the stub does not compute the AI
    CPU's complex path (its SigmoidBackward refuses COMPLEX64/128 with 161002: tests/stub_cann/README.md)."""
    def real(n: str) -> bool:
        return not any("complex" in t["dtype"] for t in json.loads((bundled_gen / n / "case.json").read_text())["tensors"])

    names = [n for n in cases_of(bundled_gen, [f"{REGISTERED[name].key}.yaml" for name in STUBBED]) if real(n)]
    if len(names) == len(list(bundled_gen.glob("*/case.json"))):
        return bundled_gen
    return linked_copy(bundled_gen, tmp_path_factory.mktemp("bundled") / "out", cases=names)


def test_ops_the_stub_does_not_implement_are_reported():
    """An op added with its own module and case file needs no test edit: without a stub kernel (C++ in
    tests/stub_cann) it is left out of the runner tests, and named here as a skip."""
    assert len(STUBBED) >= 10
    missing = sorted(set(REGISTERED) - set(STUBBED))
    if missing:
        pytest.skip(f"the stub CANN toolkit does not implement {', '.join(missing)}: not run through the C++ runner")


def fresh_copy(src: Path, dst: Path) -> Path:
    return linked_copy(src, dst)  # (run writes new dumps and statuses; what gen wrote is linked, not copied)


def run_every_product(out: Path, runner: Path, monkeypatch, extra_env: dict | None = None) -> list[str]:
    outputs = []
    for product, soc in SOCS.items():
        monkeypatch.setenv("ACLNN_STUB_SOC", soc)
        for key, value in (extra_env or {}).items():
            monkeypatch.setenv(key, value)
        result = run_cli("run", out, "--runner", runner)
        assert result.exit_code == 0, result.output
        assert f"on {soc} ({product})" in result.output
        outputs.append(result.output)
    return outputs


def verify_json(out: Path, *args: str) -> tuple[int, dict]:
    result = run_cli("verify", out, "--json", out / "verify.json", *args)
    return result.exit_code, json.loads((out / "verify.json").read_text())


def test_the_bundled_suite_through_the_sanitized_runner_on_every_product(bundled, bundled_produced, asan_runner,
                                                                         tmp_path, monkeypatch):
    """Every bundled case the stub implements, through the runner built with -fsanitize=address,undefined (the same
    source as the plain runner, which the small suites below drive): every case run on its product, every one
    PASS, the negative cases returning their statuses, no sanitizer report (a report is a non-zero exit, and run
    then exits 1), the device set up once per runner process.

    A case whose run wrote byte for byte what the emulated kernel wrote (conftest.py's bundled_produced: the same
    generated files) has the emulated case's verdict, verify being a function of a case's files: that verdict is
    read from bundled_produced's verify JSON, and verify judges the cases where the stub wrote something else."""
    out = fresh_copy(bundled, tmp_path / "out")
    log = tmp_path / "stub.log"
    monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:exitcode=23")
    monkeypatch.setenv("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    outputs = run_every_product(out, asan_runner, monkeypatch, {"ACLNN_STUB_LOG": str(log)})
    ran = sum(int(o.split("ran ", 1)[1].split()[0]) for o in outputs)
    names = sorted(p.parent.name for p in out.glob("*/case.json"))
    assert ran == len(names)
    emulated = {c["case_id"]: c for c in json.loads((bundled_produced / "verify.json").read_text())["cases"]}
    differing = [n for n in names if not _wrote_the_same(out / n, bundled / n, bundled_produced / n)]
    code, data = verify_json(linked_copy(out, tmp_path / "differing", cases=differing, dumps=True))
    judged = {c["case_id"]: c for c in data["cases"]}
    cases = [judged[n] if n in judged else emulated[n] for n in names]
    assert code == 0 and sorted(judged) == differing and len(differing) < len(names)
    assert Counter(c["status"] for c in cases) == {"PASS": len(names)}
    kinds = Counter(c["kind"] for c in cases)
    assert kinds["contract"] > 90 and kinds["precision"] > 280  # every negative case returned its status
    # the device is set up once per runner process (one runner per product here), not once per case
    calls = Counter(line.split()[0] for line in log.read_text().splitlines())
    assert calls["aclInit"] == calls["aclrtSetDevice"] == calls["aclFinalize"] == len(SOCS)


def _wrote_the_same(case: Path, generated: Path, emulated: Path) -> bool:
    """Whether every file the run wrote in `case` (those gen did not: the dumps, the status) holds the bytes the
    emulated kernel wrote in `emulated`."""
    written = [f.name for f in case.iterdir() if not (generated / f.name).exists()]
    assert written, case
    return all((emulated / n).is_file() and (emulated / n).read_bytes() == (case / n).read_bytes() for n in written)


DEFECT_SUITE = """
op: {op}
defaults: {{dtype: [float32, float16], seed: 9}}
cases:
  - name: plain
    shape: [[64], [3, 7]]
  - name: strided_out          # output every 2nd element of a longer storage: room to write outside the view
    shape: [5, 6]
    tensors: {{{out}: {{layout: {{step: 2}}}}}}
"""
OPS = {"aclnnSiluBackward": "gradInput", "aclnnFastGeluBackward": "gradInput",
       "aclnnLogSigmoidBackward": "gradInput", "aclnnHardsigmoidBackward": "out"}


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("small")
    files = [write_yaml(root, DEFECT_SUITE.format(op=op, out=out), f"{op}.yaml") for op, out in OPS.items()]
    out = root / "out"
    assert run_cli("gen", *files, "-o", out).exit_code == 0
    return out


def run_with(out: Path, runner: Path, monkeypatch, *args: str, **env: str):
    monkeypatch.setenv("ACLNN_STUB_SOC", SOCS["A2"])
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return run_cli("run", out, "--runner", runner, *args)


def statuses(data: dict) -> dict[str, str]:
    return {c["case_id"]: c["status"] for c in data["cases"]}


def test_the_correct_stub_passes_the_small_suite(small, runner, tmp_path, monkeypatch):
    out = fresh_copy(small, tmp_path / "out")
    assert run_with(out, runner, monkeypatch).exit_code == 0
    code, data = verify_json(out)
    assert code == 0 and set(statuses(data).values()) == {"PASS"} and len(data["cases"]) == 24


def test_wrong_values_fail_every_case(small, runner, tmp_path, monkeypatch):
    out = fresh_copy(small, tmp_path / "out")
    assert run_with(out, runner, monkeypatch, ACLNN_STUB_DEFECT="wrong-values").exit_code == 0
    code, data = verify_json(out)
    assert code == 1 and set(statuses(data).values()) == {"FAIL"}


INTEGER_SUITE = """
op: aclnnThresholdBackward
defaults: {seed: 3}
cases:
  - name: ints                 # ReluGrad (0) and ThresholdGradV2D (2.5) on the 950 and the A2
    shape: [[5, 7], [64]]
    dtype: [int32, int8, uint8]
    product: ["950", A2]
    attributes: {threshold: [0.0, 2.5]}
  - name: wide                 # int32's whole range for self, broadcast gradOutput, a strided output
    shape: [6, 8]
    dtype: int32
    product: A2
    tensors: {gradOutput: {shape: [1, 8]}, out: {layout: {step: 2}}}
    inputs: {self: {randint: [-2147483648, 2147483647]}, gradOutput: {randint: [-16777216, 16777216]}}
    attributes: {threshold: [0.0, -2.5]}
  - name: int64                # the 950's INT64 at threshold 0, past float64's 2^53
    shape: [6]
    dtype: int64
    product: "950"
    inputs:
      self: {values: [-9223372036854775808, 9223372036854775807, 0, 1, 9007199254740993, -1]}
      gradOutput: {values: [1, -9223372036854775808, 5, 9007199254740993, -9007199254740993, 3]}
  - name: int64_threshold      # ... and nowhere else: 161002
    shape: [4]
    dtype: int64
    product: "950"
    attributes: {threshold: 0.5}
    expect_status: ACLNN_ERR_PARAM_INVALID
"""


def test_integer_tensors_through_the_runner(runner, tmp_path, monkeypatch):
    """The runner passes integer tensors both ways (int8, uint8, int32, int64; views, broadcast, a strided output)
    and the stub's integer kernel computes them as the device does: every case PASSes, exactly; the wrong-values
    defect fails every precision case."""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, INTEGER_SUITE), "-o", out).exit_code == 0
    for product in ("950", "A2"):
        monkeypatch.setenv("ACLNN_STUB_SOC", SOCS[product])
        assert run_cli("run", out, "--runner", runner).exit_code == 0
    code, data = verify_json(out)
    assert code == 0 and set(statuses(data).values()) == {"PASS"} and len(data["cases"]) == 28
    assert {c["standard"] for c in data["cases"] if c["kind"] == "precision"} == {"exact"}
    for product in ("950", "A2"):
        monkeypatch.setenv("ACLNN_STUB_SOC", SOCS[product])
        monkeypatch.setenv("ACLNN_STUB_DEFECT", "wrong-values")
        assert run_cli("run", out, "--runner", runner).exit_code == 0
    code, data = verify_json(out)
    assert code == 1 and {c["status"] for c in data["cases"] if c["kind"] == "precision"} == {"FAIL"}


def test_a_write_outside_the_view_is_caught(small, runner, tmp_path, monkeypatch):
    out = fresh_copy(small, tmp_path / "out")
    assert run_with(out, runner, monkeypatch, ACLNN_STUB_DEFECT="write-outside").exit_code == 0
    code, data = verify_json(out)
    got = statuses(data)
    assert code == 1
    assert {s for c, s in got.items() if "strided_out" in c} == {"LAYOUT"}
    assert "PASS" not in got.values()


def test_only_the_defective_op_is_caught(small, runner, tmp_path, monkeypatch):
    out = fresh_copy(small, tmp_path / "out")
    assert run_with(out, runner, monkeypatch, ACLNN_STUB_DEFECT="wrong-values",
                    ACLNN_STUB_DEFECT_OP="aclnnLogSigmoidBackward").exit_code == 0
    code, data = verify_json(out)
    assert code == 1
    assert all((s == "FAIL") == c.startswith("log_sigmoid") for c, s in statuses(data).items())


@pytest.mark.parametrize("defect, verdict", [("crash", "CRASH"), ("hang", "TIMEOUT"), ("sync-error", "CRASH")])
def test_a_crash_or_hang_costs_only_its_case(small, runner, tmp_path, monkeypatch, defect, verdict):
    out = fresh_copy(small, tmp_path / "out")
    # 21 elements: only the [3, 7] cases; restricted to one op and dtype by --case below and the op switch
    result = run_with(out, runner, monkeypatch, "--timeout", "1", ACLNN_STUB_DEFECT=defect,
                      ACLNN_STUB_DEFECT_OP="aclnnSiluBackward", ACLNN_STUB_DEFECT_NUMEL="21")
    victims = sorted(p.name for p in out.glob("silu_backward-plain-*3x7*"))
    assert result.exit_code == 1, result.output
    for victim in victims:
        assert f"{verdict:8} {victim}" in result.output
    assert "runner processes" in result.output
    code, data = verify_json(out)
    got = statuses(data)
    assert code == 1 and victims and all(got[v] == verdict for v in victims)
    assert all(s == "PASS" for c, s in got.items() if c not in victims)
    crash = next(c for c in data["cases"] if c["case_id"] == victims[0])
    expected = {"crash": "SIGSEGV", "hang": "no answer within 1 s",
                "sync-error": "the device call failed: aclrtSynchronizeStream returned 507015 (aclrtSynchronizeStream: "
                              "aicore exception)"}
    assert expected[defect] in crash["reason"]


def test_cmake_links_the_split_opapi_and_follows_the_environment(harness_dir, stub_root, tmp_path, monkeypatch):
    """A CANN 8.5 layout (opapi_nn + opapi_math, no opapi), found through ASCEND_HOME_PATH (set_env.sh)."""
    root = tmp_path / "cann85"
    shutil.copytree(stub_root, root, symlinks=True)
    lib = root / "lib64"
    for name in ("libopapi_nn.so", "libopapi_math.so"):
        shutil.copyfile(lib / "libopapi.so", lib / name)
    (lib / "libopapi.so").unlink()
    monkeypatch.setenv("ASCEND_HOME_PATH", str(root))
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", "/nonexistent")
    build = tmp_path / "build"
    done = subprocess.run(["cmake", "-S", str(harness_dir), "-B", str(build)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"CANN toolkit: {root}" in done.stdout
    cache = (build / "CMakeCache.txt").read_text()
    assert f"OPAPI_NN_LIB:FILEPATH={lib}/libopapi_nn.so" in cache
    assert f"OPAPI_MATH_LIB:FILEPATH={lib}/libopapi_math.so" in cache
    # re-configuring against another toolkit takes that toolkit's libraries, not the cached ones
    done = subprocess.run(["cmake", "-S", str(harness_dir), "-B", str(build), f"-DASCEND_PATH={stub_root}"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    cache = (build / "CMakeCache.txt").read_text()
    assert f"ASCENDCL_LIB:FILEPATH={stub_root}/lib64/libascendcl.so" in cache
    assert f"OPAPI_LIB:FILEPATH={stub_root}/lib64/libopapi.so" in cache and "OPAPI_NN_LIB-NOTFOUND" in cache


def test_cmake_says_where_it_looked_without_a_toolkit(harness_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path / "nowhere"))
    done = subprocess.run(["cmake", "-S", str(harness_dir), "-B", str(tmp_path / "b")], capture_output=True, text=True)
    said = " ".join(done.stderr.split())  # cmake wraps its messages
    assert done.returncode != 0 and f"no CANN toolkit at ASCEND_PATH={tmp_path / 'nowhere'}" in said
