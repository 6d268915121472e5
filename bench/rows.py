"""Reductions at scale: one 8192 x 8192 float32 SoftmaxBackward case (rows, issue 19) and one BatchNormBackward
training case [64, 256, 56, 56] float32 (channels, issue 27), gen + verify, each against a naive NumPy script
doing the same job (generate the inputs, a float32 golden, write it, read it back with the dump, np.allclose).

Fresh processes, medians of --repeat runs, interleaved. Peak memory is each process's max RSS
(getrusage of the child), the tool's goal being flat memory: under 1 GiB for a case whose three
float32 tensors are 256 MiB each.

    python bench/bench.py --rows-only [--rows-shape 8192 8192] [--repeat 3]
    python bench/bench.py --channels-only [--channels-shape 64 256 56 56]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "aclnn_cli"]
GOALS = {"gen + verify / naive": 2.0, "peak RSS MiB": 1024}

NAIVE = """
import sys
import numpy as np
rows, cols, where = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
x = rng.standard_normal((rows, cols), dtype=np.float32)
y = np.exp(x - x.max(axis=1, keepdims=True))
y /= y.sum(axis=1, keepdims=True)
dy = rng.standard_normal((rows, cols), dtype=np.float32)
golden = y * (dy - (y * dy).sum(axis=1, keepdims=True))
golden.tofile(where + "/golden.bin")
y.tofile(where + "/output.bin")
dy.tofile(where + "/dy.bin")
g = np.fromfile(where + "/golden.bin", dtype=np.float32)
a = np.fromfile(where + "/golden.bin", dtype=np.float32)
assert np.allclose(a, g, rtol=1.3e-6, atol=1e-5)
"""

CASES = """\
op: aclnnSoftmaxBackward
cases:
  - name: bench
    dtype: float32
    shape: [{shape}]
    attributes: {{dim: -1}}
"""

NAIVE_CHANNELS = """
import sys
import numpy as np
shape, where = [int(v) for v in sys.argv[1:-1]], sys.argv[-1]
rng = np.random.default_rng(0)
dy = rng.standard_normal(shape, dtype=np.float32)
x = rng.standard_normal(shape, dtype=np.float32)
c = shape[1]
w = rng.uniform(-2, 2, c).astype(np.float32)
mean = rng.uniform(-0.25, 0.25, c).astype(np.float32)
rstd = rng.uniform(0.5, 2, c).astype(np.float32)
axes = (0,) + tuple(range(2, len(shape)))
per = (1, c) + (1,) * (len(shape) - 2)
xh = (x - mean.reshape(per)) * rstd.reshape(per)
gb = dy.sum(axis=axes)
gw = (dy * xh).sum(axis=axes)
m = dy.size // c
golden = (w * rstd).reshape(per) * (dy - gb.reshape(per) / m - xh * gw.reshape(per) / m)
for name, a in (("dy", dy), ("x", x), ("golden", golden), ("gw", gw), ("gb", gb)):
    a.tofile(where + "/" + name + ".bin")
g = np.fromfile(where + "/golden.bin", dtype=np.float32)
a = np.fromfile(where + "/golden.bin", dtype=np.float32)
assert np.allclose(a, g, rtol=1.3e-6, atol=1e-5)
"""

CHANNEL_CASES = """\
op: aclnnBatchNormBackward
cases:
  - name: bench
    dtype: float32
    product: "950"
    shape: [{shape}]
"""

SCENARIOS = {"rows": ("SoftmaxBackward", CASES, NAIVE), "channels": ("BatchNormBackward training", CHANNEL_CASES, NAIVE_CHANNELS)}


def run_all(tmp: Path, rows: int, cols: int, repeat: int, scenario: str = "rows", shape: list[int] | None = None) -> dict:
    label, template, naive = SCENARIOS[scenario]
    shape = list(shape or [rows, cols])
    cases = tmp / f"{scenario}.yaml"
    cases.write_text(template.format(shape=", ".join(map(str, shape))))
    naive_dir, out = tmp / "naive", tmp / "rows-out"
    times: dict[str, list[float]] = {"gen": [], "emulate": [], "verify": [], "naive": []}
    peaks: dict[str, float] = {}
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        for step, args in (("gen", [*CLI, "gen", str(cases), "-o", str(out), "--jobs", "1"]),
                           ("emulate", [*CLI, "emulate", str(out), "--jobs", "1"]),
                           ("verify", [*CLI, "verify", str(out), "--jobs", "1"])):
            seconds, peak = _isolated(args)
            times[step].append(seconds)
            peaks[step] = max(peaks.get(step, 0.0), peak)
        shutil.rmtree(naive_dir, ignore_errors=True)
        naive_dir.mkdir()
        seconds, peak = _isolated([sys.executable, "-c", naive, *map(str, shape), str(naive_dir)])
        times["naive"].append(seconds)
        peaks["naive"] = max(peaks.get("naive", 0.0), peak)
    med = {k: statistics.median(v) for k, v in times.items()}
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(naive_dir, ignore_errors=True)
    return {"op": label, "shape": shape, "seconds": med, "peak_rss_mib": peaks,
            "ratio": (med["gen"] + med["verify"]) / med["naive"]}


def _isolated(args: list[str]) -> tuple[float, float]:
    """Run in a fresh Python that reports its own child's peak RSS (RUSAGE_CHILDREN keeps the maximum of
    every child this process ever had, so each measurement gets a process of its own)."""
    probe = ("import resource,subprocess,sys,time,json;t=time.perf_counter();"
             "p=subprocess.run(sys.argv[1:],capture_output=True,text=True);"
             "print(json.dumps([p.returncode,time.perf_counter()-t,"
             "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024,p.stdout[-2000:]+p.stderr[-2000:]]))")
    proc = subprocess.run([sys.executable, "-c", probe, *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    code, seconds, peak, text = json.loads(proc.stdout)
    if code != 0:
        raise SystemExit(f"{' '.join(args)} failed ({code}):\n{text}")
    return seconds, peak


def report(r: dict) -> str:
    s, p = r["seconds"], r["peak_rss_mib"]
    rows = [("aclnn-cli gen", s["gen"], p["gen"]), ("aclnn-cli emulate", s["emulate"], p["emulate"]),
            ("aclnn-cli verify", s["verify"], p["verify"]), ("naive NumPy (fp32 golden, allclose)", s["naive"], p["naive"])]
    lines = [f"{r.get('op', 'SoftmaxBackward')} {' x '.join(map(str, r['shape']))} float32 (fresh processes, medians):", "",
             f"{'step':38s} {'seconds':>8s} {'peak RSS MiB':>13s}"]
    lines += [f"{name:38s} {sec:8.2f} {mib:13.0f}" for name, sec, mib in rows]
    lines += ["", f"gen + verify / naive: {r['ratio']:.2f}x (goal <= {GOALS['gen + verify / naive']:g}x); "
                  f"largest peak RSS of ours: {max(p['gen'], p['emulate'], p['verify']):.0f} MiB "
                  f"(goal < {GOALS['peak RSS MiB']} MiB)"]
    return "\n".join(lines)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(report(run_all(Path(tmp), int(sys.argv[1]) if len(sys.argv) > 1 else 8192,
                             int(sys.argv[2]) if len(sys.argv) > 2 else 8192, 1)))
