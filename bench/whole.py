"""Many small cases as a user meets them (issue 31): whole `aclnn-cli` processes, start-up and console output
included, against the naive scripts as whole processes too, paired and alternated.

Each pair runs ours and the naive script back to back, the order alternating from pair to pair (a machine that
slows during the run weighs on both sides alike); the ratio is taken pair by pair, and the report gives the
median ratio with its range. Ours is the command as typed: `aclnn-cli gen CASES.yaml -o OUT -j J`,
`aclnn-cli emulate OUT -j J`, `aclnn-cli verify OUT -j J` (its console summary read from a pipe, as CI does).
The naive side is bench/small_cases.py's loop (NumPy random, a float32 golden, `tofile`; `fromfile` and
`allclose`), started as `python -c` like any script.

    python bench/bench.py --whole-only [--whole-pairs 7] [--small-suites 2000x4096]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import ROOT
from small_cases import NAIVE_GEN, NAIVE_VERIFY, case_file

GOAL = 1.5  # issue 31: gen, emulate and verify of 2,000 small cases within 1.5x the naive loop, as whole processes
CLI = [sys.executable, "-m", "aclnn_cli"]


def _wall(args: list[str]) -> float:
    """One whole process's wall time (its output read from pipes, as a CI log reads it)."""
    os.sync()
    t = time.perf_counter()
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - t
    if proc.returncode:
        sys.exit(f"{' '.join(map(str, args[:4]))} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds


def alternate(mine: list, theirs: list, pairs: int, measure, reset=lambda args: None) -> list[tuple]:
    """`pairs` (ours, theirs) pairs of measure(args), the two run back to back, ours first in even pairs and theirs
    first in odd ones (a machine that slows during the run weighs on both sides alike). reset(args): before every
    process, with its args (its output directory removed)."""
    rows = []
    for i in range(pairs):
        got = {}
        for side in ((0, 1) if i % 2 == 0 else (1, 0)):
            reset((mine, theirs)[side])
            got[side] = measure((mine, theirs)[side])
        rows.append((got[0], got[1]))
    return rows


def summary(rows: list[tuple[float, float]]) -> dict:
    """Medians of each side's seconds, and of the ratio taken pair by pair, with its range."""
    ratios = sorted(a / b for a, b in rows)
    return {"ours": statistics.median(a for a, _ in rows), "naive": statistics.median(b for _, b in rows),
            "ratio": statistics.median(ratios), "low": ratios[0], "high": ratios[-1]}


def run_pairs(tmp: Path, count: int, n: int, jobs: int, pairs: int) -> dict:
    yaml_path = case_file(tmp, count, n)
    ours, naive = tmp / f"whole-ours-{count}x{n}", tmp / f"whole-naive-{count}x{n}"
    naive_gen = [sys.executable, "-c", NAIVE_GEN, str(count), str(n), str(naive)]
    steps = {
        "gen": ([*CLI, "gen", str(yaml_path), "-o", str(ours), "-j", str(jobs), "--force"], naive_gen),
        "emulate": ([*CLI, "emulate", str(ours), "-j", str(jobs)], naive_gen),
        "verify": ([*CLI, "verify", str(ours), "-j", str(jobs)], [sys.executable, "-c", NAIVE_VERIFY, str(ours)]),
    }
    shutil.rmtree(ours, ignore_errors=True)
    _wall(steps["gen"][0])  # (set-up: an OUT to emulate and verify; each timed gen rewrites it)
    _wall(steps["emulate"][0])
    result: dict = {"cases": count, "elements": n, "jobs": jobs, "pairs": pairs}
    for step, (mine, theirs) in steps.items():
        rows = alternate(mine, theirs, pairs, _wall, lambda args: shutil.rmtree(naive, ignore_errors=True))
        result[step] = summary(rows)
    shutil.rmtree(ours, ignore_errors=True)
    shutil.rmtree(naive, ignore_errors=True)
    yaml_path.unlink()
    return result


def report(r: dict) -> str:
    lines = [f"Whole processes, {r['cases']:,} cases x {r['elements']:,} elements, jobs={r['jobs']}, "
             f"{r['pairs']} alternated pairs (medians; the ratio pair by pair):", "",
             "| step | aclnn-cli | naive script | ratio (median, range) | goal | |", "|---|---:|---:|---:|---:|---|"]
    for step in ("gen", "emulate", "verify"):
        s = r[step]
        naive = "naive gen" if step != "verify" else "naive verify"
        lines.append(f"| `aclnn-cli {step}` | {s['ours']:.2f} s | {s['naive']:.2f} s ({naive}) | {s['ratio']:.2f}x "
                     f"({s['low']:.2f}-{s['high']:.2f}) | <= {GOAL:g}x | {'met' if s['ratio'] <= GOAL else '**not met**'} |")
    return "\n".join(lines)
