"""The stub CANN toolkit (tests/stub_cann): a test double for an Ascend NPU, checked by known answers.

The toolkit is built once per session; tests/stub_cann/selftest/selftest.cpp is compiled
against it the way a harness is and run per scenario (its checks print FAIL lines).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from shared import shared_stub_root
from cann_build import STUB_DIR, build_stub, compile_program, tools_missing

SELFTEST = STUB_DIR / "selftest"
SELFTEST_SOURCES = [SELFTEST / "selftest.cpp", SELFTEST / "selftest_next.cpp"]
NEXT_HEADERS = ("swish_backward", "softplus_backward", "hardswish_backward", "leaky_relu_backward",
                "sigmoid_backward", "gelu_backward_v2")
REDUCTION_HEADERS = ("softmax_backward", "logsoftmax_backward", "mse_loss_backward", "nll_loss_backward",
                     "l1_loss_backward", "soft_margin_loss_backward", "binary_cross_entropy_backward",
                     "smooth_l1_loss_backward", "binary_cross_entropy_with_logits_backward",
                     "rms_norm_grad", "layer_norm_backward", "layer_norm_grad",
                     "batch_norm_backward", "embedding_dense_backward")  # their kernels: test_stub_reductions.py
SPLIT_HEADERS = ("swi_glu_grad", "geglu_backward")  # test_stub_swi_glu_grad.py, test_stub_ge_glu_backward.py
GROUP_HEADERS = ("group_norm_backward",)  # its kernel: test_stub_group_norm_backward.py
ACTIVATION_HEADERS = ("elu_backward", "hardtanh_backward", "softshrink_backward", "threshold_backward",
                      "gelu_backward", "selu_backward", "mish_backward", "logit_grad")  # their kernels: the bundled cases through the runner (test_harness_e2e.py)
# their kernels: the bundled cases through the runner (test_harness_e2e.py)
POOL_HEADERS = ("avgpool2d_backward", "avgpool3d_backward", "max_pool2d_with_indices_backward",
                "max_pool3d_with_argmax_backward", "adaptive_avg_pool2d_backward", "adaptive_avg_pool3d_backward")
MATMUL_HEADERS = ("matmul", "batch_matmul")  # their kernels: the bundled cases through the runner (test_harness_e2e.py)
CONV_HEADERS = ("convolution_backward",)  # its kernel: the bundled cases through the runner (test_harness_e2e.py)
GENERATED_HEADERS = ("softmax_grad_ext", "l2_normalize_grad", "instance_norm_grad", "mish_grad")  # (an OpDef's generated API) its kernel: the bundled cases (test_harness_e2e.py)
# their kernels: test_stub_<op>.py, and the bundled cases (test_harness_e2e.py)
CHANNEL_HEADERS = ("prelu_backward", "batch_norm_backward_reduce", "batch_norm_elemt_backward")
LOSS_HEADERS = ("kl_div_backward",)  # its kernel: the bundled cases through the runner (test_harness_e2e.py)

pytestmark = pytest.mark.skipif(tools_missing() is not None, reason=f"stub CANN toolkit: {tools_missing()}")


@pytest.fixture(scope="session")
def stub_root(tmp_path_factory) -> Path:
    return shared_stub_root(tmp_path_factory)


@pytest.fixture(scope="session")
def selftest(stub_root, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("selftest") / "selftest"
    return compile_program(stub_root, SELFTEST_SOURCES, out, extra=["-Wall", "-Wextra", "-Werror"])


def stub_env(**env: str) -> dict[str, str]:
    """The environment minus any ACLNN_STUB_* of the caller's, plus `env`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ACLNN_STUB_")}
    return {**base, **env}


def run(program: Path, *args: str, timeout: float = 30, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(program), *args], env=stub_env(**env), capture_output=True, text=True, timeout=timeout)


def assert_passes(p: subprocess.CompletedProcess) -> None:
    assert p.returncode == 0 and "ok: 0 failure(s)" in p.stdout, p.stdout + p.stderr


def test_installed_layout(stub_root):
    for rel in ("include/acl/acl.h", "include/acl/acl_base.h", "include/acl/acl_rt.h", "include/acl/acl_base_rt.h",
                "include/aclnn/acl_meta.h", "include/aclnn/aclnn_base.h", "include/aclnn/opdev/op_errno.h",
                "include/aclnnop/aclnn_util.h", "include/aclnnop/aclnn_silu_backward.h",
                "include/aclnnop/aclnn_fast_gelu_backward.h", "include/aclnnop/aclnn_logsigmoid_backward.h",
                "include/aclnnop/aclnn_hardsigmoid_backward.h", "lib64/libascendcl.so", "lib64/libnnopbase.so",
                "lib64/libopapi.so",
                *(f"include/aclnnop/aclnn_{h}.h" for h in NEXT_HEADERS + REDUCTION_HEADERS + SPLIT_HEADERS + GROUP_HEADERS
                  + ACTIVATION_HEADERS + POOL_HEADERS + MATMUL_HEADERS + CONV_HEADERS + CHANNEL_HEADERS
                  + LOSS_HEADERS + GENERATED_HEADERS)):
        assert (stub_root / rel).is_file(), rel
    assert not (stub_root / "lib64" / "libopapi_nn.so").exists()  # only the old single opapi


def test_rebuild_is_cached(stub_root):
    before = (stub_root / "lib64" / "libopapi.so").stat().st_mtime_ns
    assert build_stub(stub_root.parent) == stub_root
    assert (stub_root / "lib64" / "libopapi.so").stat().st_mtime_ns == before


def test_headers_compile_alone_with_warnings_as_errors(stub_root, tmp_path):
    """Each public header compiles on its own (-Wall -Wextra -Werror -pedantic), as a harness includes it."""
    include = stub_root / "include"
    units = []
    for i, h in enumerate(sorted(include.rglob("*.h"))):
        unit = tmp_path / f"unit{i}.cpp"  # one translation unit per header
        unit.write_text(f'#include "{h.relative_to(include)}"\nint main() {{ return 0; }}\n')
        units.append(str(unit))
    p = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-pedantic",
                        f"-I{include}", f"-I{include / 'aclnn'}", *units], capture_output=True, text=True)
    assert len(units) == 63 and p.returncode == 0, p.stderr


def test_conversions(tmp_path):
    """float16/bfloat16 rounding of every 16-bit value, tie and near-tie (unit test of src/stub.h)."""
    out = tmp_path / "convert_test"
    cmd = ["g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{STUB_DIR / 'src'}",
           f"-I{STUB_DIR / 'include'}", f"-I{STUB_DIR / 'include' / 'aclnn'}", str(SELFTEST / "convert_test.cpp"),
           "-o", str(out)]
    subprocess.run(cmd, check=True)
    assert_passes(run(out))


@pytest.mark.parametrize("scenario", ["values", "strided", "runtime"])
def test_selftest(selftest, scenario):
    assert_passes(run(selftest, scenario))


def test_broadcast_and_mixed_precision_on_950(selftest):
    assert_passes(run(selftest, "broadcast", ACLNN_STUB_SOC="Ascend950PR_9599"))


@pytest.mark.parametrize("soc", ["Ascend910B1", "Ascend910B4-1", "Ascend910_9391", "Ascend950DT_95A1", "Ascend910A",
                                 "Ascend910ProB", "Ascend310P3"])
def test_phase_one_statuses(selftest, soc):
    """Statuses of valid and rejected calls; the selftest expects per the product of the SoC."""
    p = run(selftest, "status", ACLNN_STUB_SOC=soc)
    assert_passes(p)


SOCS = {"A2": "Ascend910B1", "A3": "Ascend910_9391", "950": "Ascend950PR_9599", "910": "Ascend910A"}


def test_phase_one_agrees_with_the_python_contract(stub_root, tmp_path):
    """The stub's phase one (C++, from the docs) and aclnn_cli.ops.contract (Python, from the docs): same
    status for every dtype combination and for every combination of a few shapes, per product."""
    from aclnn_cli.tensor.dtypes import lookup as dtype
    from aclnn_cli.ops import contract as C
    from aclnn_cli.ops.registry import lookup as op_lookup

    probe = compile_program(stub_root, [SELFTEST / "probe.cpp"], tmp_path / "probe")
    keys = {"aclnnSiluBackward": "silu", "aclnnFastGeluBackward": "fast_gelu",
            "aclnnLogSigmoidBackward": "log_sigmoid", "aclnnHardsigmoidBackward": "hardsigmoid"}
    dtypes = ["float32", "float16", "bfloat16", "float64"]
    shapes = [(2, 3), (2, 1), (3,), (), (1,) * 8 + (2,), (0, 3), (2, 4), (4, 2, 3)]
    for api, key in keys.items():
        op = op_lookup(api)
        n = len(op.tensors)
        calls = [[(d, (2, 3), False) for d in ds] for ds in itertools.product(dtypes, repeat=n)]
        calls += [[(d, s, False) for s in ss] for ss in itertools.product(shapes, repeat=n) for d in dtypes[:2]]
        calls += [[("float32", (2, 3), j == i) for j in range(n)] for i in range(n)]
        text = "".join(key + "".join(" null" if null else f" {d}:{'x'.join(map(str, s))}" for d, s, null in call) + "\n"
                       for call in calls)
        for product, soc in SOCS.items():
            p = subprocess.run([str(probe)], input=text, env=stub_env(ACLNN_STUB_SOC=soc), capture_output=True,
                               text=True, timeout=60)
            got = [int(v) for v in p.stdout.split()]
            assert p.returncode == 0 and len(got) == len(calls), p.stdout + p.stderr
            for call, status in zip(calls, got):
                if product in op.products:
                    descs = {t.name: C.TensorDesc(dtype(d), s, null) for t, (d, s, null) in zip(op.tensors, call)}
                    want = C.check(op, product, descs).status
                else:  # a product the op's doc does not list: no dtype is supported
                    want = C.NULLPTR if any(null for _, _, null in call) else C.INVALID
                assert status == want, f"{api} on {product}: {call}"


def test_lifecycle_is_logged_once_per_process(selftest, tmp_path):
    log = tmp_path / "calls.log"
    proc = subprocess.Popen([str(selftest), "lifecycle"], env=stub_env(ACLNN_STUB_LOG=str(log)),
                            stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert log.read_text().splitlines() == [f"{call} pid={proc.pid}" for call in
                                            ("aclInit", "aclrtSetDevice", "aclrtResetDevice", "aclFinalize")]


def outputs(p: subprocess.CompletedProcess) -> dict[str, tuple[int, list[float]]]:
    """A defect scenario's lines `<name> status=<status> <element>...` ("%a"): name -> (status, storage)."""
    out = {}
    for line in p.stdout.splitlines():
        name, status, *values = line.split()
        out[name] = (int(status.removeprefix("status=")), [float.fromhex(v) for v in values])
    return out


def storages(p: subprocess.CompletedProcess) -> dict[str, list[float]]:
    """The `defect` scenario's output: call4/call3 -> the 6-element output storage (status 0)."""
    out = outputs(p)
    assert all(status == 0 for status, _ in out.values()), p.stdout
    return {name: values for name, (_, values) in out.items()}


@pytest.fixture(scope="module")
def clean(selftest):
    p = run(selftest, "defect")
    assert p.returncode == 0, p.stdout + p.stderr
    s = storages(p)
    assert s["call4"][4:] == [7.0, 7.0] and s["call3"][3:] == [7.0] * 3  # outside the views: untouched
    return s


def test_defect_wrong_values(selftest, clean):
    s = storages(run(selftest, "defect", ACLNN_STUB_DEFECT="wrong-values"))
    assert s["call4"][:4] == [-v for v in clean["call4"][:4]]
    assert s["call4"][4:] == clean["call4"][4:]


def test_defect_write_outside_only_where_numel_matches(selftest, clean):
    s = storages(run(selftest, "defect", ACLNN_STUB_DEFECT="write-outside", ACLNN_STUB_DEFECT_NUMEL="3"))
    assert s["call4"] == clean["call4"]  # 4 elements: not this call
    assert s["call3"][:3] == clean["call3"][:3]  # the view is right ...
    assert s["call3"][3] != 7.0 and s["call3"][4:] == [7.0, 7.0]  # ... and the element after it is overwritten


def test_defect_restricted_to_another_op_does_nothing(selftest, clean):
    s = storages(run(selftest, "defect", ACLNN_STUB_DEFECT="wrong-values", ACLNN_STUB_DEFECT_OP="aclnnFastGeluBackward"))
    assert s == clean


def test_defect_crash_is_a_segfault_in_that_call(selftest, clean):
    p = run(selftest, "defect", ACLNN_STUB_DEFECT="crash", ACLNN_STUB_DEFECT_OP="aclnnSiluBackward",
            ACLNN_STUB_DEFECT_NUMEL="3")
    assert p.returncode == -signal.SIGSEGV
    assert p.stdout.splitlines()[0].startswith("call4 status=0")  # the first call ran, the second crashed
    assert len(p.stdout.splitlines()) == 1


def test_defect_hang(selftest):
    with pytest.raises(subprocess.TimeoutExpired):
        run(selftest, "defect", timeout=1.0, ACLNN_STUB_DEFECT="hang")


def test_unknown_defect_fails_acl_init(selftest):
    p = run(selftest, "defect", ACLNN_STUB_DEFECT="wrong-value")
    assert p.returncode != 0 and "ACLNN_STUB_DEFECT=wrong-value" in p.stdout + p.stderr


@pytest.mark.parametrize("scenario", ["next-values", "next-views"])
def test_next_ops_known_answers(selftest, scenario):
    """Swish, Softplus, Hardswish, LeakyRelu, Sigmoid, GeluV2: hand-derived values, specials, scalars of
    several dtypes, DOUBLE, double rounding through a 16-bit compute dtype, broadcast, strided views."""
    assert_passes(run(selftest, scenario))


@pytest.mark.parametrize("soc", ["Ascend910B1", "Ascend910_9391", "Ascend950DT_95A1", "Ascend910A", "Ascend310P3",
                                 "Ascend310B1"])
def test_next_ops_phase_one_statuses(selftest, soc):
    assert_passes(run(selftest, "next-status", ACLNN_STUB_SOC=soc))


NEXT_APIS = ["aclnnSwishBackward", "aclnnSoftplusBackward", "aclnnHardswishBackward", "aclnnLeakyReluBackward",
             "aclnnSigmoidBackward", "aclnnGeluBackwardV2"]


@pytest.fixture(scope="module")
def next_clean(selftest):
    p = run(selftest, "next-defect")
    assert p.returncode == 0, p.stdout + p.stderr
    s = outputs(p)
    assert list(s) == NEXT_APIS
    for status, values in s.values():
        assert status == 0 and all(v != 0 for v in values[:4]) and values[4:] == [7.0, 7.0]
    return s


def test_next_ops_defect_wrong_values(selftest, next_clean):
    s = outputs(run(selftest, "next-defect", ACLNN_STUB_DEFECT="wrong-values"))
    for api in NEXT_APIS:
        assert s[api][1] == [-v for v in next_clean[api][1][:4]] + [7.0, 7.0], api


def test_next_ops_defect_restricted_to_one_op(selftest, next_clean):
    s = outputs(run(selftest, "next-defect", ACLNN_STUB_DEFECT="write-outside",
                    ACLNN_STUB_DEFECT_OP="aclnnLeakyReluBackward"))
    for api in NEXT_APIS:
        if api == "aclnnLeakyReluBackward":
            assert s[api][1][:4] == next_clean[api][1][:4] and s[api][1][4] != 7.0 and s[api][1][5] == 7.0
        else:
            assert s[api] == next_clean[api], api


def test_next_ops_defect_crash_and_sync_error(selftest, next_clean):
    p = run(selftest, "next-defect", ACLNN_STUB_DEFECT="crash", ACLNN_STUB_DEFECT_OP="aclnnSigmoidBackward")
    assert p.returncode == -signal.SIGSEGV
    assert [line.split()[0] for line in p.stdout.splitlines()] == NEXT_APIS[:4]  # died in the fifth
    s = outputs(run(selftest, "next-defect", ACLNN_STUB_DEFECT="sync-error",
                    ACLNN_STUB_DEFECT_OP="aclnnSoftplusBackward"))
    assert [s[api][0] for api in NEXT_APIS] == [0] + [507015] * 5  # the stream stays faulted


@pytest.mark.slow
def test_sanitized_build_is_clean(tmp_path_factory):
    """The stub and the selftest under -fsanitize=address,undefined: no reports, leaks included."""
    root = shared_stub_root(tmp_path_factory, sanitize=True)
    exe = compile_program(root, SELFTEST_SOURCES, tmp_path_factory.mktemp("asan") / "selftest", sanitize=True,
                          extra=["-O0"])
    env = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}
    for scenario, extra in [("values", {}), ("strided", {}), ("runtime", {}), ("status", {}),
                            ("broadcast", {"ACLNN_STUB_SOC": "Ascend950PR_9599"}),
                            ("defect", {"ACLNN_STUB_DEFECT": "write-outside"}), ("next-values", {}), ("next-views", {}),
                            ("next-status", {"ACLNN_STUB_SOC": "Ascend910A"}), ("next-status", {}),
                            ("next-defect", {"ACLNN_STUB_DEFECT": "write-outside"})]:
        p = run(exe, scenario, **env, **extra)
        assert p.returncode == 0 and "runtime error" not in p.stderr and "Sanitizer" not in p.stderr, \
            f"{scenario}:\n{p.stdout}{p.stderr}"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
