#!/usr/bin/env python3
"""One-off check: every declaration in the stub's headers appears, token for token, in the
public CANN header of the same installed path.

Not part of CI (it needs local git mirrors of the public CANN repositories):

    python3 tests/stub_cann/tools/check_against_public.py \
        --runtime /work/.mirror/hicann+runtime/repo \
        --opbase /work/.mirror/hicann+opbase/repo \
        --ops-nn /work/.mirror/hicann+ops-nn/repo

A "declaration" is a top-level statement of the stub header (a prototype, a typedef, a whole
enum, a `static const`, a constexpr) or a `#define`; comments and whitespace are ignored.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

INCLUDE = Path(__file__).resolve().parent.parent / "include"

# stub header (relative to include/) -> (repository option, path in that repository)
PUBLIC = {
    "acl/acl.h": ("runtime", "include/external/acl/acl.h"),
    "acl/acl_base.h": ("runtime", "include/external/acl/acl_base.h"),
    "acl/acl_base_rt.h": ("runtime", "include/external/acl/acl_base_rt.h"),
    "acl/acl_rt.h": ("runtime", "include/external/acl/acl_rt.h"),
    "acl/error_codes/rt_error_codes.h": ("runtime", "include/external/acl/error_codes/rt_error_codes.h"),
    "aclnn/acl_meta.h": ("opbase", "include/nnopbase/aclnn/acl_meta.h"),
    "aclnn/aclnn_base.h": ("opbase", "include/nnopbase/aclnn/aclnn_base.h"),
    "aclnn/opdev/op_errno.h": ("opbase", "include/nnopbase/opdev/op_errno.h"),
    "aclnnop/aclnn_util.h": ("opbase", "include/aclnnop/aclnn_util.h"),
    "aclnnop/aclnn_silu_backward.h": ("ops_nn", "activation/silu_grad/op_api/aclnn_silu_backward.h"),
    "aclnnop/aclnn_fast_gelu_backward.h": ("ops_nn", "activation/fast_gelu_grad/op_api/aclnn_fast_gelu_backward.h"),
    "aclnnop/aclnn_logsigmoid_backward.h": ("ops_nn", "activation/logsigmoid_grad/op_api/aclnn_logsigmoid_backward.h"),
    "aclnnop/aclnn_hardsigmoid_backward.h": ("ops_nn", "activation/hard_sigmoid_grad/op_api/aclnn_hardsigmoid_backward.h"),
    "aclnnop/aclnn_swish_backward.h": ("ops_nn", "activation/swish_grad/op_api/aclnn_swish_backward.h"),
    "aclnnop/aclnn_softplus_backward.h": ("ops_nn", "activation/softplus_v2_grad/op_api/aclnn_softplus_backward.h"),
    "aclnnop/aclnn_hardswish_backward.h": ("ops_nn",
                                           "activation/hard_swish_grad/op_host/op_api/aclnn_hardswish_backward.h"),
    "aclnnop/aclnn_leaky_relu_backward.h": ("ops_nn", "activation/leaky_relu_grad/op_api/aclnn_leaky_relu_backward.h"),
    "aclnnop/aclnn_sigmoid_backward.h": ("ops_nn", "activation/sigmoid_grad/op_api/aclnn_sigmoid_backward.h"),
    "aclnnop/aclnn_gelu_backward_v2.h": ("ops_nn", "activation/gelu_grad_v2/op_api/aclnn_gelu_backward_v2.h"),
    "aclnnop/aclnn_gelu_backward.h": ("ops_nn", "activation/gelu_grad/op_api/aclnn_gelu_backward.h"),
    "aclnnop/aclnn_selu_backward.h": ("ops_nn", "activation/selu_grad/op_api/aclnn_selu_backward.h"),
    "aclnnop/aclnn_mish_backward.h": ("ops_nn", "activation/mish_grad/op_api/aclnn_mish_backward.h"),
    "aclnnop/aclnn_softmax_backward.h": ("ops_nn", "activation/softmax_grad/op_api/aclnn_softmax_backward.h"),
    "aclnnop/aclnn_logsoftmax_backward.h": ("ops_nn", "activation/log_softmax_grad/op_api/aclnn_logsoftmax_backward.h"),
    "aclnnop/aclnn_mse_loss_backward.h": ("ops_nn", "loss/mse_loss_grad_v2/op_host/op_api/aclnn_mse_loss_backward.h"),
    "aclnnop/aclnn_nll_loss_backward.h": ("ops_nn", "loss/nll_loss_grad/op_api/aclnn_nll_loss_backward.h"),
    "aclnnop/aclnn_nll_loss2d_backward.h": ("ops_nn", "loss/nll_loss_grad/op_api/aclnn_nll_loss2d_backward.h"),
    "aclnnop/aclnn_l1_loss_backward.h": ("ops_nn", "loss/l1_loss_grad/op_api/aclnn_l1_loss_backward.h"),
    "aclnnop/aclnn_binary_cross_entropy_with_logits_backward.h": (
        "ops_nn", "loss/sigmoid_cross_entropy_with_logits_grad_v2/op_api/aclnn_binary_cross_entropy_with_logits_backward.h"),
    "aclnnop/aclnn_smooth_l1_loss_backward.h": ("ops_nn",
                                                "loss/smooth_l1_loss_grad_v2/op_api/aclnn_smooth_l1_loss_backward.h"),
    "aclnnop/aclnn_binary_cross_entropy_backward.h": (
        "ops_nn", "loss/binary_cross_entropy_grad/op_api/aclnn_binary_cross_entropy_backward.h"),
    "aclnnop/aclnn_soft_margin_loss_backward.h": ("ops_nn",
                                                  "loss/soft_margin_loss_grad/op_api/aclnn_soft_margin_loss_backward.h"),
    "aclnnop/aclnn_layer_norm_backward.h": ("ops_nn",
                                            "norm/layer_norm_grad_v3/op_host/op_api/aclnn_layer_norm_backward.h"),
    "aclnnop/aclnn_batch_norm_backward.h": ("ops_nn",
                                            "norm/batch_norm_grad_v3/op_host/op_api/aclnn_batch_norm_backward.h"),
    "aclnnop/aclnn_embedding_dense_backward.h": (
        "ops_nn", "index/embedding_dense_grad_v2/op_api/aclnn_embedding_dense_backward.h"),
    "aclnnop/aclnn_group_norm_backward.h": ("ops_nn",
                                            "norm/group_norm_grad/op_host/op_api/aclnn_group_norm_backward.h"),
    "aclnnop/aclnn_geglu_backward.h": ("ops_nn", "activation/ge_glu_grad_v2/op_host/op_api/aclnn_geglu_backward.h"),
    "aclnnop/aclnn_elu_backward.h": ("ops_nn", "activation/elu_grad_v2/op_api/aclnn_elu_backward.h"),
    "aclnnop/aclnn_hardtanh_backward.h": ("ops_nn", "activation/hardtanh_grad/op_api/aclnn_hardtanh_backward.h"),
    "aclnnop/aclnn_threshold_backward.h": ("ops_nn",
                                           "activation/threshold_grad_v2_d/op_api/aclnn_threshold_backward.h"),
    "aclnnop/aclnn_softshrink_backward.h": ("ops_nn",
                                            "activation/soft_shrink_grad/op_api/aclnn_softshrink_backward.h"),
    "aclnnop/aclnn_convolution_backward.h": ("ops_nn",
                                             "conv/convolution_backward/op_api/aclnn_convolution_backward.h"),
    "aclnnop/aclnn_prelu_backward.h": ("ops_nn", "activation/p_relu_grad_update/op_api/aclnn_prelu_backward.h"),
    "aclnnop/aclnn_kl_div_backward.h": ("ops_nn", "loss/kl_div_loss_grad/op_api/aclnn_kl_div_backward.h"),
    "aclnnop/aclnn_adaptive_avg_pool2d_backward.h": (
        "ops_nn", "pooling/adaptive_avg_pool2d_grad/op_api/aclnn_adaptive_avg_pool2d_backward.h"),
    "aclnnop/aclnn_adaptive_avg_pool3d_backward.h": (
        "ops_nn", "pooling/adaptive_avg_pool3d_grad/op_api/aclnn_adaptive_avg_pool3d_backward.h"),
    "aclnnop/aclnn_max_pool3d_with_argmax_backward.h": (
        "ops_nn", "pooling/max_pool3d_grad_with_argmax/op_api/aclnn_max_pool3d_with_argmax_backward.h"),
    "aclnnop/aclnn_batch_norm_backward_reduce.h": (
        "ops_nn", "norm/sync_batch_norm_backward_reduce/op_api/aclnn_batch_norm_backward_reduce.h"),
    "aclnnop/aclnn_batch_norm_elemt_backward.h": (
        "ops_nn", "norm/sync_batch_norm_backward_elemt/op_api/aclnn_batch_norm_elemt_backward.h"),
}
# Headers the real build generates from an OpDef (no file in the repositories): written from the op's doc, whose
# prototypes (```Cpp blocks) the stub's declarations must match, and whose call example includes the header's path.
GENERATED = {
    "aclnnop/aclnn_rms_norm_grad.h": "norm/rms_norm_grad/docs/aclnnRmsNormGrad.md",
    "aclnnop/aclnn_swi_glu_grad.h": "activation/swi_glu_grad/docs/aclnnSwiGluGrad.md",
    "aclnnop/aclnn_repeat_interleave_grad.h": "index/repeat_interleave_grad/docs/aclnnRepeatInterleaveGrad.md",
}

# Headers the real build generates from an OpDef of which ops-nn has neither a header nor a doc: nothing public to
# compare with; skipped, with the reason.
UNDOCUMENTED = {
    "aclnnop/aclnn_layer_norm_grad.h": "generated from norm/layer_norm_grad/op_host/layer_norm_grad_def.cpp (the graph "
                                       "op LayerNormGrad); ops-nn has no header or doc of aclnnLayerNormGrad",
    "aclnnop/aclnn_softmax_grad_ext.h": "generated from activation/softmax_grad_ext/op_host/softmax_grad_ext_def.cpp "
                                        "(the graph op SoftmaxGradExt); ops-nn has no header or doc of its aclnn API",
    "aclnnop/aclnn_l2_normalize_grad.h": "generated from norm/l2_normalize_grad/op_host/l2_normalize_grad_def.cpp "
                                         "(the graph op L2NormalizeGrad); ops-nn has no header or doc of its aclnn API",
    "aclnnop/aclnn_instance_norm_grad.h": "generated from norm/instance_norm_grad/op_host/instance_norm_grad_def.cpp "
                                          "(the graph op InstanceNormGrad); ops-nn has no header or doc of its aclnn "
                                          "API",
    "aclnnop/aclnn_mish_grad.h": "generated from activation/mish_grad/op_host/mish_grad_def.cpp (the graph op "
                                 "MishGrad); ops-nn has no header or doc of its aclnn API",
}


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def norm(s: str) -> str:
    s = re.sub(r"\s+", " ", s).strip()
    return re.sub(r"\s*([(),*;{}=&\[\]])\s*", r"\1", s)


def declarations(text: str) -> list[str]:
    """#define lines and top-level statements (brace-balanced, ';'-terminated), preprocessor lines dropped."""
    text = strip_comments(text)
    out, body = [], []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            m = re.match(r"#\s*define\s+(\w+)\s+(.+)", s)
            if m and not m.group(1).startswith(("INC_", "OP_API_", "OPBASE_", "__INC_")):
                out.append(norm(f"#define {m.group(1)} {m.group(2)}"))
            elif re.match(r"#\s*include", s):
                out.append(norm(s))
            continue
        body.append(line)
    depth, cur = 0, []
    for ch in "\n".join(body):
        cur.append(ch)
        depth += ch == "{"
        depth -= ch == "}"
        if ch == ";" and depth == 0:
            stmt = norm("".join(cur))
            if stmt:
                out.append(stmt)
            cur = []
        elif ch == "{" and depth == 1 and norm("".join(cur)) == 'extern "C"{':
            cur, depth = [], 0  # the extern "C" block is transparent
    return out


def doc_problems(rel: str, doc: str) -> tuple[int, list[str]]:
    """A generated header against its op's doc: each prototype (ACLNN_API and the `;` dropped) is one of the doc's
    C++ prototypes token for token, its #includes of the toolkit's own headers aside; the doc's example includes
    the header at `rel`. Returns (declarations checked, problems)."""
    blocks = "\n".join(re.findall(r"```[Cc]pp\n(.*?)```", doc, flags=re.S))
    protos = {norm(m) for m in re.findall(r"aclnnStatus\s+aclnn\w+\s*\([^)]*\)", blocks)}
    included = re.search(rf'#include\s+"{re.escape(rel)}"', blocks)
    problems = [] if included else [f"the doc's example does not include {rel}"]
    checked = 0
    for d in declarations((INCLUDE / rel).read_text()):
        if d.startswith("#include"):
            continue
        checked += 1
        bare = re.sub(r"^ACLNN_API ", "", d).rstrip(";")
        if bare not in protos:
            problems.append(f"not a prototype of the doc: {d}")
    return checked, problems


def public_text(repos: dict[str, Path], key: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repos[key]), "show", f"HEAD:{path}"], check=True,
                          capture_output=True, text=True).stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", type=Path, required=True)
    ap.add_argument("--opbase", type=Path, required=True)
    ap.add_argument("--ops-nn", dest="ops_nn", type=Path, required=True)
    args = ap.parse_args()
    repos = {"runtime": args.runtime, "opbase": args.opbase, "ops_nn": args.ops_nn}
    stub_files = sorted(str(p.relative_to(INCLUDE)) for p in INCLUDE.rglob("*.h"))
    missing_map = [f for f in stub_files if f not in PUBLIC and f not in GENERATED and f not in UNDOCUMENTED]
    for f in sorted(UNDOCUMENTED):
        print(f"SKIPPED (no public counterpart: {UNDOCUMENTED[f]}): {f}")
    bad = total = 0
    for f in sorted(GENERATED):
        checked, problems = doc_problems(f, public_text(repos, "ops_nn", GENERATED[f]))
        print(f"GENERATED (checked against the prototypes of {GENERATED[f]}): {f}")
        total += checked
        for p in problems:
            bad += 1
            print(f"MISMATCH {f}: {p}")
    for f in missing_map:
        print(f"NO PUBLIC COUNTERPART: {f}")
        bad += 1
    for rel in stub_files:
        if rel not in PUBLIC:
            continue
        real = "\n".join(declarations(public_text(repos, *PUBLIC[rel])))
        real_set = set(declarations(public_text(repos, *PUBLIC[rel])))
        for d in declarations((INCLUDE / rel).read_text()):
            total += 1
            if d.startswith("#include"):
                ok = d in real_set
            else:
                ok = d in real_set or d in real
            if not ok:
                bad += 1
                print(f"MISMATCH {rel}: {d}")
    print(f"{total} declarations in {len(stub_files)} headers checked, {bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
