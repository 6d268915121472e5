"""The "many small cases" part of make bench (issue 9): per-case overhead, against naive scripts.

Suites: N SiluBackward float16 cases named c00000.. with seed i, all of one shape, in one YAML
file; 2,000 and 10,000 cases of [4096] (time per case should not grow with N) and 10,000 of [4]
(nothing but overhead). Each step runs in a fresh Python process (imports excluded, the
library's functions called directly, no CLI printing), `--repeat` times; medians, and the peak
RSS of the process and its workers (the largest over the repeats):

  gen      load_cases([yaml]) + generate_cases(cases, out, jobs=J) into an empty directory
           (loading the case file is included: a user pays it on every gen)
  re-gen   the same again, unchanged, no force: every case is skipped
  emulate  emulate_dirs(manifest.find_cases(out), jobs=J): the workers read the manifests, as the CLI does
  verify   verify_dirs(manifest.find_cases(out), Options(), jobs=J)

The naive script loops over the cases in one process (no per-case interpreter start, which
would only flatter us): gen seeds NumPy with i, draws x and dy, computes a float32 golden and
`tofile`s x, dy and golden into a per-case directory; verify finds the case directories, then
`np.fromfile`s our dump and golden and `np.allclose`s them. Before each timed step the parent
calls sync(), so one step's dirty pages are not written back during the next.

Targets: gen <= 2x naive gen; verify <= 1.5x naive verify (issue 20; issue 9 asked 2x); emulate <= 2x naive gen; unchanged
re-gen <= 0.5x naive gen; time per case at 10,000 cases <= 1.25x that at 2,000 (linear); peak
RSS at 10,000 cases <= 1.25x that at 2,000 (flat).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
from pathlib import Path

from bench import PRELUDE as _PRELUDE, run

# The shared prelude, plus the peak RSS of the parent and of its workers separately (which one
# grows with the number of cases is what the "flat RSS" target needs to know).
PRELUDE = _PRELUDE + """
def rss_parts():
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"rss_mib": max(me, kids), "rss_parent_mib": me, "rss_workers_mib": kids}
"""

DTYPE = "float16"
LINEAR = 1.25  # per-case time at 10,000 over 2,000; also the "flat RSS" allowance
SUITES = [(2000, 4096), (10000, 4096), (10000, 4)]  # (cases, elements per case)

# step -> (naive step it is compared with, target ratio ours / naive)
TARGETS = {
    "gen": ("naive_gen", 2.0),
    "regen": ("naive_gen", 0.5),
    "emulate": ("naive_gen", 2.0),
    "verify": ("naive_verify", 1.5),  # (issue 20: within 1.5x of the naive loop; issue 9 asked 2x)
}
LABELS = {"gen": "gen", "regen": "re-gen (unchanged)", "emulate": "emulate", "verify": "verify"}

OURS_GEN = PRELUDE + """
from aclnn_cli.cases.loader import load_cases
from aclnn_cli.golden.gen import generate_cases
yaml_path, out, jobs, expect = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
t = time.perf_counter()
cases = load_cases([yaml_path])
loaded = time.perf_counter()
results = generate_cases(cases, out, jobs=jobs)
seconds = time.perf_counter() - t
skipped = sum(r.skipped for r in results)
assert len(results) == len(cases) and skipped == (len(cases) if expect == "skip" else 0), (len(results), skipped)
print(json.dumps({"seconds": seconds, "load_seconds": loaded - t, **rss_parts()}))
"""

OURS_EMULATE = PRELUDE + """
from aclnn_cli.casedir import manifest as M
from aclnn_cli.casedir import dirs as casedirs
from aclnn_cli.device.emulate import emulate_dirs
out, jobs = Path(sys.argv[1]), int(sys.argv[2])
t = time.perf_counter()
dirs = casedirs.find_cases(out)  # the workers read the manifests (as `aclnn-cli emulate OUT` does)
loaded = time.perf_counter()
errors = emulate_dirs(dirs, jobs=jobs)
seconds = time.perf_counter() - t
assert not errors, errors[:3]
print(json.dumps({"seconds": seconds, "load_seconds": loaded - t, **rss_parts()}))
"""

OURS_VERIFY = PRELUDE + """
from aclnn_cli.casedir import manifest as M
from aclnn_cli.judge.verify import Options, verify_dirs
out, jobs = Path(sys.argv[1]), int(sys.argv[2])
t = time.perf_counter()
result = verify_dirs(casedirs.find_cases(out), Options(), jobs=jobs)
seconds = time.perf_counter() - t
bad = [(c.case_id, c.status, c.reason) for c in result.cases if c.status != "PASS"]
assert not bad, bad[:3]
print(json.dumps({"seconds": seconds, **rss_parts()}))
"""

# A typical gen_data.py, looped over the cases: NumPy random, float32 golden, tofile per case.
NAIVE_GEN = PRELUDE + """
count, n, out = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
t = time.perf_counter()
for i in range(count):
    np.random.seed(i)
    x = np.random.uniform(-8, 8, n).astype(np.float16)
    dy = np.random.normal(0, 1, n).astype(np.float16)
    xf, dyf = x.astype(np.float32), dy.astype(np.float32)
    s = 1 / (1 + np.exp(-xf))
    golden = (dyf * s * (1 + xf * (1 - s))).astype(np.float16)
    d = out / f"c{i:05d}"
    d.mkdir(parents=True, exist_ok=True)
    x.tofile(d / "x.bin"); dy.tofile(d / "dy.bin"); golden.tofile(d / "golden.bin")
print(json.dumps({"seconds": time.perf_counter() - t, "rss_mib": peak_mib()}))
"""

# A typical verify_result.py, looped over the case directories: np.fromfile both, np.allclose.
NAIVE_VERIFY = PRELUDE + """
root = Path(sys.argv[1])
t = time.perf_counter()
failed = 0
for d in sorted(p for p in root.iterdir() if p.is_dir()):
    a = np.fromfile(d / "gradInput.dump.bin", dtype=np.float16).astype(np.float32)
    g = np.fromfile(d / "gradInput.golden.bin", dtype=np.float16).astype(np.float32)
    failed += not np.allclose(a, g, rtol=1e-3, atol=1e-3)
print(json.dumps({"seconds": time.perf_counter() - t, "rss_mib": peak_mib(), "failed": failed}))
"""

PROFILE = PRELUDE + """
import cProfile, pstats
from aclnn_cli.casedir import manifest as M
from aclnn_cli.cases.loader import load_cases
from aclnn_cli.device.emulate import emulate_all
from aclnn_cli.golden.gen import generate_cases
from aclnn_cli.judge.verify import Options, verify_dirs
step, yaml_path, out, jobs, top = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
dump = sys.argv[6] if len(sys.argv) > 6 else None
def gen():
    generate_cases(load_cases([yaml_path]), out, jobs=jobs)
def emulate():
    manifests, broken = M.load_all(casedirs.find_cases(out))
    emulate_all(manifests, jobs=jobs)
def verify():
    verify_dirs(casedirs.find_cases(out), Options(), jobs=jobs)
fn = {"gen": gen, "regen": gen, "emulate": emulate, "verify": verify}[step]
prof = cProfile.Profile()
t = time.perf_counter()
prof.enable()
fn()
prof.disable()
seconds = time.perf_counter() - t
if dump:
    prof.dump_stats(dump)
print(f"{step}: {seconds:.2f} s under cProfile (jobs={jobs}), peak RSS {peak_mib():.0f} MiB")
for key in ("cumulative", "tottime"):
    print(f"\\n===== top {top} by {key} =====")
    pstats.Stats(prof, stream=sys.stdout).strip_dirs().sort_stats(key).print_stats(top)
"""


def case_file(tmp: Path, count: int, n: int) -> Path:
    """One YAML file of `count` cases c00000.. of shape [n], seed i."""
    p = tmp / f"small-{count}x{n}.yaml"
    lines = ["op: aclnnSiluBackward", f"defaults: {{dtype: {DTYPE}, shape: [{n}]}}", "cases:"]
    lines += [f"  - {{name: c{i:05d}, seed: {i}}}" for i in range(count)]
    p.write_text("\n".join(lines) + "\n")
    return p


def timed(script: str, *args) -> dict:
    """One fresh-process step, after flushing the previous steps' dirty pages (untimed)."""
    os.sync()
    return run(script, *args)


def median(rows: list[dict]) -> dict:
    out = {"seconds": statistics.median(r["seconds"] for r in rows), "rss_mib": max(r["rss_mib"] for r in rows),
           "runs": [r["seconds"] for r in rows]}
    for key in ("load_seconds",):
        if key in rows[0]:
            out[key] = statistics.median(r[key] for r in rows)
    for key in ("rss_parent_mib", "rss_workers_mib"):
        if key in rows[0]:
            out[key] = max(r[key] for r in rows)
    return out


def measure(tmp: Path, count: int, n: int, jobs: int, repeat: int) -> dict:
    yaml_path = case_file(tmp, count, n)
    ours, naive = tmp / f"ours-{count}x{n}", tmp / f"naive-{count}x{n}"
    steps: dict[str, list[dict]] = {k: [] for k in ("gen", "regen", "emulate", "verify", "naive_gen", "naive_verify")}
    for _ in range(repeat):
        shutil.rmtree(naive, ignore_errors=True)
        steps["naive_gen"].append(timed(NAIVE_GEN, count, n, naive))
        shutil.rmtree(ours, ignore_errors=True)
        steps["gen"].append(timed(OURS_GEN, yaml_path, ours, jobs, "write"))
        steps["regen"].append(timed(OURS_GEN, yaml_path, ours, jobs, "skip"))
        steps["emulate"].append(timed(OURS_EMULATE, ours, jobs))
        steps["verify"].append(timed(OURS_VERIFY, ours, jobs))
        steps["naive_verify"].append(timed(NAIVE_VERIFY, ours))
    shutil.rmtree(ours, ignore_errors=True)
    shutil.rmtree(naive, ignore_errors=True)
    yaml_path.unlink()
    return {"cases": count, "elements": n, "dtype": DTYPE, "jobs": jobs, "repeat": repeat,
            **{k: median(v) for k, v in steps.items()}}


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _s(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 0.1 else f"{seconds * 1e3:.0f} ms"


def _rss(r: dict) -> str:
    return f"{r['rss_mib']:.0f} MiB ({r['rss_parent_mib']:.0f} / {r['rss_workers_mib']:.0f})"


def table(rows: list[dict]) -> str:
    lines = ["| cases x elements | step | aclnn-cli | per case | naive | ratio (ours / naive) | target | | "
             "RSS ours (parent / workers) | RSS naive |", "|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        suite = f"{r['cases']:,} x {r['elements']:,}"
        for step, (against, target) in TARGETS.items():
            ours, naive = r[step], r[against]
            ratio = ours["seconds"] / naive["seconds"]
            lines.append(
                f"| {suite} | {LABELS[step]} | {_s(ours['seconds'])} | {ours['seconds'] / r['cases'] * 1e3:.2f} ms | "
                f"{_s(naive['seconds'])} ({against.replace('_', ' ')}) | {ratio:.2f}x | <= {target:g}x | "
                f"{_met(ratio <= target)} | {_rss(ours)} | {naive['rss_mib']:.0f} MiB |")
    return "\n".join(lines)


def scaling(rows: list[dict]) -> list[str]:
    """Linearity and flat RSS: each larger suite against the smaller one of the same shape."""
    out = []
    for big in rows:
        small = next((r for r in rows if r["elements"] == big["elements"] and r["cases"] < big["cases"]), None)
        if small is None:
            continue
        parts, ok = [], True
        for step in ("gen", "regen", "emulate", "verify"):
            per = lambda r: r[step]["seconds"] / r["cases"]
            f = per(big) / per(small)
            ok &= f <= LINEAR
            parts.append(f"{LABELS[step]} {per(small) * 1e3:.2f} -> {per(big) * 1e3:.2f} ms/case ({f:.2f}x)")
        rss = [(big[s]["rss_mib"], small[s]["rss_mib"]) for s in TARGETS]
        rss_ok = all(b <= LINEAR * s for b, s in rss)
        worst = max(b / s for b, s in rss)
        out.append(f"Linearity, {small['cases']:,} -> {big['cases']:,} cases of {big['elements']:,} elements "
                   f"(time per case, target <= {LINEAR:g}x): {'; '.join(parts)}: {_met(ok)}.")
        out.append(f"Peak RSS, {small['cases']:,} -> {big['cases']:,} cases: "
                   + ", ".join(f"{LABELS[s]} {sm:.0f} -> {b:.0f} MiB" for s, (b, sm) in zip(TARGETS, rss))
                   + f" (largest growth {worst:.2f}x, target <= {LINEAR:g}x): {_met(rss_ok)}.")
    return out


def report(rows: list[dict]) -> str:
    lines = [table(rows), ""]
    lines += scaling(rows)
    loads = ", ".join(f"{r['cases']:,} x {r['elements']:,}: {_s(r['gen']['load_seconds'])}" for r in rows)
    lines.append(f"(gen and re-gen include loading the case file: {loads}; emulate includes finding and loading "
                 f"the manifests, verify finding the cases. Times are medians of {rows[0]['repeat']} fresh "
                 f"processes with jobs={rows[0]['jobs']}; RSS is the largest peak over the repeats, workers included.)")
    return "\n".join(lines)


def parse_suite(text: str) -> tuple[int, int]:
    """'2000x4096' -> (2000, 4096)"""
    count, _, n = text.lower().partition("x")
    return int(count), int(n)


def run_all(tmp: Path, jobs: int, repeat: int, quick: bool, suites: list[tuple[int, int]] | None = None) -> list[dict]:
    rows = []
    for count, n in suites or (SUITES[:1] if quick else SUITES):
        rows.append(measure(tmp, count, n, jobs, repeat))
        print(f"measured {count:,} cases x {n:,} elements", file=sys.stderr, flush=True)
    return rows


def profile(tmp: Path, step: str, jobs: int, top: int = 25, dump: Path | None = None, count: int = 2000,
            n: int = 4096) -> None:
    """Run one step on the 2,000-case suite under cProfile; print the top functions.

    jobs=1 by default: with a process pool, cProfile sees only the parent waiting on its workers.
    """
    yaml_path = case_file(tmp, count, n)
    out = tmp / "profile-out"
    shutil.rmtree(out, ignore_errors=True)
    if step != "gen":
        run(OURS_GEN, yaml_path, out, 2, "write")  # setup, not profiled
        if step == "verify":
            run(OURS_EMULATE, out, 2)
    os.sync()
    args = [step, yaml_path, out, jobs, top] + ([dump] if dump else [])
    print(run_text(PROFILE, *args))
    shutil.rmtree(out, ignore_errors=True)


def run_text(script: str, *args) -> str:
    import subprocess
    from bench import ROOT
    proc = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        sys.exit(f"profile step failed:\n{proc.stderr[-3000:]}")
    return proc.stdout
