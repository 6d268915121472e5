"""PyTorch CPU as an independent device (tests/torch_device.py) over every bundled case of the contraction and window
ops of issue 29: its float32 results written as the dumps, verify's verdict PASS on each, and the count of cases it
wrote (K = 65,536 among them). make test-torch runs this file in a venv with PyTorch; elsewhere it is skipped, and
make test's independent kernels are the NumPy ports in each op's test file (decision 50).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: make test-torch runs these")

import maxpool  # noqa: E402
import torch_device as T  # noqa: E402
from rowblocks import bundled_suite, independent_dumps, not_passing  # noqa: E402


def _judged(work: Path, report: Path) -> dict[str, str]:
    """verify over the dumps: every case must PASS (the failures listed otherwise); case id -> status."""
    bad = not_passing(work, report)
    assert not bad, bad
    return {c["case_id"]: c["status"] for c in json.loads(report.read_text())["cases"]}


def _check(suite: Path, tmp_path: Path, kernel, output: str, wrote: int, long_k=()) -> None:
    """Every positive case of `suite` through `kernel` (`wrote` of them), each PASS; each case `long_k` names (K =
    65,536) among them in its three dtypes."""
    work = tmp_path / "torch"
    assert independent_dumps(suite, work, kernel, output) == wrote
    status = _judged(work, tmp_path / "torch.json")
    for name in long_k:
        hits = [cid for cid in status if f"-{name}-" in cid]
        assert len(hits) == 3 and all(status[c] == "PASS" for c in hits), (name, hits)
    print(f"torch: {wrote} cases written, {len(status)} judged, all PASS")


@pytest.fixture(scope="module")
def matmul_suite(tmp_path_factory):
    return bundled_suite(tmp_path_factory, "matmul")


@pytest.fixture(scope="module")
def bmm_suite(tmp_path_factory):
    return bundled_suite(tmp_path_factory, "batch_mat_mul")


@pytest.fixture(scope="module")
def conv_suite(tmp_path_factory):
    return bundled_suite(tmp_path_factory, "convolution_backward")


@pytest.fixture(scope="module")
def avgpool_suite(tmp_path_factory):
    return bundled_suite(tmp_path_factory, "avg_pool2d_backward")


@pytest.fixture(scope="module")
def avgpool3d_suite(tmp_path_factory):
    return bundled_suite(tmp_path_factory, "avg_pool3d_backward")


@pytest.fixture(scope="module")
def maxpool3d_suite(tmp_path_factory):
    from test_op_max_pool3d_with_argmax_backward import BUNDLED

    return maxpool.bundled(tmp_path_factory, BUNDLED, "maxpool3d_bundled")


@pytest.fixture(scope="module")
def maxpool_suite(tmp_path_factory):
    from test_op_max_pool2d_with_indices_backward import BUNDLED

    return maxpool.bundled(tmp_path_factory, BUNDLED, "maxpool_bundled")


def test_matmul(matmul_suite, tmp_path):
    """torch.matmul, cubeMathType USE_FP16's float16 rounding where the NumPy port applies it; matmul-k_long (K =
    65,536) in float32, float16 and bfloat16 among the cases."""
    _check(matmul_suite, tmp_path, T.matmul, "out", WROTE["matmul"], long_k=("k_long",))


def test_batch_mat_mul(bmm_suite, tmp_path):
    _check(bmm_suite, tmp_path, T.batch_mat_mul, "out", WROTE["batch_mat_mul"], long_k=("k_long",))


def test_convolution_backward(conv_suite, tmp_path):
    """aten.convolution_backward: gradInput, gradWeight and gradBias where the case asks for each (output_mask),
    transposed cases and a padding of 4 values among them."""
    from test_op_convolution_backward import write_dumps

    wrote = write_dumps(conv_suite, tmp_path / "torch", T.convolution_backward, T.convolution_args)
    assert wrote == WROTE["convolution_backward"]
    _judged(tmp_path / "torch", tmp_path / "torch.json")


def test_avg_pool2d_backward(avgpool_suite, tmp_path):
    _check(avgpool_suite, tmp_path, T.avg_pool2d_backward, "gradInput", WROTE["avg_pool2d_backward"])


def test_max_pool2d_with_indices_backward(maxpool_suite, tmp_path):
    _check(maxpool_suite, tmp_path, T.max_pool2d_with_indices_backward, "gradInput",
           WROTE["max_pool2d_with_indices_backward"])



def test_avg_pool3d_backward(avgpool3d_suite, tmp_path):
    _check(avgpool3d_suite, tmp_path, T.avg_pool3d_backward, "output", WROTE["avg_pool3d_backward"])


def test_max_pool3d_with_argmax_backward(maxpool3d_suite, tmp_path):
    _check(maxpool3d_suite, tmp_path, T.max_pool3d_with_argmax_backward, "gradInput",
           WROTE["max_pool3d_with_argmax_backward"])


# The positive cases of each op's bundled file (its test file's NumPy port writes the same ones).
WROTE = {"matmul": 126, "batch_mat_mul": 78, "convolution_backward": 112, "avg_pool2d_backward": 76,
         "max_pool2d_with_indices_backward": 60, "avg_pool3d_backward": 64, "max_pool3d_with_argmax_backward": 65}
