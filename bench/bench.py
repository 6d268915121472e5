"""make bench: aclnn-cli's gen and verify against naive per-op scripts, same data, same run.

Every measurement runs in a fresh Python process (imports excluded from the time, first-touch
memory included, as in a real CLI run) and reports seconds and peak RSS (the process and its
workers). Ratios compare runs made minutes apart on the same machine; the machine is shared
and noisy, so each pair is measured --repeat times and the medians are compared.

    python bench/bench.py                 # 1M, 16M, 256M x fp32/fp16/bf16, then the 1G-element RSS check
    python bench/bench.py --quick         # 1M and 16M only, no 1G check; small cases: 2,000 only
    python bench/bench.py --small-only    # only the many-small-cases part (bench/small_cases.py)
    python bench/bench.py --small-only --quick             # only the 2,000-case suite
    python bench/bench.py --profile-small gen|regen|emulate|verify   # one step on 2,000 cases under cProfile

`python bench/bench.py --contraction-only` times a 4096 x 4096 x 4096 float16 matmul gradient pair and a ResNet-50
layer's ConvolutionBackward, gen and verify as whole processes against naive NumPy scripts (bench/contraction.py).

`python bench/bench.py --report-only` times `aclnn-cli report` of a 100,000-case run against json.load of its
results and a naive merge, as whole processes (bench/merge.py).

After the large-tensor table, the "many small cases" part (issue 9) times gen, an unchanged
re-gen, emulate and verify of 2,000 and 10,000 4,096-element float16 SiluBackward cases (and
10,000 of 4 elements) against naive per-case scripts; see bench/small_cases.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = """
import json, resource, sys, time
from pathlib import Path
import numpy as np
def peak_mib():
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(me, kids) / 1024
"""

OURS_GEN = PRELUDE + """
from aclnn_cli.cases.loader import load_cases
from aclnn_cli.golden.gen import generate_cases
cases = load_cases([sys.argv[1]])
t = time.perf_counter()
generate_cases(cases, Path(sys.argv[2]), jobs=int(sys.argv[3]), force=True)
print(json.dumps({"seconds": time.perf_counter() - t, "rss_mib": peak_mib()}))
"""

OURS_EMULATE = PRELUDE + """
from aclnn_cli.casedir import manifest as M
from aclnn_cli.casedir import dirs as casedirs
from aclnn_cli.device.emulate import emulate_case
from aclnn_cli.pipeline.parallel import Runner
with Runner(int(sys.argv[2])) as run:
    for d in casedirs.find_cases(Path(sys.argv[1])):
        emulate_case(M.load(d), run=run)
print(json.dumps({"seconds": 0, "rss_mib": peak_mib()}))
"""

OURS_VERIFY = PRELUDE + """
from aclnn_cli.casedir import manifest as M
from aclnn_cli.judge.verify import Options, verify_dirs
dirs = casedirs.find_cases(Path(sys.argv[1]))
t = time.perf_counter()
run = verify_dirs(dirs, Options(), jobs=int(sys.argv[2]))
seconds = time.perf_counter() - t
assert all(c.status == "PASS" for c in run.cases), [(c.case_id, c.reason) for c in run.cases]
print(json.dumps({"seconds": seconds, "rss_mib": peak_mib()}))
"""

# What a typical hand-written gen_data.py does: NumPy random, float32 golden, tofile.
NAIVE_GEN = PRELUDE + """
import ml_dtypes
n, dtype, out = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
np_dtype = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dtype]
t = time.perf_counter()
np.random.seed(1)
x = np.random.uniform(-8, 8, n).astype(np_dtype)
dy = np.random.normal(0, 1, n).astype(np_dtype)
xf, dyf = x.astype(np.float32), dy.astype(np.float32)
s = 1 / (1 + np.exp(-xf))
golden = (dyf * s * (1 + xf * (1 - s))).astype(np_dtype)
out.mkdir(parents=True, exist_ok=True)
x.tofile(out / "x.bin"); dy.tofile(out / "dy.bin"); golden.tofile(out / "golden.bin")
print(json.dumps({"seconds": time.perf_counter() - t, "rss_mib": peak_mib()}))
"""

# What a typical verify_result.py does: np.fromfile both, np.allclose.
NAIVE_VERIFY = PRELUDE + """
import ml_dtypes
dtype = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[sys.argv[3]]
t = time.perf_counter()
a = np.fromfile(sys.argv[1], dtype=dtype).astype(np.float32)
g = np.fromfile(sys.argv[2], dtype=dtype).astype(np.float32)
ok = np.allclose(a, g, rtol=1e-3, atol=1e-5)
print(json.dumps({"seconds": time.perf_counter() - t, "rss_mib": peak_mib()}))
"""


def run(script: str, *args) -> dict:
    proc = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        sys.exit(f"benchmark step failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median(rows: list[dict]) -> dict:
    return {"seconds": statistics.median(r["seconds"] for r in rows), "rss_mib": max(r["rss_mib"] for r in rows)}


def case_file(tmp: Path, n: int, dtype: str) -> Path:
    p = tmp / f"bench-{dtype}-{n}.yaml"
    p.write_text(textwrap.dedent(f"""
        op: aclnnSiluBackward
        cases:
          - {{name: bench, dtype: {dtype}, shape: [{n}], seed: 1}}
    """))
    return p


def measure(tmp: Path, n: int, dtype: str, jobs: int, repeat: int) -> dict:
    yaml_path, out, naive_out = case_file(tmp, n, dtype), tmp / "ours", tmp / "naive"
    gen, ngen, ver, nver = [], [], [], []
    for _ in range(repeat):
        ngen.append(run(NAIVE_GEN, n, dtype, naive_out))
        gen.append(run(OURS_GEN, yaml_path, out, jobs))
    run(OURS_EMULATE, out, jobs)
    case = out / "silu_backward-bench"
    for _ in range(repeat):
        nver.append(run(NAIVE_VERIFY, case / "gradInput.dump.bin", case / "gradInput.golden.bin", dtype))
        ver.append(run(OURS_VERIFY, out, jobs))
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(naive_out, ignore_errors=True)
    return {"n": n, "dtype": dtype, "gen": median(gen), "naive_gen": median(ngen), "verify": median(ver),
            "naive_verify": median(nver)}


def rss_check(tmp: Path, jobs: int) -> dict:
    """Verify a 1G-element float32 case (4 GiB output); peak RSS must stay under 1 GiB."""
    n = 1 << 30
    out = tmp / "huge"
    gen = run(OURS_GEN, case_file(tmp, n, "float32"), out, jobs)
    run(OURS_EMULATE, out, jobs)
    ver = run(OURS_VERIFY, out, jobs)
    shutil.rmtree(out, ignore_errors=True)
    return {"n": n, "gen": gen, "verify": ver}


def table(rows: list[dict]) -> str:
    lines = ["| elements | dtype | gen (ours) | naive gen | gen / naive | verify (ours) | naive verify | naive / verify | "
             "gen RSS | verify RSS |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        n = r["n"]
        rate = lambda s: f"{n / s / 1e6:.0f} M/s"
        lines.append(
            f"| {n:,} | {r['dtype']} | {r['gen']['seconds']:.2f} s ({rate(r['gen']['seconds'])}) | "
            f"{r['naive_gen']['seconds']:.2f} s ({rate(r['naive_gen']['seconds'])}) | "
            f"{r['gen']['seconds'] / r['naive_gen']['seconds']:.2f}x | "
            f"{r['verify']['seconds']:.3f} s ({rate(r['verify']['seconds'])}) | "
            f"{r['naive_verify']['seconds']:.3f} s ({rate(r['naive_verify']['seconds'])}) | "
            f"{r['naive_verify']['seconds'] / r['verify']['seconds']:.2f}x | "
            f"{r['gen']['rss_mib']:.0f} MiB | {r['verify']['rss_mib']:.0f} MiB |")
    return "\n".join(lines)


def compiled() -> None:
    """The package's bytecode, and its dependencies' (make installs them uncompiled), compiled before anything is
    timed, as pip compiles them when a user installs: where PYTHONDONTWRITEBYTECODE is set (or a module changed
    since its last run), every aclnn-cli process timed would otherwise compile its modules from source, 0.1-0.2 s
    of a 0.5 s command that no user pays."""
    import compileall
    import sysconfig

    compileall.compile_dir(ROOT / "aclnn_cli", quiet=1)
    for place in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        compileall.compile_dir(place, quiet=1, workers=0)


def code_version() -> str:
    """The commit under test, and '+dirty-<hash of the diff>' if the work tree's aclnn_cli differs from it
    (the benchmark imports the package from the work tree, where others may be editing)."""
    git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True, cwd=ROOT).stdout
    head = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    diff = git("diff", "HEAD", "--", "aclnn_cli")
    return head + (f"+dirty-{hashlib.sha256(diff.encode()).hexdigest()[:8]}" if diff else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="1M and 16M only, skip the 1G-element RSS check; small cases: the 2,000-case suite only")
    ap.add_argument("--sizes", type=int, nargs="*", help="element counts (default 1M 16M 256M)")
    ap.add_argument("--dtypes", nargs="*", default=["float32", "float16", "bfloat16"])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tmp", type=Path, default=None, help="scratch directory (needs ~25 GiB for the 1G check)")
    ap.add_argument("--json", type=Path, help="also write the raw numbers here")
    ap.add_argument("--small-only", action="store_true", help="only the many-small-cases benchmark")
    ap.add_argument("--whole-only", action="store_true",
                    help="only the whole-process pairs of 2,000 small cases (bench/whole.py)")
    ap.add_argument("--no-whole", action="store_true", help="skip the whole-process pairs")
    ap.add_argument("--whole-pairs", type=int, default=7, help="alternated pairs per step for --whole (default 7)")
    ap.add_argument("--no-small", action="store_true", help="skip the many-small-cases benchmark")
    ap.add_argument("--report-only", action="store_true",
                    help="only `aclnn-cli report` of a large run against json.load and a naive merge (bench/merge.py)")
    ap.add_argument("--no-report", action="store_true", help="skip the report of a large run")
    ap.add_argument("--report-cases", type=int, default=100_000, help="cases in the results file for it")
    ap.add_argument("--report-pairs", type=int, default=5, help="alternated pairs per yardstick for it (default 5)")
    ap.add_argument("--contraction-only", action="store_true",
                    help="only the matmul gradient pair and ConvolutionBackward at scale (bench/contraction.py)")
    ap.add_argument("--no-contraction", action="store_true", help="skip the contractions at scale")
    ap.add_argument("--contraction-rows", nargs="+", choices=["matmul", "conv"], default=["matmul", "conv"])
    ap.add_argument("--contraction-pairs", type=int, default=3, help="alternated pairs per step for it (default 3)")
    ap.add_argument("--matmul-size", type=int, default=4096, help="M = K = N of the matmul pair (default 4096)")
    ap.add_argument("--conv-shape", type=int, nargs=4, default=[32, 256, 56, 56], metavar=("N", "C", "H", "W"))
    ap.add_argument("--conv-fallback-batch", type=int, default=4,
                    help="the conv row's batch where aclnn-cli refuses --conv-shape (0: none; default 4)")
    ap.add_argument("--reading-only", action="store_true",
                    help="only verify against the read floor, --rehash, a first verify, and --help (bench/reading.py)")
    ap.add_argument("--no-reading", action="store_true", help="skip the speed-of-reading part")
    ap.add_argument("--rows-only", action="store_true", help="only the 8192 x 8192 SoftmaxBackward (bench/rows.py)")
    ap.add_argument("--no-rows", action="store_true", help="skip the SoftmaxBackward reduction at scale")
    ap.add_argument("--rows-shape", type=int, nargs=2, default=[8192, 8192], metavar=("ROWS", "COLS"))
    ap.add_argument("--channels-only", action="store_true",
                    help="only the BatchNormBackward [64, 256, 56, 56] training case (bench/rows.py)")
    ap.add_argument("--no-channels", action="store_true", help="skip the BatchNormBackward reduction at scale")
    ap.add_argument("--channels-shape", type=int, nargs="+", default=[64, 256, 56, 56], metavar="DIM")
    ap.add_argument("--reading-sizes", type=int, nargs="*", help="element counts for it (default 64M 256M; --quick 64M)")
    ap.add_argument("--small-suites", nargs="*", metavar="CASESxELEMENTS",
                    help="small-case suites to run, e.g. 2000x4096 10000x4 (default 2000x4096 10000x4096 10000x4; "
                         "--quick: 2000x4096)")
    ap.add_argument("--profile-small", choices=["gen", "regen", "emulate", "verify"],
                    help="run one step on the 2,000-case suite under cProfile and print the top functions, "
                         "by cumulative and by own time (nothing else runs)")
    ap.add_argument("--profile-jobs", type=int, default=1,
                    help="jobs for --profile-small (default 1: with a pool, cProfile sees only the parent waiting)")
    ap.add_argument("--profile-top", type=int, default=25, help="functions listed per sort order")
    ap.add_argument("--profile-out", type=Path, help="also save the raw cProfile stats here (for snakeviz, pstats)")
    args = ap.parse_args()
    import reading
    import rows as rows_bench
    import small_cases
    if args.tmp:
        args.tmp.mkdir(parents=True, exist_ok=True)
    if args.profile_small:
        with tempfile.TemporaryDirectory(prefix="aclnn-profile-", dir=args.tmp) as tmp:
            small_cases.profile(Path(tmp), args.profile_small, args.profile_jobs, args.profile_top,
                                args.profile_out and args.profile_out.resolve())
        return
    sizes = args.sizes or ([1 << 20, 1 << 24] if args.quick else [1 << 20, 1 << 24, 1 << 28])
    result: dict = {"code": code_version()}
    print(f"aclnn-cli under test: {result['code']}", file=sys.stderr, flush=True)
    compiled()
    with tempfile.TemporaryDirectory(prefix="aclnn-bench-", dir=args.tmp) as tmp:
        failed = False
        if args.whole_only or not (args.no_whole or args.reading_only or args.small_only or args.report_only
                                   or args.contraction_only):
            import whole

            count, n = small_cases.parse_suite(args.small_suites[0]) if args.small_suites else small_cases.SUITES[0]
            result["whole"] = whole.run_pairs(Path(tmp), count, n, args.jobs, args.whole_pairs)
            print(whole.report(result["whole"]) + "\n", flush=True)
            if args.whole_only:
                print(json.dumps(result["whole"]))
                return
        if args.report_only or not (args.no_report or args.reading_only or args.small_only or args.rows_only
                                    or args.channels_only or args.contraction_only):
            import merge

            result["report"] = merge.run_pairs(Path(tmp), args.report_cases, args.report_pairs)
            print(merge.report(result["report"]) + "\n", flush=True)
            if args.report_only:
                print(json.dumps(result["report"]))
                return
        if args.contraction_only or not (args.no_contraction or args.reading_only or args.small_only or args.rows_only
                                         or args.channels_only):
            import contraction

            result["contraction"] = contraction.run_all(Path(tmp), args.contraction_rows, args.contraction_pairs,
                                                        args.matmul_size, args.conv_shape, args.conv_fallback_batch)
            print(contraction.report(result["contraction"]) + "\n", flush=True)
            if args.contraction_only:
                print(json.dumps(result["contraction"]))
                return
        if not args.small_only and not args.reading_only and not args.rows_only and not args.no_channels:
            result["channels"] = rows_bench.run_all(Path(tmp), 0, 0, args.repeat, "channels", args.channels_shape)
            print(rows_bench.report(result["channels"]) + "\n", flush=True)
        if args.channels_only:
            print(json.dumps(result["channels"]))
            return
        if not args.small_only and not args.reading_only and not args.no_rows:
            result["reduction"] = rows_bench.run_all(Path(tmp), *args.rows_shape, args.repeat)
            print(rows_bench.report(result["reduction"]) + "\n", flush=True)
        if args.rows_only:
            print(json.dumps(result["reduction"]))
            return
        if not args.small_only and not args.no_reading:
            sizes_r = args.reading_sizes or ([1 << 26] if args.quick else [1 << 26, 1 << 28])
            result["reading"] = reading.run_all(Path(tmp), sizes_r, args.dtypes, args.repeat)
            print("Speed of reading (whole processes, start-up included; medians, interleaved):\n")
            print(reading.report(result["reading"]["rows"], result["reading"]["start"]))
            print(f"(load average at the end: {', '.join(f'{x:.2f}' for x in result['reading']['load'])})\n", flush=True)
        if args.reading_only:
            pass
        elif not args.small_only:
            rows = []
            for n in sizes:
                for dtype in args.dtypes:
                    rows.append(measure(Path(tmp), n, dtype, args.jobs, args.repeat))
                    print(f"measured {n:,} {dtype}", file=sys.stderr, flush=True)
            print(table(rows))
            result["rows"] = rows
            if not args.quick:
                huge = rss_check(Path(tmp), args.jobs)
                ok = huge["verify"]["rss_mib"] < 1024
                print(f"\n1G-element float32 case (4 GiB output): verify {huge['verify']['seconds']:.1f} s, "
                      f"peak RSS {huge['verify']['rss_mib']:.0f} MiB ({'under' if ok else 'OVER'} the 1 GiB limit); "
                      f"gen {huge['gen']['seconds']:.1f} s, peak RSS {huge['gen']['rss_mib']:.0f} MiB", flush=True)
                result["huge"] = huge
                failed = not ok
        if not args.no_small and not args.reading_only:
            suites = [small_cases.parse_suite(x) for x in args.small_suites] if args.small_suites else None
            small = small_cases.run_all(Path(tmp), args.jobs, args.repeat, args.quick, suites)
            print(("" if args.small_only else "\n") + "Many small cases (SiluBackward float16, "
                  "one case file; ratios against the naive per-case scripts, same run):\n")
            print(small_cases.report(small))
            result["small"] = small
        end = code_version()
        if end != result["code"]:
            print(f"\nnote: the code changed during the run ({result['code']} -> {end})")
            result["code_at_end"] = end
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        if failed:
            sys.exit(1)


if __name__ == "__main__":
    main()
