"""The catalogue of ops-nn's backward operators (issue 30): which folders' own suites run, from a local ops-nn.

    python scripts/catalogue.py OPS_NN [--out docs/catalogue.md] [--only PATTERN] [--jobs J] [--budget GIB]

OPS_NN is a checkout of hicann/ops-nn (a work tree, or a bare clone: files are read with `git show`); nothing
is fetched. A backward folder is <area>/<op>/ whose name holds "grad" or "backward" (optimizers, which update
weights, aside) and whose tests hold ATK JSON or TTK CSV files. Per folder: its suite files, their cases, how
many import and why the others are skipped (counted by reason), then gen, emulate and verify of what imports,
as whole CLI processes, with the PASS count and the seconds. The table is written to a temporary name and
renamed.

A folder's cases run in batches whose files (inputs, goldens, dumps) fit in `--budget` GiB, each batch's files
removed before the next: leaky_relu_grad's 236 cases write 75 GiB. Each folder's row is kept in a JSON file beside
the table (docs/catalogue.json), so `--only` re-runs some folders and keeps the other rows, when ops-nn's commit is
the one they were recorded at.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aclnn_cli.cases import importers  # noqa: E402
from aclnn_cli.cases.loader import cases_from_doc  # noqa: E402

GIB = 1 << 30

SUITE = re.compile(r"^(?P<folder>[^/]+/[^/]+)/tests/.*/(atk_[^/]*\.json|ttk_[^/]*\.csv)$")
BACKWARD = re.compile(r"grad|backward")
OPTIMIZERS = ("apply_", "optim")


class Tree:
    """A work tree or a bare clone, read the same way."""

    def __init__(self, path: Path):
        self.path = path
        self.bare = not (path / ".git").exists() and (path / "HEAD").is_file()
        self.commit = self._git("rev-parse", "HEAD").strip()

    def _git(self, *args: str) -> str:
        flag = ["--git-dir", str(self.path)] if self.bare else ["-C", str(self.path)]
        return subprocess.run(["git", *flag, *args], check=True, capture_output=True, text=True).stdout

    def files(self) -> list[str]:
        return self._git("ls-tree", "-r", "--name-only", "HEAD").splitlines()

    def read(self, rel: str) -> bytes:
        if not self.bare:
            return (self.path / rel).read_bytes()
        flag = ["--git-dir", str(self.path)]
        return subprocess.run(["git", *flag, "show", f"HEAD:{rel}"], check=True, capture_output=True).stdout


def backward_suites(tree: Tree) -> dict[str, list[str]]:
    """{area/op: its ATK and TTK files}, backward folders only."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    for rel in tree.files():
        m = SUITE.match(rel)
        if not m:
            continue
        op = m["folder"].split("/")[1]
        if BACKWARD.search(op) and not op.startswith(OPTIMIZERS):
            found[m["folder"]].append(rel)
    return dict(sorted(found.items()))


def _cli(*args) -> tuple[int, str, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "aclnn_cli", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - start


def _case_bytes(case) -> int:
    """What gen, emulate and verify write for a case: its inputs' storage, and each output's golden and dump."""
    total = 0
    for t in case.tensors:
        if getattr(t, "null", False) or t.layout is None:
            continue
        size = t.layout.storage_size * t.dtype.itemsize
        total += size if t.role == "input" else 2 * size
    return total


def batches(sized: list[tuple[str, int]], budget: int) -> list[list[str]]:
    """Case ids in order, cut into runs whose bytes stay within `budget` (a larger case runs alone)."""
    out: list[list[str]] = []
    used = budget
    for case_id, size in sized:
        if used + size > budget or not out:
            out.append([])
            used = 0
        out[-1].append(case_id)
        used += size
    return out


def run_folder(tree: Tree, folder: str, files: list[str], work: Path, jobs: int, budget: int,
               run: bool = True) -> dict:
    """One folder: cases, imported, skipped by reason, PASS on the emulated kernel, seconds (run: False, the
    import counts alone)."""
    src = work / "src"
    src.mkdir(parents=True)
    row = {"folder": folder, "files": len(files), "cases": 0, "imported": 0, "skipped": collections.Counter(),
           "pass": 0, "mistrusted": 0, "fail": 0, "seconds": 0.0, "batches": 0, "error": "", "ran": run}
    sized: list[tuple[str, int]] = []
    for rel in files:
        data = tree.read(rel)
        (src / Path(rel).name).write_bytes(data)
        try:
            got = importers.import_file(Path(rel), data, skip_unsupported=True, validate=cases_from_doc)
        except Exception as exc:  # (a file the importer refuses whole: counted, with the first line of why)
            row["error"] = str(exc).splitlines()[0][:160]
            continue
        if got is None:
            continue
        kept = sum(len(d["cases"]) for d in got.documents)
        row["imported"] += kept
        row["cases"] += kept + len(got.skipped)
        for s in got.skipped:
            row["skipped"][_reason(s.reason)] += 1
        sized += [(c.case_id, _case_bytes(c)) for d in got.documents for c in cases_from_doc(rel, d)]
    start = time.perf_counter()
    statuses: collections.Counter = collections.Counter()
    for i, ids in enumerate(batches(sized, budget) if run else []):
        out, report = work / f"out{i}", work / f"verify{i}.json"
        picks = [a for case_id in ids for a in ("--case", case_id)]
        steps = (("gen", src, "-o", out, "--skip-unsupported", "-j", jobs, *picks), ("emulate", out, "-j", jobs),
                 ("verify", out, "-j", jobs, "--json", report))
        for args in steps:
            code, text, _ = _cli(*args)
            if code not in (0, 1):
                row["error"] = f"{args[0]}: " + (text.strip().splitlines() or ["exit %d" % code])[-1][:160]
                break
        if report.exists():
            statuses.update(c["status"] for c in json.loads(report.read_text())["cases"])
        shutil.rmtree(out, ignore_errors=True)
        row["batches"] += 1
        if row["error"]:
            break
    row["seconds"] = time.perf_counter() - start
    row["pass"], row["mistrusted"] = statuses.pop("PASS", 0), statuses.pop("MISTRUSTED", 0)
    row["fail"] = sum(statuses.values())  # (FAIL, ERROR: a false alarm on the emulated kernel)
    shutil.rmtree(work, ignore_errors=True)
    return row


def _reason(text: str) -> str:
    """A skip's reason without its case-specific values (numbers, quoted names), to count alike ones."""
    text = text.split(" (first:")[0]
    return re.sub(r"\d+(\.\d+)?", "N", text)[:110]


def table(rows: list[dict], commit: str) -> str:
    producing = sum(1 for r in rows if r["imported"])
    lines = ["# The catalogue: ops-nn's backward operators and their own suites", "",
             f"Generated by `make catalogue OPS_NN=<checkout>` (`scripts/catalogue.py`) on hicann/ops-nn at {commit}. "
             f"**{producing} of {len(rows)}** backward folders produce cases. Per folder: its ATK/TTK files, their "
             "cases, how many import, what the others were skipped for (counted by reason), and gen, emulate and "
             "verify of what imports on the emulated kernel: PASS, MISTRUSTED (passes, but every input the kernel "
             "reads is one constant: it cannot show a kernel's errors), FAIL or ERROR (a false alarm); seconds for "
             "the three (\"not run\": the import counts alone, `--import-only`, or a folder not run at this commit).", "",
             "| folder | files | cases | imported | skipped | PASS | MISTRUSTED | FAIL/ERROR | seconds | why skipped (count) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        why = "; ".join(f"{reason} ({n})" for reason, n in r["skipped"].most_common(3)) or r["error"]
        why = why.replace("|", "\\|")
        skipped = sum(r["skipped"].values())
        ran = [f"{r['pass']}", f"{r['mistrusted']}", f"{r['fail']}", f"{r['seconds']:.1f}"] if r.get("ran", True) \
            else ["not run"] * 4
        lines.append(f"| {r['folder']} | {r['files']} | {r['cases']} | {r['imported']} | {skipped} | "
                     + " | ".join(ran) + f" | {why} |")
    return "\n".join(lines) + "\n"


def _kept_rows(path: Path, commit: str) -> dict[str, dict]:
    """The rows recorded at this ops-nn commit (none if the file is missing or from another commit)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("commit") != commit:
        return {}
    return {r["folder"]: {**r, "skipped": collections.Counter(r["skipped"])} for r in data.get("rows", [])}


def _write(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ops_nn", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "catalogue.md")
    ap.add_argument("--only", default="*", help="folders matching this shell pattern (area/op)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--budget", type=float, default=8.0, help="GiB of case files a batch may write (default 8)")
    ap.add_argument("--import-only", action="store_true", help="the import counts alone (no gen, emulate, verify)")
    args = ap.parse_args()
    if not args.ops_nn.is_dir():
        sys.exit(f"catalogue: {args.ops_nn} is not a directory (give a checkout of hicann/ops-nn)")
    if not args.budget > 0:
        sys.exit(f"catalogue: --budget must be a positive number of GiB, got {args.budget}")
    tree = Tree(args.ops_nn)
    record = args.out.with_suffix(".json")
    rows = _kept_rows(record, tree.commit)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # (a killed run still removes its temporary cases)
    suites = backward_suites(tree)
    with tempfile.TemporaryDirectory(prefix="aclnn-catalogue-") as tmp:
        for i, (folder, files) in enumerate(suites.items()):
            if not fnmatch.fnmatch(folder, args.only):
                continue
            r = rows[folder] = run_folder(tree, folder, files, Path(tmp) / str(i), args.jobs, int(args.budget * GIB),
                                          run=not args.import_only)
            print(f"{folder}: {r['imported']}/{r['cases']} imported, {r['pass']} PASS, {r['mistrusted']} mistrusted, "
                  f"{r['fail']} FAIL/ERROR, {r['batches']} batches, {r['seconds']:.1f} s {r['error']}", flush=True)
            _write(record, json.dumps({"commit": tree.commit, "rows": [rows[f] for f in sorted(rows)]}, indent=1) + "\n")
    listed = [rows.get(f) or _not_run(f, files) for f, files in suites.items()]
    _write(args.out, table(listed, tree.commit))
    print(f"wrote {args.out} ({sum(1 for f in suites if f in rows)} of {len(suites)} folders run at this commit)")


def _not_run(folder: str, files: list[str]) -> dict:
    return {"folder": folder, "files": len(files), "cases": 0, "imported": 0, "skipped": collections.Counter(),
            "pass": 0, "mistrusted": 0, "fail": 0, "seconds": 0.0, "batches": 0, "error": "not run at this commit"}


if __name__ == "__main__":
    main()
