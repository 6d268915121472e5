"""verify at the speed of reading (issue 20): whole CLI processes against what no tool can beat.

Every row is the wall time of fresh processes, medians of --repeat runs, interleaved (the floor and verify side by
side, then the other yardsticks) so that a noisy machine moves both sides alike; verify / floor is the median of
each round's ratio:

- read floor: a Python process that imports numpy and reads the golden and the dump through a
  4 MiB buffer, nothing else. No tool that must read both files can be faster.
- naive verify: `np.fromfile` both, `np.allclose` (what a hand-written verify_result.py does).
- verify: `aclnn-cli verify CASE` as a user runs it, start-up included, on a case verified once
  before (the stat cache proves its golden and inputs unchanged: nothing but the golden and the
  dump is read).
- verify --rehash: every golden and input hashed again (what every verify did before the cache).
- first verify: the stat cache deleted before each run (a verify right after gen, or on a copied OUT).
- `aclnn-cli --help` against `python -c "import numpy"`.

    python bench/bench.py --reading-only [--sizes 67108864 268435456] [--repeat 3]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "aclnn_cli"]
GOALS = {"verify / floor": 2.0, "help / numpy": 1.5}  # issue 31: 64M verify within 2x the read floor, every dtype

READ_FLOOR = """
import sys
import numpy
buf = bytearray(4 << 20)
view = memoryview(buf)
for name in sys.argv[1:]:
    with open(name, "rb", buffering=0) as f:
        while f.readinto(view):
            pass
"""

NAIVE_VERIFY = """
import sys
import numpy as np
import ml_dtypes
dtype = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[sys.argv[3]]
a = np.fromfile(sys.argv[1], dtype=dtype).astype(np.float32)
g = np.fromfile(sys.argv[2], dtype=dtype).astype(np.float32)
np.allclose(a, g, rtol=1e-3, atol=1e-5)
"""


def wall(args: list[str], before=None) -> float:
    """Seconds of one fresh process (exit 0 required). Dirty pages are written back first (untimed), as
    bench/whole.py does: a case just generated on disk left a gigabyte to write, whose writeback took a core from
    verify's two workers and not from the one-process floor (3.0x the floor on disk, 1.9x on tmpfs, that day)."""
    before and before()
    os.sync()
    t = time.perf_counter()
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if proc.returncode:
        sys.exit(f"benchmark step failed: {' '.join(args)}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return seconds


def _case(tmp: Path, n: int, dtype: str) -> Path:
    out = tmp / f"reading-{dtype}-{n}"
    yaml_path = tmp / f"reading-{dtype}-{n}.yaml"
    yaml_path.write_text(textwrap.dedent(f"""
        op: aclnnSiluBackward
        cases:
          - {{name: bench, dtype: {dtype}, shape: [{n}], seed: 1}}
    """))
    wall([*CLI, "gen", str(yaml_path), "-o", str(out)])
    wall([*CLI, "emulate", str(out)])
    return out / "silu_backward-bench"


def measure_case(tmp: Path, n: int, dtype: str, repeat: int) -> dict:
    case = _case(tmp, n, dtype)
    golden, dump = case / "gradInput.golden.bin", case / "gradInput.dump.bin"
    cache = case / ".stat-cache.json"
    drop = lambda: cache.unlink(missing_ok=True)
    verify = [*CLI, "verify", str(case)]
    time.sleep(2.1)  # (records taken within 2 s of a file's last write are racily clean: see statcache.py)
    wall(verify)  # the first verify renews the record: from now on it proves the files unchanged
    # verify right after the floor, each round: the pair meets the machine alike. (After the naive verify, which
    # takes and frees 1.5 GiB, verify's times had swung by half between runs of the same code.)
    steps = {"read floor": lambda: wall([sys.executable, "-c", READ_FLOOR, str(golden), str(dump)]),
             "verify": lambda: wall(verify),
             "naive verify": lambda: wall([sys.executable, "-c", NAIVE_VERIFY, str(dump), str(golden), dtype]),
             "verify --rehash": lambda: wall([*verify, "--rehash"]),
             "first verify": lambda: wall(verify, before=drop)}
    times: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(repeat):
        for name, step in steps.items():
            times[name].append(step())
        wall(verify)  # (leave a renewed record for the next round's "verify")
    subprocess.run(["rm", "-rf", str(case.parent)])
    ratio = statistics.median(v / f for v, f in zip(times["verify"], times["read floor"]))  # (pair by pair)
    return {"n": n, "dtype": dtype, "ratio": ratio, **{k: statistics.median(v) for k, v in times.items()}}


def measure_start(repeat: int) -> dict:
    times: dict[str, list[float]] = {"help": [], "numpy": []}
    for _ in range(repeat * 3):
        times["help"].append(wall([*CLI, "--help"]))
        times["numpy"].append(wall([sys.executable, "-c", "import numpy"]))
    return {k: statistics.median(v) for k, v in times.items()}


def report(rows: list[dict], start: dict) -> str:
    lines = ["| elements | dtype | read floor | verify | verify / floor | --rehash | first verify | naive verify |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ratio = r.get("ratio", r["verify"] / r["read floor"])
        met = "met" if ratio <= GOALS["verify / floor"] else "**not met**"
        lines.append(f"| {r['n']:,} | {r['dtype']} | {r['read floor']:.2f} s | {r['verify']:.2f} s | "
                     f"{ratio:.2f}x ({met}) | {r['verify --rehash']:.2f} s | {r['first verify']:.2f} s | "
                     f"{r['naive verify']:.2f} s |")
    ratio = start["help"] / start["numpy"]
    lines.append("")
    lines.append(f"`aclnn-cli --help` {start['help']:.3f} s, `python -c \"import numpy\"` {start['numpy']:.3f} s: "
                 f"{ratio:.2f}x (goal <= {GOALS['help / numpy']}x: {'met' if ratio <= GOALS['help / numpy'] else 'not met'})")
    return "\n".join(lines)


def run_all(tmp: Path, sizes: list[int], dtypes: list[str], repeat: int) -> dict:
    rows = []
    for n in sizes:
        for dtype in dtypes:
            rows.append(measure_case(tmp, n, dtype, repeat))
            print(f"measured reading {n:,} {dtype}", file=sys.stderr, flush=True)
    return {"rows": rows, "start": measure_start(repeat), "load": os.getloadavg()}


if __name__ == "__main__":
    import tempfile
    with tempfile.TemporaryDirectory(prefix="aclnn-reading-") as d:
        result = run_all(Path(d), [int(x) for x in sys.argv[1:]] or [1 << 26], ["float32", "float16", "bfloat16"], 3)
        print(report(result["rows"], result["start"]))
        print(json.dumps(result["load"]))
