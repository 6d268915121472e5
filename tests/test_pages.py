"""tensor/pages.py: verify's in-place reads give what copied reads give, across window edges and a short last
window, hash what they read on the side as copied reads do, and fall back to copying where a file cannot be mapped."""

from __future__ import annotations

import hashlib
import mmap

import ml_dtypes
import numpy as np
import pytest

from aclnn_cli.tensor import pages
from aclnn_cli.tensor.layout import Layout
from aclnn_cli.tensor.pages import Pages
from aclnn_cli.tensor.storage import StorageFile


@pytest.fixture()
def mapped(monkeypatch):
    monkeypatch.setattr(pages, "MAPPED_READS", True)
    monkeypatch.setattr(pages, "WINDOW", 1 << 14)  # (small windows: many edges in a small file)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64])
def test_in_place_reads_are_the_copied_reads_across_window_edges(tmp_path, mapped, dtype):
    n = 50_001  # (not a whole number of windows or chunks)
    values = np.random.default_rng(1).standard_normal(n).astype(dtype)
    path = tmp_path / "x.bin"
    values.tofile(path)
    layout = Layout.contiguous((n,))
    digest = hashlib.sha256(values.tobytes()).hexdigest()
    with StorageFile(path, dtype, n, sha256=digest) as f:
        reader = Pages(f)
        got = [reader.read(layout, s, min(n, s + 3000)) for s in range(0, n, 3000)]
        assert all(not g.flags.writeable for g in got)  # (views of the file's pages, never written through)
        assert np.array_equal(np.concatenate(got).view(np.uint8), values.view(np.uint8))
        f.check_sha256()  # (every byte was hashed on the side, in order: the recorded digest holds)
    with StorageFile(path, dtype, n, sha256="0" * 64) as f:
        reader = Pages(f)
        for s in range(0, n, 3000):
            reader.read(layout, s, min(n, s + 3000))
        with pytest.raises(Exception, match="changed"):
            f.check_sha256()


def test_a_file_that_cannot_be_mapped_is_read_by_copying(tmp_path, mapped, monkeypatch):
    values = np.arange(10_000, dtype=np.float32)
    path = tmp_path / "x.bin"
    values.tofile(path)

    def refuse(*a, **k):
        raise OSError(19, "No such device")

    monkeypatch.setattr(mmap, "mmap", refuse)
    with StorageFile(path, np.float32, values.size) as f:
        got = Pages(f).read(Layout.contiguous((values.size,)), 100, 9000)
        assert np.array_equal(got, values[100:9000]) and got.flags.writeable


def test_outside_a_forked_worker_reads_are_copied(tmp_path):
    values = np.arange(1000, dtype=np.float32)
    path = tmp_path / "x.bin"
    values.tofile(path)
    assert not pages.MAPPED_READS
    with StorageFile(path, np.float32, values.size) as f:
        got = Pages(f).read(Layout.contiguous((values.size,)), 0, 1000)
        assert got.flags.writeable and np.array_equal(got, values)
