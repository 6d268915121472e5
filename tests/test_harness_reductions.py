"""The generated runner for the six reduction/norm/loss ops (issue 19) and BatchNormBackward: every API argument
in the header's order and type, compiled against the stub's headers and against the public ops-nn headers (when a
git mirror of hicann/ops-nn is at hand: ACLNN_OPS_NN_GIT, default /work/.mirror/hicann+ops-nn/repo), and driven
through the stub CANN with int64_t, bool, double, aclIntArray*, aclBoolArray*, null optional tensors, several
outputs and integer tensors, the results checked against hand-derived exact values.

The ops are the registered declarations when they exist, else stand-ins (reduction_standins.py).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from aclnn_cli.device.harness import ops_source, write_harness
from aclnn_cli.device.run import attribute_line
from aclnn_cli.ops.base import AttrSpec
from aclnn_cli.errors import UserError

from shared import object_cache, shared_stub_root
from cann_build import STUB_DIR, SANITIZE, build_runner, tools_missing
from reduction_standins import DOCS, PUBLIC_HEADERS, STANDINS, reduction_ops
from stub_ctypes import ACL_IDS

pytestmark = pytest.mark.skipif(tools_missing() is not None, reason=f"cannot build C++ here: {tools_missing()}")

OPS_NN_GIT = Path(os.environ.get("ACLNN_OPS_NN_GIT", "/work/.mirror/hicann+ops-nn/repo"))

# What each declared kind may be in a header (a tensor argument passes an aclTensor*, which binds to both).
KIND_TYPES = {"tensor": {"const aclTensor*", "aclTensor*"}, "int": {"int64_t"}, "int_list": {"const aclIntArray*"},
              "bool_list": {"const aclBoolArray*"}, "scalar": {"const aclScalar*", "aclScalar*"}, "bool": {"bool"},
              "string": {"char*", "const char*"}, "double": {"double"}, "float": {"float"}}


def prototype(text: str, api: str) -> list[tuple[str, str]]:
    """(type, name) of each parameter of `api`GetWorkspaceSize in a header or doc, before workspaceSize."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    m = re.search(rf"\b{api}GetWorkspaceSize\s*\(([^)]*)\)", text)
    assert m, f"no prototype of {api}GetWorkspaceSize"
    params = []
    for p in m.group(1).split(","):
        p = re.sub(r"\s*\*\s*", "* ", " ".join(p.split())).replace("* *", "**").strip()
        typ, name = p.rsplit(" ", 1)
        params.append((typ.replace("* ", "*").strip(), name))
    assert params[-2:] == [("uint64_t*", "workspaceSize"), ("aclOpExecutor**", "executor")], params[-2:]
    return params[:-2]


def assert_matches(op, params: list[tuple[str, str]]) -> None:
    assert [name for _, name in params] == [name for name, _ in op.api_params], op.name
    for (typ, name), (_, kind) in zip(params, op.api_params):
        assert typ in KIND_TYPES[kind], f"{op.name}: {name} is {typ} in the header, declared {kind}"


@pytest.mark.parametrize("op", reduction_ops(), ids=lambda o: o.name)
def test_declaration_matches_the_stub_header(op):
    header = STUB_DIR / "include" / op.api_header
    assert header.is_file(), f"{op.name}: the stub has no {op.api_header}"
    assert_matches(op, prototype(header.read_text(), op.name))


def test_a_misordered_declaration_is_caught():
    """The comparison can fail: the stand-in with its attribute moved last (the old default order)."""
    bad = STANDINS["aclnnSoftmaxBackward"]
    from dataclasses import replace
    moved = replace(bad, signature=("gradOutput", "output", "out", "dim"))
    with pytest.raises(AssertionError):
        assert_matches(moved, prototype((STUB_DIR / "include" / bad.api_header).read_text(), bad.name))


def public_text(path: str) -> str:
    if not (OPS_NN_GIT / "HEAD").exists() and not (OPS_NN_GIT / ".git").exists():
        pytest.skip(f"no git mirror of hicann/ops-nn at {OPS_NN_GIT} (set ACLNN_OPS_NN_GIT)")
    done = subprocess.run(["git", "-C", str(OPS_NN_GIT), "show", f"HEAD:{path}"], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"hicann/ops-nn mirror has no {path}: {done.stderr.strip()[:200]}")
    return done.stdout


@pytest.mark.parametrize("op", reduction_ops(), ids=lambda o: o.name)
def test_declaration_matches_the_public_prototype(op):
    text = public_text(PUBLIC_HEADERS[op.name] if op.name in PUBLIC_HEADERS else DOCS[op.name])
    assert_matches(op, prototype(text, op.name))


@pytest.fixture(scope="module")
def real_headers(tmp_path_factory) -> Path:
    """An include root holding the public ops-nn headers (fetched now) at the paths the runner includes, and
    for RmsNormGrad and SwiGluGrad a header written from their doc's two prototypes (the real one is generated at
    build time)."""
    root = tmp_path_factory.mktemp("ops-nn-headers")
    for op in reduction_ops():
        target = root / op.api_header
        target.parent.mkdir(parents=True, exist_ok=True)
        if op.name in PUBLIC_HEADERS:
            target.write_text(public_text(PUBLIC_HEADERS[op.name]))
        else:
            doc = public_text(DOCS[op.name])
            protos = [re.search(rf"aclnnStatus {op.name}{phase}\s*\([^)]*\)", doc).group(0)
                      for phase in ("GetWorkspaceSize", "")]
            target.write_text('#include "aclnn/aclnn_base.h"\n#include "aclnn_util.h"\nextern "C" {\n' +
                              "".join(f"ACLNN_API {p};\n" for p in protos) + "}\n")
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("harness6") / "h"
    write_harness(out, reduction_ops())
    return out


def test_generated_runner_compiles_against_the_public_headers(project, real_headers, tmp_path):
    inc = STUB_DIR / "include"
    cmd = [os.environ.get("CXX", "g++"), "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
           str(project / "src" / "ops.cpp"), f"-I{project / 'src'}", f"-I{real_headers}", f"-I{inc}",
           f"-I{inc / 'aclnn'}", f"-I{inc / 'aclnnop'}"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_generated_arguments_follow_the_signature():
    ln = next(op for op in reduction_ops() if op.name == "aclnnLayerNormBackward")
    src = ops_source([ln])
    assert ("aclnnLayerNormBackwardGetWorkspaceSize(a.tensor(0), a.tensor(1), a.int_array(2), a.tensor(3), "
            "a.tensor(4), a.tensor(5), a.tensor(6), a.bool_array(7), a.tensor(8), a.tensor(9), a.tensor(10), "
            "workspaceSize, executor)") in src
    assert '{"aclnnLayerNormBackward", 11, "ttlttttmttt",' in src
    nll = next(op for op in reduction_ops() if op.name == "aclnnNLLLossBackward")
    assert "a.integer(4), a.integer(5), a.tensor(6)" in ops_source([nll])
    bn = next(op for op in reduction_ops() if op.name == "aclnnBatchNormBackward")
    src = ops_source([bn])
    assert ("aclnnBatchNormBackwardGetWorkspaceSize(a.tensor(0), a.tensor(1), a.tensor(2), a.tensor(3), a.tensor(4), "
            "a.tensor(5), a.tensor(6), a.flag(7), a.float64(8), a.bool_array(9), a.tensor(10), a.tensor(11), "
            "a.tensor(12), workspaceSize, executor)") in src
    assert '{"aclnnBatchNormBackward", 13, "tttttttbdmttt",' in src
    glu = next(op for op in reduction_ops() if op.name == "aclnnSwiGluGrad")
    assert ("aclnnSwiGluGradGetWorkspaceSize(a.tensor(0), a.tensor(1), a.integer(2), a.tensor(3), workspaceSize, "
            "executor)") in ops_source([glu])


# The runner's letter for each argument kind and the CallArgs accessor it passes the argument through.
ACCESSORS = {"t": "tensor", "i": "integer", "b": "flag", "m": "bool_array"}


@pytest.mark.parametrize("name, kinds", [("aclnnGroupNormBackward", "tttttiiiimttt"),
                                         ("aclnnGeGluBackward", "tttiit"), ("aclnnGeGluV3Backward", "tttiibt")])
def test_generated_arguments_of_the_groups_and_geglu_ops(name, kinds):
    """Four int64 sizes and a bool array (GroupNorm), two ints and a bool (GeGluV3), in the public header's order."""
    src = ops_source([next(op for op in reduction_ops() if op.name == name)])
    args = ", ".join(f"a.{ACCESSORS[k]}({i})" for i, k in enumerate(kinds))
    assert f"{name}GetWorkspaceSize({args}, workspaceSize, executor)" in src
    assert f'{{"{name}", {len(kinds)}, "{kinds}",' in src


def test_an_unknown_kind_is_one_line():
    from dataclasses import replace
    from aclnn_cli.ops.base import AttrSpec
    op = replace(STANDINS["aclnnSoftmaxBackward"], attributes=(AttrSpec("dim", "float_list"),))
    with pytest.raises(UserError, match="cannot pass dim"):
        ops_source([op])


# ---------------------------------------------------------------- the runner, driven by hand-written requests


@pytest.fixture(scope="module", params=["plain", "asan"])
def runner(request, project, tmp_path_factory) -> Path:
    """The runner against the stub, and both built with -fsanitize=address,undefined (drive() then also
    requires a clean exit: no sanitizer report, no leak)."""
    asan = request.param == "asan"
    root = shared_stub_root(tmp_path_factory, sanitize=asan)
    return build_runner(project, tmp_path_factory.mktemp("build6"), root, SANITIZE if asan else "",
                        cache=object_cache(tmp_path_factory))


class Request:
    """One case in the runner's line format (run.py writes the same from a manifest)."""

    def __init__(self, work: Path, op: str, case: str = "c1") -> None:
        self.work, self.case, self.lines, self.dumps = work, case, [f"case {case}", f"op {op}"], {}

    def tensor(self, name: str, value, role: str = "in") -> "Request":
        a = np.asarray(value)
        path = self.work / f"{self.case}-{name}.bin"
        a.tofile(path)
        strides = [int(np.prod(a.shape[i + 1:], dtype=np.int64)) for i in range(a.ndim)]
        self.lines.append(" ".join(map(str, ["tensor", role, ACL_IDS[a.dtype], 2, a.dtype.itemsize, a.ndim, *a.shape,
                                             *strides, 0, 1, a.size, path])))
        if role == "out":
            self.dumps[name] = (self.work / f"{self.case}-{name}.dump.bin", a.dtype, a.shape)
            self.lines.append(f"dump {self.dumps[name][0]}")
        return self

    def line(self, text: str) -> "Request":
        self.lines.append(text)
        return self

    def text(self) -> str:
        return "\n".join(self.lines + [f"status {self.work / (self.case + '-status.txt')}", "end", ""])

    def result(self, name: str) -> np.ndarray:
        path, dtype, shape = self.dumps[name]
        return np.fromfile(path, dtype=dtype).reshape(shape)


def drive(runner: Path, *requests: Request, exit_code: int | None = None, **stub_env: str) -> list[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ACLNN_STUB_")}, **stub_env}
    done = subprocess.run([str(runner)], input="".join(r.text() for r in requests), capture_output=True, text=True,
                          env=env, timeout=120)
    fatal = any(line.startswith("fatal") for line in done.stdout.splitlines())
    assert done.returncode == (exit_code if exit_code is not None else 2 if fatal else 0), done.stderr[-3000:]
    assert "Sanitizer" not in done.stderr and "runtime error" not in done.stderr, done.stderr[-3000:]
    return done.stdout.splitlines()[1:]  # after "ready"


F32 = np.float32


def test_softmax_int_dim(runner, tmp_path):
    r = (Request(tmp_path, "aclnnSoftmaxBackward").tensor("dy", np.array([[1, 2, 3], [2, 2, 2]], F32))
         .tensor("y", np.array([[0.25, 0.5, 0.25]] * 2, F32)).line(attr("int", -1)).tensor("out", np.zeros((2, 3), F32), "out"))
    assert drive(runner, r) == ["done c1 0"]
    np.testing.assert_array_equal(r.result("out"), [[-0.25, 0, 0.25], [0, 0, 0]])


def test_nll_int64_target_and_two_ints(runner, tmp_path):
    r = (Request(tmp_path, "aclnnNLLLossBackward").tensor("g", np.array([2], F32))
         .tensor("self", np.zeros((3, 4), F32)).tensor("t", np.array([1, -100, 3], np.int64))
         .tensor("w", np.array([1, 2, 3, 4], F32)).line("int 1").line("int -100").tensor("tw", np.array([4], F32))
         .tensor("out", np.full((3, 4), 5, F32), "out"))
    assert drive(runner, r) == ["done c1 0"]
    want = np.zeros((3, 4))
    want[0, 1], want[2, 3] = -1, -2  # mean: q = 2/4, -q*w[t]; the ignored row stays 0
    np.testing.assert_array_equal(r.result("out"), want)


def attr(kind: str, value) -> str:
    """The request line `aclnn-cli run` writes for an attribute (run.attribute_line)."""
    return attribute_line(AttrSpec("a", kind), value, Path("case"))


def test_attribute_lines():
    assert [attr("int", -1), attr("int", 2**63 - 1), attr("int_list", (10, 30)), attr("bool_list", (True, False)),
            attr("int_list", ()), attr("bool_list", None)] == [
        "int -1", f"int {2**63 - 1}", "int_list 2 10 30", "bool_list 2 1 0", "int_list 0", "null"]


def test_layer_norm_int_list_bool_list_nulls_and_three_outputs(runner, tmp_path):
    """normalizedShape [4], outputMask [true, false, true]: gradWeightOut and weightOptional are null pointers."""
    r = (Request(tmp_path, "aclnnLayerNormBackward").tensor("dy", np.array([[1, 2, 3, 4]] * 2, F32))
         .tensor("x", np.array([[0, 1, 2, 5]] * 2, F32)).line(attr("int_list", (4,)))
         .tensor("mean", np.full((2, 1), 2, F32)).tensor("rstd", np.full((2, 1), 0.5, F32)).line("null").line("null")
         .line(attr("bool_list", (True, False, True)))
         .tensor("dx", np.zeros((2, 4), F32), "out").line("null").tensor("db", np.zeros(4, F32), "out"))
    assert drive(runner, r) == ["done c1 0"]
    np.testing.assert_array_equal(r.result("dx"), [[-0.25, 0, 0.25, 0]] * 2)
    np.testing.assert_array_equal(r.result("db"), [2, 4, 6, 8])


def test_defects_reach_the_new_ops(runner, tmp_path):
    """wrong-values negates every output the op writes; crash kills the runner in that op's phase two only."""
    def rms(case):
        return (Request(tmp_path, "aclnnRmsNormGrad", case).tensor("dy", np.array([[1, 2]], F32))
                .tensor("x", np.array([[1, 1]], F32)).tensor("rstd", np.array([0.5], F32))
                .tensor("gamma", np.array([1, 1], F32)).tensor("dx", np.zeros((1, 2), F32), "out")
                .tensor("dg", np.zeros(2, F32), "out"))
    r = rms("w")
    assert drive(runner, r, ACLNN_STUB_DEFECT="wrong-values", ACLNN_STUB_DEFECT_OP="aclnnRmsNormGrad") == ["done w 0"]
    np.testing.assert_array_equal(r.result("dx"), [[-0.3125, -0.8125]])
    np.testing.assert_array_equal(r.result("dg"), [-0.5, -1])
    other = (Request(tmp_path, "aclnnMseLossBackward", "m").tensor("dy", np.array(0.5, F32))
             .tensor("x", np.array([3, 1], F32)).tensor("y", np.array([1, 2], F32)).line("int 2")
             .tensor("out", np.zeros(2, F32), "out"))
    replies = drive(runner, other, rms("c"), exit_code=-11, ACLNN_STUB_DEFECT="crash",
                    ACLNN_STUB_DEFECT_OP="aclnnRmsNormGrad")
    assert replies == ["done m 0"]  # then SIGSEGV in RmsNormGrad's phase two: no reply
    np.testing.assert_array_equal(other.result("out"), [2, -1])


def test_layer_norm_mask_asking_for_a_null_output_is_161001(runner, tmp_path):
    r = (Request(tmp_path, "aclnnLayerNormBackward").tensor("dy", np.zeros((2, 4), F32))
         .tensor("x", np.zeros((2, 4), F32)).line("int_list 1 4").tensor("mean", np.zeros((2, 1), F32))
         .tensor("rstd", np.zeros((2, 1), F32)).line("null").line("null").line("bool_list 3 1 1 1")
         .tensor("dx", np.zeros((2, 4), F32), "out").line("null").tensor("db", np.zeros(4, F32), "out"))
    assert drive(runner, r) == ["done c1 161001"]


def batch_norm(tmp_path, case: str, training: bool, eps: float, mask=(True, True, True), stats=None,
               outputs=("gi", "gw", "gb")) -> Request:
    """gradOut, input (2, 2, 2): channel 0 holds x = [0, 1, 2, 5], dy = [1, 2, 3, 4] (in (n, s) order), channel 1
    x = [1, 1, 3, 3], dy = [1, -1, 2, 0]; weight [1, 2]. stats: (runningMean, runningVar, saveMean, saveInvstd),
    None for a null pointer."""
    x = np.array([0, 1, 1, 1, 2, 5, 3, 3], F32).reshape(2, 2, 2)
    dy = np.array([1, 2, 1, -1, 3, 4, 2, 0], F32).reshape(2, 2, 2)
    r = (Request(tmp_path, "aclnnBatchNormBackward", case).tensor("dy", dy).tensor("x", x)
         .tensor("w", np.array([1, 2], F32)))
    for name, value in zip(("rm", "rv", "sm", "si"), stats or (None,) * 4):
        r = r.tensor(name, np.array(value, F32)) if value is not None else r.line("null")
    r.line(attr("bool", training)).line(attr("double", eps)).line(attr("bool_list", mask))
    for name, shape in zip(("gi", "gw", "gb"), ((2, 2, 2), (2,), (2,))):
        r = r.tensor(name, np.full(shape, 7, F32), "out") if name in outputs else r.line("null")
    return r


def test_batch_norm_training_bool_double_and_a_bool_array(runner, tmp_path):
    """training: h = (x - saveMean) * saveInvstd; dgamma = sum dy h = [4, 2], dbeta = [10, 2];
    dx = rstd * g * (dy - (h dgamma + dbeta) / 4). The running statistics are null (unused in training)."""
    r = batch_norm(tmp_path, "c1", True, 1e-5, stats=(None, None, [2, 2], [0.5, 1]))
    assert drive(runner, r) == ["done c1 0"]
    np.testing.assert_array_equal(r.result("gi").reshape(-1), [-0.25, 0, 2, -2, 0.25, 0, 2, -2])
    np.testing.assert_array_equal(r.result("gw"), [4, 2])
    np.testing.assert_array_equal(r.result("gb"), [10, 2])


def test_batch_norm_inference_takes_eps_as_a_double(runner, tmp_path):
    """inference: invstd = 1 / sqrt(runningVar + eps) = [1, 0.5] only with eps = 0.25 as given;
    dx = dy g invstd, gradWeight = sum dy (x - runningMean) invstd = [8, 1]. Null saved statistics."""
    r = batch_norm(tmp_path, "c1", False, 0.25, stats=([2, 2], [0.75, 3.75], None, None))
    assert drive(runner, r) == ["done c1 0"]
    np.testing.assert_array_equal(r.result("gi").reshape(-1), [1, 2, 1, -1, 3, 4, 2, 0])
    np.testing.assert_array_equal(r.result("gw"), [8, 1])
    np.testing.assert_array_equal(r.result("gb"), [10, 2])


def test_batch_norm_output_mask_and_its_statuses(runner, tmp_path):
    """A masked-off output may be null and is not written; outputMask of 2 values, or a true entry beside a
    null output: 161002 (aclnn-cli's contract for the op); a null outputMask: 161001."""
    stats = (None, None, [2, 2], [0.5, 1])
    weights = batch_norm(tmp_path, "w", True, 1e-5, (False, True, True), stats, outputs=("gw", "gb"))
    short = batch_norm(tmp_path, "s", True, 1e-5, (True, True), stats)
    missing = batch_norm(tmp_path, "m", True, 1e-5, (True, True, True), stats, outputs=("gi", "gb"))
    no_mask = batch_norm(tmp_path, "n", True, 1e-5, None, stats)
    assert drive(runner, weights, short, missing, no_mask) == ["done w 0", "done s 161002", "done m 161002",
                                                               "done n 161001"]
    np.testing.assert_array_equal(weights.result("gw"), [4, 2])
    np.testing.assert_array_equal(weights.result("gb"), [10, 2])


def swi_glu_grad(tmp_path, case: str, dim: int, x=None) -> Request:
    """x (2, 4) = [A, B] along axis 1, A in {0, 100}: s = 1/2 or 1 (exp(-100) + 1 = 1 in float32), so out_A =
    yGrad * B / 2 or yGrad * B, out_B = 0 or 100 * yGrad, exactly."""
    x = np.array([[0, 100, 3, -2], [100, 0, 0.5, 4]], F32) if x is None else x
    return (Request(tmp_path, "aclnnSwiGluGrad", case).tensor("dy", np.array([[2, 0.5], [-4, 3]], F32))
            .tensor("x", x).line(attr("int", dim)).tensor("out", np.full(x.shape, 7, F32), "out"))


def test_swi_glu_grad_int_dim_and_its_statuses(runner, tmp_path):
    """dim 1 and -1 split the same axis; dim 2 is out of range, an odd axis is not split in halves: 161002."""
    pos, neg = swi_glu_grad(tmp_path, "p", 1), swi_glu_grad(tmp_path, "n", -1)
    wide, odd = swi_glu_grad(tmp_path, "w", 2), swi_glu_grad(tmp_path, "o", -1, np.zeros((2, 5), F32))
    assert drive(runner, pos, neg, wide, odd) == ["done p 0", "done n 0", "done w 161002", "done o 161002"]
    for r in (pos, neg):
        np.testing.assert_array_equal(r.result("out"), [[3, -1, 0, 50], [-2, 6, -400, 0]])


def test_swi_glu_grad_wrong_values_defect(runner, tmp_path):
    r = swi_glu_grad(tmp_path, "d", 1)
    assert drive(runner, r, ACLNN_STUB_DEFECT="wrong-values", ACLNN_STUB_DEFECT_OP="aclnnSwiGluGrad") == ["done d 0"]
    np.testing.assert_array_equal(r.result("out"), [[-3, 1, 0, -50], [2, -6, 400, 0]])


def group_norm(tmp_path, case: str, hxw: int = 2, group: int = 2, mask=(True, True, True), gamma=True,
               outputs=("gi", "gg", "gb")) -> Request:
    """N = 1, C = 4, HxW = 2 in two groups (test_stub_group_norm_backward's known answer): group 0 x = [1, 3, 0, 2],
    dy = [1, 1, 2, 0], mean 1.5, rstd 2, gamma [1, 2]: C2 = 10, C3 = -18, dx = [-6, 14, -10, 2], dgamma [2, -6];
    group 1 x = 0, dy = 1, mean 0, rstd 1: dx = 0, dgamma 0; dbeta 2 each. (The API reads the numbers, not the
    shape: gradOut and input are (4, 2).)"""
    r = (Request(tmp_path, "aclnnGroupNormBackward", case)
         .tensor("dy", np.array([[1, 1], [2, 0], [1, 1], [1, 1]], F32))
         .tensor("x", np.array([[1, 3], [0, 2], [0, 0], [0, 0]], F32))
         .tensor("mean", np.array([1.5, 0], F32)).tensor("rstd", np.array([2, 1], F32)))
    r = r.tensor("gamma", np.array([1, 2, 1, 1], F32)) if gamma else r.line("null")
    for value in (1, 4, hxw, group):
        r.line(attr("int", value))
    r.line(attr("bool_list", mask))
    for name, shape in zip(("gi", "gg", "gb"), ((4, 2), (4,), (4,))):
        r = r.tensor(name, np.full(shape, 7, F32), "out") if name in outputs else r.line("null")
    return r


def test_group_norm_four_ints_a_bool_array_and_its_statuses(runner, tmp_path):
    """N, C, HxW, group as int64; with a null gamma (ones) group 0 gives C2 = 4, C3 = -8, dx = [-2, 6, -4, 0];
    the masked-off outputs null. group 3 does not divide C = 4; with HxW 3 input is not N * C * HxW; a true entry
    beside a null output: 161002; a null outputMask: 161001."""
    full, ones = group_norm(tmp_path, "f"), group_norm(tmp_path, "o", mask=(True, False, False), gamma=False,
                                                        outputs=("gi",))
    bad = [group_norm(tmp_path, "g", group=3), group_norm(tmp_path, "h", hxw=3),
           group_norm(tmp_path, "m", outputs=("gi", "gg")), group_norm(tmp_path, "n", mask=None)]
    assert drive(runner, full, ones, *bad) == ["done f 0", "done o 0", "done g 161002", "done h 161002",
                                               "done m 161002", "done n 161001"]
    np.testing.assert_array_equal(full.result("gi").reshape(-1), [-6, 14, -10, 2, 0, 0, 0, 0])
    np.testing.assert_array_equal(full.result("gg"), [2, -6, 0, 0])
    np.testing.assert_array_equal(full.result("gb"), [2, 2, 2, 2])
    np.testing.assert_array_equal(ones.result("gi").reshape(-1), [-2, 6, -4, 0, 0, 0, 0, 0])


def test_group_norm_wrong_values_defect(runner, tmp_path):
    r = group_norm(tmp_path, "d")
    assert drive(runner, r, ACLNN_STUB_DEFECT="wrong-values", ACLNN_STUB_DEFECT_OP="aclnnGroupNormBackward") == [
        "done d 0"]
    np.testing.assert_array_equal(r.result("gi").reshape(-1), [6, -14, 10, -2, 0, 0, 0, 0])
    np.testing.assert_array_equal(r.result("gg"), [-2, 6, 0, 0])
    np.testing.assert_array_equal(r.result("gb"), [-2, -2, -2, -2])


def ge_glu(tmp_path, case: str, dim: int = -1, approximate: int = 1, left=None, gelu_shape=(2, 2)) -> Request:
    """self (2, 4) = [L, B] along axis 1 ([B, L] with activateLeft), the gelu'd B = [[0, 100], [-100, 0]]: tanh form
    gelu'(B) = [[1/2, 1], [0, 1/2]] exactly (g1 = 1/2, 1, 0), the erf form's 1/2 at 0; the linear side dy * gelu.
    left None: aclnnGeGluBackward (no activateLeft)."""
    lin, act = np.array([[3, -2], [0.5, 4]], F32), np.array([[0, 100], [-100, 0]], F32)
    x = np.concatenate([act, lin] if left else [lin, act], axis=1)
    r = (Request(tmp_path, "aclnnGeGluBackward" if left is None else "aclnnGeGluV3Backward", case)
         .tensor("dy", np.array([[2, 0.5], [-4, 3]], F32)).tensor("x", x)
         .tensor("gelu", np.ones(gelu_shape, F32) * 1.5).line(attr("int", dim)).line(attr("int", approximate)))
    if left is not None:
        r.line(attr("bool", left))
    return r.tensor("out", np.full(x.shape, 7, F32), "out")


def test_ge_glu_two_ints_a_bool_and_their_statuses(runner, tmp_path):
    """dim -1 and 1 split the same axis; activateLeft swaps the halves; dim 2 out of range, approximate 2, a gelu
    not gradOutput's shape: 161002."""
    v1, v1_pos = ge_glu(tmp_path, "a"), ge_glu(tmp_path, "p", dim=1)
    v3, v3_left = ge_glu(tmp_path, "r", left=False), ge_glu(tmp_path, "l", left=True)
    bad = [ge_glu(tmp_path, "w", dim=2), ge_glu(tmp_path, "x", approximate=2, left=True),
           ge_glu(tmp_path, "g", gelu_shape=(2, 4))]
    assert drive(runner, v1, v1_pos, v3, v3_left, *bad) == [
        "done a 0", "done p 0", "done r 0", "done l 0", "done w 161002", "done x 161002", "done g 161002"]
    lin_side, act_side = [[3, 0.75], [-6, 4.5]], [[3, -1], [0, 6]]
    for r in (v1, v1_pos, v3):
        np.testing.assert_array_equal(r.result("out"), np.concatenate([lin_side, act_side], axis=1))
    np.testing.assert_array_equal(v3_left.result("out"), np.concatenate([act_side, lin_side], axis=1))


def test_ge_glu_wrong_values_defect(runner, tmp_path):
    r = ge_glu(tmp_path, "d", approximate=0, left=True)
    assert drive(runner, r, ACLNN_STUB_DEFECT="wrong-values", ACLNN_STUB_DEFECT_OP="aclnnGeGluV3Backward") == [
        "done d 0"]
    got = r.result("out")
    np.testing.assert_array_equal(got[:, 2:], [[-3, -0.75], [6, -4.5]])
    assert got[0, 0] == -3  # the erf form at 0 (its gelu'(+-100) is not exact)


def test_rms_norm_grad_two_const_outputs(runner, tmp_path):
    r = (Request(tmp_path, "aclnnRmsNormGrad").tensor("dy", np.array([[1, 2], [4, 0]], F32))
         .tensor("x", np.array([[1, 1], [2, 2]], F32)).tensor("rstd", np.array([0.5, 0.25], F32))
         .tensor("gamma", np.array([1, 1], F32)).tensor("dx", np.zeros((2, 2), F32), "out")
         .tensor("dg", np.zeros(2, F32), "out"))
    assert drive(runner, r) == ["done c1 0"]
    np.testing.assert_array_equal(r.result("dx"), [[0.3125, 0.8125], [0.875, -0.125]])
    np.testing.assert_array_equal(r.result("dg"), [2.5, 1])


def test_mse_int_reduction(runner, tmp_path):
    r = (Request(tmp_path, "aclnnMseLossBackward").tensor("dy", np.array(0.5, F32))
         .tensor("x", np.array([3, 1], F32)).tensor("y", np.array([1, 2], F32)).line("int 2")
         .tensor("out", np.zeros(2, F32), "out"))
    assert drive(runner, r) == ["done c1 0"]
    np.testing.assert_array_equal(r.result("out"), [2, -1])


def test_a_request_of_the_wrong_kind_is_an_error_and_the_runner_goes_on(runner, tmp_path):
    """dim sent as an aclScalar (what the old harness passed) or as null: refused before any call."""
    bad = [Request(tmp_path, "aclnnLogSoftmaxBackward", f"bad{i}").tensor("dy", np.zeros(2, F32))
           .tensor("y", np.zeros(2, F32)).line(line).tensor("out", np.zeros(2, F32), "out")
           for i, line in enumerate(["scalar 0 -1", "null"])]
    good = (Request(tmp_path, "aclnnLogSoftmaxBackward", "good").tensor("dy", np.array([1, 3], F32))
            .tensor("y", np.zeros(2, F32)).line("int 0").tensor("out", np.zeros(2, F32), "out"))
    replies = drive(runner, *bad, good)
    assert [r.split(" ")[:2] for r in replies] == [["error", "bad0"], ["error", "bad1"], ["done", "good"]]
    assert "argument 3" in replies[0] and "takes 'i'" in replies[0]
    np.testing.assert_array_equal(good.result("out"), [-3, -1])


@pytest.mark.parametrize("line", ["int 1.5", "int 99999999999999999999", "int_list 2 4", "bool_list 1 2",
                                  "int_list 65 " + " ".join(["1"] * 65)])
def test_a_malformed_list_or_int_is_fatal(runner, tmp_path, line):
    r = (Request(tmp_path, "aclnnSoftmaxBackward").tensor("dy", np.zeros(2, F32)).tensor("y", np.zeros(2, F32))
         .line(line).tensor("out", np.zeros(2, F32), "out"))
    replies = drive(runner, r)
    assert len(replies) == 1 and replies[0].startswith("fatal malformed"), replies
