"""A large golden's per-block digests (blockdigests.py): gen records the sha256 of each RANGE-element block,
and a split verify checks each block as its range reads it, instead of reading the golden again for a
whole-file hash. Cases are made large by shrinking SPLIT and RANGE (as test_scale does)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from aclnn_cli.casedir import manifest as M
from aclnn_cli.pipeline import stages as pipeline
from aclnn_cli.judge import verify as V

from helpers import manifest, run_cli, write_yaml

N = 70_001  # 14 blocks of 5,000 and one of 1 element


@pytest.fixture
def small_ranges(monkeypatch):
    monkeypatch.setattr(pipeline, "SPLIT", 20_000)
    monkeypatch.setattr(pipeline, "RANGE", 5_000)


def _case(tmp_path: Path, dtype: str = "float32") -> Path:
    p = write_yaml(tmp_path, f"op: aclnnSiluBackward\ncases:\n  - {{name: big, dtype: {dtype}, shape: [{N}], seed: 3}}\n")
    out = tmp_path / "out"
    assert run_cli("gen", p, "-o", out, "-j", 2).exit_code == 0
    assert run_cli("emulate", out, "-j", 2).exit_code == 0
    return out


def _output(case_dir: Path) -> dict:
    return next(t for t in manifest(case_dir)["tensors"] if t["role"] == "output")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_gen_records_each_blocks_sha256(tmp_path, small_ranges, dtype):
    case = _case(tmp_path, dtype) / "silu_backward-big"
    t = _output(case)
    data = (case / t["golden"]).read_bytes()
    step = 5_000 * (4 if dtype == "float32" else 2)
    assert t["golden_sha256"] == hashlib.sha256(data).hexdigest()
    assert t["golden_blocks"] == {"elements": 5_000,
                                  "sha256": [hashlib.sha256(data[i:i + step]).hexdigest() for i in range(0, len(data), step)]}
    assert len(t["golden_blocks"]["sha256"]) == 15


def test_small_outputs_record_no_blocks(tmp_path):
    out = _case(tmp_path)
    assert "golden_blocks" not in _output(out / "silu_backward-big")  # (70,001 elements: not split by default)


_LOG: list[Path] = []
_REAL_CHECK = V.check_file_sha256


def _spy(path, expected, what):
    """check_file_sha256, recording the file it checks (workers are forked: they append to the file)."""
    with open(_LOG[0], "a") as f:
        f.write(f"{Path(path).name}\n")
    return _REAL_CHECK(path, expected, what)


def _spy_whole_file_checks(monkeypatch, log: Path) -> None:
    """Record every whole-file checksum check, from whichever process runs it."""
    _LOG[:] = [log]
    monkeypatch.setattr(V, "check_file_sha256", _spy)


def test_a_split_first_verify_reads_the_golden_once(tmp_path, small_ranges, monkeypatch):
    out = _case(tmp_path)
    log = tmp_path / "checks.txt"
    _spy_whole_file_checks(monkeypatch, log)
    r = run_cli("verify", out, "-j", 2, "--rehash")
    assert r.exit_code == 0, r.output
    checked = sorted(log.read_text().split())
    assert checked == ["gradOutput.bin", "self.bin"]  # (the inputs are not read by the comparison)


def _flip(path: Path, at: int) -> None:
    """Change one byte in place, same size, its times put back (only the ctime tells)."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 1]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("element", [0, 5_000 * 7 + 123, N - 1])  # (first block, a middle one, the last, partial)
def test_a_golden_changed_in_any_block_is_caught(tmp_path, small_ranges, element):
    out = _case(tmp_path)
    case = out / "silu_backward-big"
    _flip(case / "gradInput.golden.bin", element * 4 + 1)
    for extra in ((), ("--rehash",)):
        r = run_cli("verify", out, "-j", 2, *extra, "--json", tmp_path / "v.json")
        assert r.exit_code == 2, r.output
        result = json.loads((tmp_path / "v.json").read_text())["cases"][0]
        assert result["status"] == "ERROR" and "golden changed since gen" in result["reason"], result["reason"]


def test_without_block_digests_the_golden_is_hashed_whole(tmp_path, small_ranges):
    """A manifest from before block digests (or any without them): the whole-file check still catches a change."""
    out = _case(tmp_path)
    case = out / "silu_backward-big"
    raw = manifest(case)
    for t in raw["tensors"]:
        t.pop("golden_blocks", None)
    raw["digest"] = M.digest(raw)
    (case / "case.json").write_text(json.dumps(raw))
    assert run_cli("verify", out, "-j", 2, "--rehash").exit_code == 0
    _flip(case / "gradInput.golden.bin", 5_000 * 9 * 4)
    r = run_cli("verify", out, "-j", 2)
    assert r.exit_code == 2 and "golden changed since gen" in r.output


@pytest.mark.parametrize("record", [{"elements": 5_000, "sha256": ["0" * 64]},  # (too few)
                                    {"elements": 5_000, "sha256": "0" * 64},
                                    {"elements": "5000", "sha256": []},
                                    {"elements": 0, "sha256": []},
                                    ["0" * 64]])
def test_a_malformed_block_record_is_one_line_naming_the_manifest(tmp_path, small_ranges, record):
    out = _case(tmp_path)
    case = out / "silu_backward-big"
    raw = manifest(case)
    next(t for t in raw["tensors"] if t["role"] == "output")["golden_blocks"] = record
    raw["digest"] = M.digest(raw)  # (re-signed by hand: the digest alone no longer tells)
    (case / "case.json").write_text(json.dumps(raw))
    r = run_cli("verify", out, "-j", 2, "--rehash")
    assert r.exit_code == 2
    assert "malformed manifest: tensor gradInput's 'golden_blocks'" in r.output and "Traceback" not in r.output


def test_a_large_case_with_a_null_output_records_blocks_for_the_others(tmp_path, small_ranges):
    """LayerNormBackward with gradInputOut a null pointer (outputMask false): gen writes no golden for it and
    records no blocks for it; the case gens and verifies, split across workers, first time and rehashed."""
    p = write_yaml(tmp_path, "op: aclnnLayerNormBackward\ncases:\n  - name: nogi\n    dtype: float32\n"
                             "    shape: [30, 1000]\n"
                             "    attributes: {normalizedShape: [1000], outputMask: [[false, true, true]]}\n"
                             "    tensors: {gradInputOut: {nullptr: true}}\n")
    out = tmp_path / "out"
    r = run_cli("gen", p, "-o", out, "-j", 2)
    assert r.exit_code == 0, r.output
    case = next(d for d in out.iterdir() if d.is_dir())
    tensors = {t["name"]: t for t in manifest(case)["tensors"]}
    assert tensors["gradInputOut"].get("null") and "golden_blocks" not in tensors["gradInputOut"]
    assert run_cli("emulate", out, "-j", 2).exit_code == 0
    for extra in ((), ("--rehash",)):
        r = run_cli("verify", out, "-j", 2, *extra)
        assert r.exit_code == 0, r.output


LN = ("op: aclnnLayerNormBackward\ncases:\n  - name: ln\n    dtype: float32\n    shape: [30, 1000]\n"
      "    attributes: {normalizedShape: [1000], outputMask: [[true, true, true]]}\n")


def test_every_file_of_a_split_case_with_several_outputs_is_checked(tmp_path, small_ranges):
    """LayerNormBackward split across workers: dx's golden by its blocks, dgamma's and dbeta's (not split) as
    their comparisons read them, the inputs (and any scale file) in units of their own. Each file gen
    recorded, changed in place with its times put back, is caught."""
    p = write_yaml(tmp_path, LN)
    out = tmp_path / "out"
    assert run_cli("gen", p, "-o", out, "-j", 2).exit_code == 0
    assert run_cli("emulate", out, "-j", 2).exit_code == 0
    case = next(d for d in out.iterdir() if d.is_dir())
    raw = manifest(case)
    assert "golden_blocks" in next(t for t in raw["tensors"] if t["name"] == "gradInputOut")
    files = [t["file"] for t in raw["tensors"] if t["role"] == "input" and not t.get("null")]
    files += [t[k] for t in raw["tensors"] if t["role"] == "output" for k in ("golden", "scale") if k in t]
    assert len(files) >= 6, files
    assert run_cli("verify", out, "-j", 2, "--rehash").exit_code == 0
    for name in files:
        good = (case / name).read_bytes()
        _flip(case / name, len(good) // 2)
        r = run_cli("verify", out, "-j", 2)
        assert r.exit_code == 2 and "changed since gen" in r.output, (name, r.output[-600:])
        (case / name).write_bytes(good)


def test_blocks_are_recorded_exactly_for_split_outputs_up_to_the_block_limit(small_ranges):
    """The edges of `wanted`: over SPLIT elements (not at it), up to MAX_BLOCKS blocks (not one element more),
    contiguous only."""
    from aclnn_cli.pipeline import blockdigests as B
    from aclnn_cli.tensor.layout import Layout
    top = pipeline.RANGE * B.MAX_BLOCKS
    for n, expected in ((pipeline.SPLIT, False), (pipeline.SPLIT + 1, True), (top, True), (top + 1, False)):
        assert B.wanted(Layout.contiguous((n,)), n) is expected, n
    strided = Layout((pipeline.SPLIT + 1,), (2,), 0, 2 * pipeline.SPLIT + 1)
    assert not B.wanted(strided, pipeline.SPLIT + 1)


@pytest.mark.parametrize("n", [1, 5_000, 5_001, 70_001, 5_000 * 64, 5_000 * 1000 + 3])
@pytest.mark.parametrize("jobs", [0, 1, 2, 8])
def test_ranges_cover_the_output_on_block_bounds(small_ranges, n, jobs):
    """Every range a split verify gives a worker starts on a block boundary (its golden blocks are whole),
    they cover [0, n) in order, and there are at most 8 per worker (each has a set-up cost)."""
    got = pipeline.ranges(n, jobs)
    assert got[0][0] == 0 and got[-1][1] == n and all(a[1] == b[0] for a, b in zip(got, got[1:]))
    assert all(s % 5_000 == 0 for s, _ in got)
    if jobs:
        assert len(got) <= max(8 * jobs, 1)
    else:
        assert len(got) == -(-n // 5_000)
