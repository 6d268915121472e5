"""Contractions and windows at scale: a linear layer's gradient pair and a ResNet-50 layer's ConvolutionBackward, as
whole `aclnn-cli` processes paired against naive NumPy scripts run as whole processes too.

- matmul: a 4096 x 4096 x 4096 float16 gradient pair as aclnnMatmul cases through transposed views,
  dX = dY @ W^T (mat2 a transposed view of W's (N, K) storage) and dW = X^T @ dY (self a transposed view of X's).
  The naive generator draws dY, W and X, computes both products with a float32 np.matmul and writes the five
  arrays with `tofile`.
- conv: aclnnConvolutionBackward of a ResNet-50 layer, input and gradOutput [32, 256, 56, 56], weight
  [256, 256, 3, 3], stride 1, padding 1, float16. The naive generator draws the three inputs, forms im2col of
  the input, and computes gradWeight, gradInput (through col2im) and gradBias with float32 matmuls. The tool
  takes a convolution case as one block of at most 2^25 elements per tensor (decision 187): a larger --conv-shape
  is refused when it loads; the row then records the refusal and measures the layer at --conv-fallback-batch.

Each step is paired and alternated (bench/whole.py: ours and the naive script back to back, the order alternating
from pair to pair, the ratio taken pair by pair, medians): `aclnn-cli gen CASES -o OUT` (OUT removed before each,
as on a first run) against the naive generator, and, after one `aclnn-cli emulate OUT`, `aclnn-cli verify OUT`
against a naive verifier (np.fromfile of each dump and golden, float32, np.allclose). The commands run as a user
types them (default --jobs: one worker per core, one BLAS thread each); the naive scripts get NumPy's default BLAS
threads. Peak memory is the largest process's max RSS (os.wait4: the process and the workers it waited for),
reported against the bytes of the case file's tensors (its cases' inputs and outputs as gen writes them).
Goals: gen within 3x the naive generator, verify within 2x the naive verifier, peak RSS under 3x the tensors.

    python bench/bench.py --contraction-only [--contraction-pairs 3] [--contraction-rows matmul conv]
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from merge import whole as process
from whole import alternate, summary

CLI = [sys.executable, "-m", "aclnn_cli"]
GOALS = {"gen": 3.0, "verify": 2.0, "rss": 3.0}  # ratios to the naive scripts' seconds; peak RSS over tensor bytes

MATMUL_CASES = """\
op: aclnnMatmul
cases:
  - name: dx_transposed_weight   # dX = dY @ W^T: mat2 a transposed view of W's (N, K) storage
    dtype: float16
    seed: 1
    shape: [{n}, {n}]
    tensors: {{mat2: {{shape: [{n}, {n}], layout: transposed}}}}
  - name: dw_transposed_input    # dW = X^T @ dY: self a transposed view of X's (K, M) storage
    dtype: float16
    seed: 2
    shape: [{n}, {n}]
    tensors: {{self: {{layout: transposed}}, mat2: {{shape: [{n}, {n}]}}}}
"""

CONV_CASES = """\
op: aclnnConvolutionBackward
cases:
  - name: resnet50_layer
    dtype: float16
    shape: [{shape}]
    tensors: {{weight: {{shape: [{cout}, {cin}, 3, 3]}}}}
    attributes: {{stride: [1, 1], padding: [1, 1], dilation: [1, 1], outputPadding: [0, 0]}}
"""

NAIVE_MATMUL = """
import sys
from pathlib import Path
import numpy as np
n, where = int(sys.argv[1]), Path(sys.argv[2])
rng = np.random.default_rng(0)
dy, w, x = (rng.standard_normal((n, n), dtype=np.float32).astype(np.float16) for _ in range(3))
dx = np.matmul(dy.astype(np.float32), w.astype(np.float32).T).astype(np.float16)
dw = np.matmul(x.astype(np.float32).T, dy.astype(np.float32)).astype(np.float16)
where.mkdir(parents=True, exist_ok=True)
for name, a in (("dy", dy), ("w", w), ("x", x), ("dx", dx), ("dw", dw)):
    a.tofile(where / (name + ".bin"))
"""

NAIVE_CONV = """
import sys
from pathlib import Path
import numpy as np
n, c, h, w, co = map(int, sys.argv[1:6])
where = Path(sys.argv[6])
rng = np.random.default_rng(0)
x = rng.standard_normal((n, c, h, w), dtype=np.float32).astype(np.float16)
dy = rng.standard_normal((n, co, h, w), dtype=np.float32).astype(np.float16)
wt = rng.standard_normal((co, c, 3, 3), dtype=np.float32).astype(np.float16)
padded = np.pad(x.astype(np.float32), ((0, 0), (0, 0), (1, 1), (1, 1)))
cols = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))  # (n, c, h, w, 3, 3)
cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * w, c * 9)  # im2col
g = dy.astype(np.float32).transpose(0, 2, 3, 1).reshape(n * h * w, co)
grad_weight = (g.T @ cols).reshape(co, c, 3, 3)
del cols
grad_bias = g.sum(axis=0)
dcols = (g @ wt.astype(np.float32).reshape(co, c * 9)).reshape(n, h, w, c, 3, 3)
grad_input = np.zeros((n, c, h + 2, w + 2), np.float32)
for i in range(3):  # col2im
    for j in range(3):
        grad_input[:, :, i:i + h, j:j + w] += dcols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
where.mkdir(parents=True, exist_ok=True)
for name, a in (("x", x), ("dy", dy), ("w", wt), ("grad_input", grad_input[:, :, 1:-1, 1:-1]),
                ("grad_weight", grad_weight), ("grad_bias", grad_bias)):
    a.astype(np.float16).tofile(where / (name + ".bin"))
"""

# A typical verify_result.py: every case directory's dumps against their goldens, np.fromfile and np.allclose.
NAIVE_VERIFY = """
import sys
from pathlib import Path
import numpy as np
root, names = Path(sys.argv[1]), sys.argv[2:]
failed = 0
for d in sorted(p for p in root.iterdir() if p.is_dir()):
    for name in names:
        a = np.fromfile(d / (name + ".dump.bin"), dtype=np.float16).astype(np.float32)
        g = np.fromfile(d / (name + ".golden.bin"), dtype=np.float16).astype(np.float32)
        failed += not np.allclose(a, g, rtol=1e-3, atol=1e-3)
print(failed)
"""


def _rows(n: int, shape: list[int]) -> dict:
    """Each row: (label, case file text, naive generator's argv, the outputs the naive verifier reads)."""
    nb, c, h, w = shape
    conv = CONV_CASES.format(shape=", ".join(map(str, shape)), cout=c, cin=c)
    return {"matmul": (f"Matmul gradient pair {n} x {n} x {n} float16 (dX = dY @ W^T, dW = X^T @ dY)",
                       MATMUL_CASES.format(n=n), [NAIVE_MATMUL, n], ["out"]),
            "conv": (f"ConvolutionBackward {list(shape)} float16, weight [{c}, {c}, 3, 3], stride 1, padding 1",
                     conv, [NAIVE_CONV, nb, c, h, w, c], ["gradInput", "gradWeight", "gradBias"])}


def run_all(tmp: Path, rows: list[str], pairs: int, n: int, conv_shape: list[int], fallback_batch: int) -> dict:
    result = {"pairs": pairs, "cores": os.cpu_count(), "rows": []}
    for name in rows:
        got = run_row(tmp, name, *_rows(n, conv_shape)[name], pairs)
        if name == "conv" and got.get("refused") and fallback_batch and fallback_batch != conv_shape[0]:
            smaller = [fallback_batch, *conv_shape[1:]]
            result["rows"].append(got)
            got = run_row(tmp, name, *_rows(n, smaller)[name], pairs)
        result["rows"].append(got)
        print(f"measured {got['label']}", file=sys.stderr, flush=True)
    return result


def run_row(tmp: Path, name: str, label: str, cases_text: str, naive_args: list, outputs: list[str], pairs: int) -> dict:
    cases, ours, naive, log = tmp / f"{name}.yaml", tmp / f"{name}-ours", tmp / f"{name}-naive", tmp / f"{name}.log"
    cases.write_text(cases_text)
    shutil.rmtree(ours, ignore_errors=True)
    gen = [*CLI, "gen", cases, "-o", ours]
    first = process(gen, log)  # (set-up: the OUT that emulate and verify read; a refusal ends the row here)
    if first[2]:
        why = log.read_text().strip().splitlines()[-1]
        return {"label": label, "refused": why[why.find("case '"):][:400]}  # (from the case's name: no scratch path)
    row = {"label": label, "tensor_bytes": tensor_bytes(ours), "steps": {}}
    theirs = [sys.executable, "-c", *map(str, naive_args), naive]
    measured = lambda args: _checked(args, log)
    reset = lambda args: shutil.rmtree(ours if args is gen else naive, ignore_errors=True)  # (each gen a first one)
    row["steps"]["gen"] = _step(alternate(gen, theirs, pairs, measured, reset))
    emulated = _checked([*CLI, "emulate", ours], log)
    row["steps"]["emulate"] = {"ours": emulated[0], "ours_rss": emulated[1]}
    verify = [*CLI, "verify", ours]
    row["steps"]["verify"] = _step(alternate(verify, [sys.executable, "-c", NAIVE_VERIFY, ours, *outputs], pairs,
                                             measured))
    for d in (ours, naive):
        shutil.rmtree(d, ignore_errors=True)
    cases.unlink()
    log.unlink()
    return row


def _checked(args: list, log: Path) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of a whole process that must succeed."""
    seconds, rss, code = process(args, log)
    if code:
        sys.exit(f"{' '.join(map(str, args[:4]))} ... failed ({code}):\n{log.read_text()[-3000:]}")
    return seconds, rss


def _step(rows: list[tuple]) -> dict:
    """The pairs' summary (seconds), and each side's largest peak RSS."""
    return {**summary([(a[0], b[0]) for a, b in rows]), "ours_rss": max(a[1] for a, _ in rows),
            "naive_rss": max(b[1] for _, b in rows)}


def tensor_bytes(out: Path) -> int:
    """The bytes of the tensors gen wrote for every case in OUT: each manifest's inputs and outputs (not goldens)."""
    total = 0
    for manifest in out.glob("*/case.json"):
        for t in json.loads(manifest.read_text())["tensors"]:
            if t.get("file"):
                total += (manifest.parent / t["file"]).stat().st_size
    return total


def report(r: dict) -> str:
    lines = [f"Contractions and windows at scale: whole processes, default --jobs ({r['cores']} cores), "
             f"{r['pairs']} alternated pairs per step (medians; the ratio pair by pair); peak RSS the largest "
             f"process's, against the case file's tensor bytes:", ""]
    for row in r["rows"]:
        if row.get("refused"):
            lines += [f"{row['label']}: refused by `aclnn-cli gen`: {row['refused']}", ""]
            continue
        mib = row["tensor_bytes"] / 2**20
        lines += [f"{row['label']} ({mib:,.0f} MiB of tensors):", "",
                  "| step | aclnn-cli | naive script | ratio (median, range) | goal | peak RSS (ours / naive) | "
                  "RSS / tensors | |", "|---|---:|---:|---:|---:|---:|---:|---|"]
        for step in ("gen", "emulate", "verify"):
            s = row["steps"][step]
            over = s["ours_rss"] / mib
            if step == "emulate":  # (the emulated device, no step of a user's gate: issue 29 sets gen's and verify's)
                lines.append(f"| `aclnn-cli emulate` | {s['ours']:.2f} s | | | | {s['ours_rss']:,.0f} MiB | "
                             f"{over:.1f}x | (no goal) |")
                continue
            met = s["ratio"] <= GOALS[step] and over <= GOALS["rss"]
            lines.append(f"| `aclnn-cli {step}` | {s['ours']:.2f} s | {s['naive']:.2f} s | {s['ratio']:.2f}x "
                         f"({s['low']:.2f}-{s['high']:.2f}) | <= {GOALS[step]:g}x, RSS < {GOALS['rss']:g}x | "
                         f"{s['ours_rss']:,.0f} / {s['naive_rss']:,.0f} MiB | {over:.1f}x | {_met(met)} |")
        lines.append("")
    return "\n".join(lines).rstrip()


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"
