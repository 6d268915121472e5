"""`aclnn-cli report` of a large run (issue 31, finding 17): whole processes, paired against naive scripts.

The results are what a real run writes: the bundled suite generated, emulated and verified (`--json`), and
again under the sign-slip defect for failing cases; their cases are then repeated under distinct ids, one in a
hundred a failing one, into one file of --report-cases cases (100,000: 340 MB) through verify's own JSON writer.

Each pair runs ours and a naive script back to back, the order alternating from pair to pair; the ratio is
taken pair by pair (median and range). Ours is `aclnn-cli report FILE --json M.json --junit M.xml`, its console
summary written to a file as a CI log is. The yardsticks:

- read: `json.load` of the file, nothing else (the time of reading the files: the goal is within 2x of it);
- naive merge: `json.load` of each file, the cases concatenated and `json.dump`ed (what a hand-written merge does).

Peak RSS is each whole process's own (wait4). Goal (issue 31): within 2x the read, under 256 MiB.

    python bench/bench.py --report-only [--report-cases 100000] [--report-pairs 5]
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

GOAL, RSS_GOAL_MIB = 2.0, 256
CLI = [sys.executable, "-m", "aclnn_cli"]

READ = "import json, sys\nfor f in sys.argv[1:]:\n    with open(f) as fh:\n        json.load(fh)\n"
NAIVE = """import json, sys
out, *files = sys.argv[1:]
cases = []
for f in files:
    with open(f) as fh:
        cases += json.load(fh)["cases"]
with open(out, "w") as fh:
    json.dump({"schema": "aclnn-cli/verify/4", "summary": {"total": len(cases)}, "cases": cases}, fh)
"""

# Repeat the cases of two verify --json files (argv 1: passing, 2: with failures) into argv 3, argv 4 cases.
REPEAT = """import json, sys
from pathlib import Path
from aclnn_cli.judge.results import ALL_STATUSES
from aclnn_cli.report.formats import _verify_chunks
from aclnn_cli.tensor.storage import atomic_write_text
passing = json.loads(Path(sys.argv[1]).read_text())["cases"]
failing = [c for c in json.loads(Path(sys.argv[2]).read_text())["cases"] if c["status"] != "PASS"]
n = int(sys.argv[4])
def cases():
    for i in range(n):
        c = dict(failing[i // 100 % len(failing)] if i % 100 == 0 else passing[i % len(passing)])
        c["case_id"] = f"{c['case_id']}-r{i}"
        c["path"] = c["path"].rsplit("/", 1)[0] + "/" + c["case_id"]
        yield c
counts = dict.fromkeys(ALL_STATUSES, 0)
counts["FAIL"], counts["PASS"] = (n + 99) // 100, n - (n + 99) // 100
head = {"schema": "aclnn-cli/verify/4", "tool_version": "bench", "standard_override": None, "exit_code": 1,
        "summary": {"total": n, **counts}, "coverage": None}
atomic_write_text(Path(sys.argv[3]), _verify_chunks(head, cases()))
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _cli(*args, ok=(0, 1)) -> None:
    done = subprocess.run([*CLI, *map(str, args)], cwd=ROOT, env=_env(), capture_output=True, text=True)
    if done.returncode not in ok:
        sys.exit(f"aclnn-cli {' '.join(map(str, args[:2]))} ... failed ({done.returncode}):\n{done.stderr[-3000:]}")


def results_file(tmp: Path, count: int) -> Path:
    """A results file of `count` cases as a real run writes them (see the module's docstring)."""
    out, broken = tmp / "suite", tmp / "suite-broken"
    _cli("gen", "-o", out, "--jobs", "2")
    _cli("emulate", out, "--jobs", "2", ok=(0,))
    _cli("verify", out, "--jobs", "2", "--json", tmp / "passing.json")
    shutil.copytree(out, broken)
    _cli("emulate", broken, "--jobs", "2", "--defect", "sign-slip", ok=(0,))
    _cli("verify", broken, "--jobs", "2", "--json", tmp / "failing.json")
    shutil.rmtree(out)
    shutil.rmtree(broken)
    target = tmp / f"results-{count}.json"
    subprocess.run([sys.executable, "-c", REPEAT, tmp / "passing.json", tmp / "failing.json", target, str(count)],
                   cwd=ROOT, env=_env(), check=True)
    return target


def whole(args: list, log: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MiB, exit status) of one whole process, its output written to log."""
    os.sync()
    with open(log, "wb") as sink:
        t = time.perf_counter()
        proc = subprocess.Popen(list(map(str, args)), cwd=ROOT, env=_env(), stdout=sink, stderr=sink)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_maxrss / 1024, proc.returncode


def run_pairs(tmp: Path, count: int, pairs: int) -> dict:
    source = results_file(tmp, count)
    ours = [*CLI, "report", source, "--json", tmp / "merged.json", "--junit", tmp / "merged.xml"]
    sides = {"read": [sys.executable, "-c", READ, source],
             "naive": [sys.executable, "-c", NAIVE, tmp / "naive.json", source]}
    result: dict = {"cases": count, "bytes": source.stat().st_size, "pairs": pairs}
    for name, theirs in sides.items():
        rows = []
        for i in range(pairs):
            order = (ours, theirs) if i % 2 == 0 else (theirs, ours)
            got = {id(cmd): whole(cmd, tmp / "log.txt") for cmd in order}
            a, b = got[id(ours)], got[id(theirs)]
            if a[2] not in (0, 1) or b[2]:
                sys.exit(f"report bench: a process failed (ours {a[2]}, {name} {b[2]}): {(tmp / 'log.txt').read_text()[-2000:]}")
            rows.append((a, b))
        ratios = sorted(a[0] / b[0] for a, b in rows)
        result[name] = {"ours": statistics.median(a[0] for a, _ in rows), "theirs": statistics.median(b[0] for _, b in rows),
                        "ratio": statistics.median(ratios), "low": ratios[0], "high": ratios[-1],
                        "ours_rss": max(a[1] for a, _ in rows), "theirs_rss": max(b[1] for _, b in rows)}
    source.unlink()
    return result


def report(r: dict) -> str:
    lines = [f"`aclnn-cli report` of {r['cases']:,} cases ({r['bytes'] / 1e6:.0f} MB of results), whole processes, "
             f"{r['pairs']} alternated pairs per yardstick (medians; the ratio pair by pair):", "",
             "| yardstick | aclnn-cli report | yardstick | ratio (median, range) | report RSS | yardstick RSS | goal | |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, label in (("read", "json.load of the file"), ("naive", "naive merge (json.load, json.dump)")):
        s = r[name]
        met = s["ratio"] <= GOAL and s["ours_rss"] <= RSS_GOAL_MIB
        lines.append(f"| {label} | {s['ours']:.2f} s | {s['theirs']:.2f} s | {s['ratio']:.2f}x ({s['low']:.2f}-"
                     f"{s['high']:.2f}) | {s['ours_rss']:.0f} MiB | {s['theirs_rss']:.0f} MiB | <= {GOAL:g}x, "
                     f"<= {RSS_GOAL_MIB} MiB | {'met' if met else '**not met**'} |")
    return "\n".join(lines)
