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


# Per op: its torch kernel, the output it writes, the positive cases of its bundled file (its test file's NumPy port
# writes the same ones) and the cases whose K is 65,536; the max-pool ops' suites carry the forward's indices.
OPS = {"matmul": (T.matmul, "out", 126, ("k_long",)), "batch_mat_mul": (T.batch_mat_mul, "out", 78, ("k_long",)),
       "avg_pool2d_backward": (T.avg_pool2d_backward, "gradInput", 76, ()),
       "max_pool2d_with_indices_backward": (T.max_pool2d_with_indices_backward, "gradInput", 60, ()),
       "avg_pool3d_backward": (T.avg_pool3d_backward, "output", 64, ()),
       "max_pool3d_with_argmax_backward": (T.max_pool3d_with_argmax_backward, "gradInput", 65, ())}
MAXPOOL = {"max_pool2d_with_indices_backward": "test_op_max_pool2d_with_indices_backward",
           "max_pool3d_with_argmax_backward": "test_op_max_pool3d_with_argmax_backward"}


def _suite(tmp_path_factory, key: str) -> Path:
    if key in MAXPOOL:
        import importlib

        return maxpool.bundled(tmp_path_factory, importlib.import_module(MAXPOOL[key]).BUNDLED, f"{key}_bundled")
    return bundled_suite(tmp_path_factory, key)


@pytest.mark.parametrize("key", sorted(OPS))
def test_every_bundled_case_passes_through_torch(key, tmp_path_factory, tmp_path):
    """torch.matmul (cubeMathType USE_FP16's float16 rounding where the NumPy port applies it), the aten pooling
    backwards; matmul-k_long and batch_mat_mul-k_long (K = 65,536) in float32, float16 and bfloat16 among the cases."""
    kernel, output, wrote, long_k = OPS[key]
    _check(_suite(tmp_path_factory, key), tmp_path, kernel, output, wrote, long_k)


def test_convolution_backward(tmp_path_factory, tmp_path):
    """aten.convolution_backward: gradInput, gradWeight and gradBias where the case asks for each (output_mask),
    transposed cases and a padding of 4 values among them."""
    from test_op_convolution_backward import write_dumps

    suite = bundled_suite(tmp_path_factory, "convolution_backward")
    assert write_dumps(suite, tmp_path / "torch", T.convolution_backward, T.convolution_args) == 112
    _judged(tmp_path / "torch", tmp_path / "torch.json")
