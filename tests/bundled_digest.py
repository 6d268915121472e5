"""Per-case digests of the bundled suite's bytes after gen, emulate and verify.

The refactor guard: `tests/bundled-digests.txt` was recorded from the code before a
restructuring, and test_bundled_bytes.py checks that gen --jobs 1 and --jobs 2, emulate and verify
still write every byte the same. It compares the tool with an earlier version of itself (plumbing,
not correctness: the goldens' correctness is tested against oracles elsewhere).

    python tests/bundled_digest.py --write   # re-record, only when a change alters bytes on purpose

Record from a clean checkout of the commit (a git worktree), never from a tree with someone's
uncommitted edits. Cases added later (a new op, a new case) are not in the record and are ignored.

Paths that depend on where the tool and the output live (case.json's source, verify's repro and
path) are written as <CASES> and <OUT> before hashing (in every file but the .bin storage, which holds numbers);
so is case.json's seal (the sha256 of its text, source path included), once checked to hold.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from pathlib import Path

REFERENCE = Path(__file__).parent / "bundled-digests.txt"


def _normalised(data: bytes, out_root: Path, cases_dir: Path) -> bytes:
    return data.replace(str(cases_dir).encode(), b"<CASES>").replace(str(out_root).encode(), b"<OUT>")


def case_digests(out_root: Path) -> dict[str, str]:
    """case id -> sha256 over (file name, file bytes) of every file in the case's folder, plus its
    verify JSON entry."""
    import aclnn_cli
    from aclnn_cli.files.statcache import CACHE_FILE
    cases_dir = Path(aclnn_cli.__file__).parent / "cases"
    verdicts = {}
    report = out_root / "verify.json"
    if report.exists():
        for c in json.loads(report.read_text())["cases"]:
            verdicts[c["case_id"]] = _normalised(json.dumps(c, sort_keys=True).encode(), out_root, cases_dir)
    digests = {}
    for case_dir in sorted(p for p in out_root.iterdir() if p.is_dir()):
        h = hashlib.sha256()
        for f in sorted(case_dir.iterdir()):
            if f.name == CACHE_FILE:  # (stat data of this machine's files: a cache, not output)
                continue
            data = f.read_bytes()
            if f.name == "case.json":  # (its seal hashes the paths: checked, then written as <SEAL>)
                from aclnn_cli.casedir import manifest_text
                assert manifest_text.sealed_json(data) is not None, f"{case_dir.name}: the manifest's seal does not hold"
                data = data[:-(64 + 4)] + b"<SEAL>" + data[-4:]
            if not f.name.endswith(".bin"):  # (a .bin's bytes are numbers: searching them for a path took a fifth)
                data = _normalised(data, out_root, cases_dir)
            h.update(f.name.encode() + b"\0")  # (three updates, one digest: no copy of a large file's bytes)
            h.update(data)
            h.update(b"\0")
        h.update(verdicts.get(case_dir.name, b"-"))
        digests[case_dir.name] = h.hexdigest()
    return digests


def produce(out_root: Path, jobs: int = 1, gen: bool = True, digests: bool = True) -> dict[str, str]:
    """gen (unless not `gen`: out_root holds the suite generated), emulate and verify the bundled suite into
    out_root; its digests (unless not `digests`: {})."""
    from click.testing import CliRunner
    from aclnn_cli.cli.main import main
    steps = [["gen", "-o", out_root, "--jobs", jobs]] if gen else []
    for args in (*steps, ["emulate", out_root, "--jobs", jobs],
                 ["verify", out_root, "--jobs", jobs, "--json", out_root / "verify.json"]):
        r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
        assert r.exit_code == 0, r.output
    return case_digests(out_root) if digests else {}


X86 = platform.machine() in ("x86_64", "AMD64")


def limited_to(features: str, blas: str) -> dict | None:
    """The environment that limits NumPy's dispatch as a CPU with only `features` would have it
    (NPY_ENABLE_CPU_FEATURES), and OpenBLAS's kernels likewise (np.dot sums squares for the metrics); None where
    this CPU lacks them (NumPy refuses to start with features the CPU does not have)."""
    import numpy as np

    if not np._core._multiarray_umath.__cpu_features__.get(features):
        return None
    return {"NPY_ENABLE_CPU_FEATURES": features, "OPENBLAS_CORETYPE": blas}


def limited_to_baseline() -> dict:
    """The oldest x86-64 machine the record must hold on (X86_V2: SSE4.2 and POPCNT, no AVX; baseline SSE BLAS
    kernels) on an x86 CPU; elsewhere (ARM) the machine as it is ({})."""
    return (limited_to("X86_V2", "Prescott") if X86 else None) or {}


def limited_to_avx2() -> dict:
    """The machine of issue 31's finding 18 (AVX2 and FMA3, no AVX-512: X86_V3, Haswell's BLAS) on an x86 CPU that has
    them; elsewhere the machine as it is ({})."""
    return (limited_to("X86_V3", "Haswell") if X86 else None) or {}


def read_reference() -> dict[str, str]:
    return dict(line.split() for line in REFERENCE.read_text().splitlines() if line.strip())


if __name__ == "__main__":
    import tempfile
    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        found = produce(Path(tmp) / "out")
    REFERENCE.write_text("".join(f"{k} {v}\n" for k, v in found.items()))
    print(f"{len(found)} case digests written to {REFERENCE}")
