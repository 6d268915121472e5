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



@pytest.fixture()
def split_case(tmp_path, monkeypatch):
    """A 70,001-element case split into ranges across forked workers, which map its files (small windows)."""
    from aclnn_cli.pipeline import stages as pipeline
    from helpers import run_cli, write_yaml

    monkeypatch.setattr(pipeline, "SPLIT", 20_000)
    monkeypatch.setattr(pipeline, "RANGE", 5_000)
    monkeypatch.setattr(pages, "WINDOW", 1 << 14)
    out = tmp_path / "out"
    text = "op: aclnnSiluBackward\ncases:\n  - {name: big, dtype: float32, shape: [70001], seed: 3}\n"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out, "-j", 2).exit_code == 0
    assert run_cli("emulate", out, "-j", 2).exit_code == 0
    return out


def _in_a_worker_after_mapping(monkeypatch, then):
    real = Pages.read

    def read(self, layout, start, stop, out=None):
        got = real(self, layout, start, stop, out)
        if pages.MAPPED_READS and str(self.f.path).endswith(".dump.bin") and start > 0:
            then(self.f.path)
        return got

    monkeypatch.setattr(Pages, "read", read)


def test_a_dump_truncated_under_a_workers_map_fails_the_run_in_one_line(split_case, monkeypatch):
    """Another process cutting the dump short while verify's workers read it: the worker that had it mapped dies by
    SIGBUS (one line naming the case and the signal, exit 2), or a worker that opens it after the cut finds it short
    (the case an ERROR naming the file and where it ended, or its size); which comes first is the workers' race. Never a
    traceback, never a pass."""
    import os

    from helpers import run_cli

    _in_a_worker_after_mapping(monkeypatch, lambda path: os.truncate(path, 4096))
    r = run_cli("verify", split_case, "-j", 2)
    assert "Traceback" not in r.output and r.exit_code != 0, r.output
    if "SIGBUS" in r.output:
        from helpers import one_line_error

        one_line_error(r, "case silu_backward-big died (killed by SIGBUS")
    else:
        # (a worker that stats the file after the cut finds its size wrong; one reading finds it end: at the cut, or
        # where its own range begins when that is past the cut)
        import re

        said = r"gradInput\.dump\.bin: (file ended at byte \d+|dump has 4096 bytes, expected 280004)"
        assert "ERROR silu_backward-big" in r.output and re.search(said, r.output), r.output


def test_a_worker_killed_by_sigbus_is_named_in_the_one_line(split_case, monkeypatch):
    """The worker's death says how (forkpool's "killed by SIGBUS"), where it had said only that it died."""
    import os
    import signal

    from helpers import one_line_error, run_cli

    _in_a_worker_after_mapping(monkeypatch, lambda path: os.kill(os.getpid(), signal.SIGBUS))
    one_line_error(run_cli("verify", split_case, "-j", 2), "case silu_backward-big died (killed by SIGBUS; ")
