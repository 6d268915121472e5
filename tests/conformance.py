"""What every operator brings to the conformance suite (tests/test_conformance.py), and the checks it runs on them.

An op is added with its declaration, its case file and an entry here: where its oracle is checked (the declared
`textbook`, which tests/test_golden_exhaustive.py sweeps, or a named test of its own file) and where an
independent float32 kernel runs over its bundled cases (tests/independent_kernels.py, a runner of this suite, or a
named test of its own file); its variants' kinds as declared. test_conformance.py fails naming an op that has no
entry, an entry whose test is gone, or a variant the table does not name. OPT_OUT names, with the reason, an op
let off one generic check.
"""

from __future__ import annotations

import re
from exactq import Fraction
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
STUB_INCLUDE = HERE / "stub_cann" / "include"
USER_OPS = HERE / "user_ops"
USER_OP = USER_OPS / "my_hardtanh_backward.py"  # (the worked user op: docs/adding-an-op.md)
USER_KEY = "user:" + USER_OP.stem

TEXTBOOK = "textbook"  # the declared formula in mpmath over every 16-bit input (test_golden_exhaustive.py)
KERNELS = "independent_kernels"  # tests/independent_kernels.py over the whole bundled suite (test_verify.py)
LOSS_RUN = "conformance: loss"  # LOSS below: the op file's ATen kernel through harness.run_case, then verify
ROWS_RUN = "conformance: rows"  # ROWS below: the op file's kernel on whole rows (tests/independent_rows.py)

GOLDENS = "test_goldens_equal_the_oracle_rounded_once"
BUNDLED_GOLDENS = "test_bundled_goldens_are_the_oracle_rounded_once"
AN_INDEPENDENT = "test_an_independent_float32_implementation_passes_every_bundled_case"
ATEN = "test_an_independent_aten_kernel_passes_every_bundled_case"
EVERY_X = "test_golden_is_correctly_rounded_for_every_16bit_x"

# op key: (where its goldens meet an oracle, where an independent kernel passes its bundled cases); a test of
# the op's own file is "file::test"
ENTRIES = {
    "adaptive_avg_pool2d_backward": (f"test_op_adaptive_avg_pool2d_backward.py::{GOLDENS}",
                                     f"test_op_adaptive_avg_pool2d_backward.py::{AN_INDEPENDENT}"),
    "adaptive_avg_pool3d_backward": (f"test_op_adaptive_avg_pool3d_backward.py::{GOLDENS}",
                                     f"test_op_adaptive_avg_pool3d_backward.py::{AN_INDEPENDENT}"),
    "avg_pool2d_backward": (f"test_op_avg_pool2d_backward.py::{GOLDENS}", f"test_op_avg_pool2d_backward.py::{AN_INDEPENDENT}"),
    "avg_pool3d_backward": (f"test_op_avg_pool3d_backward.py::{GOLDENS}", f"test_op_avg_pool3d_backward.py::{AN_INDEPENDENT}"),
    "batch_mat_mul": (f"test_op_batch_mat_mul.py::{GOLDENS}", f"test_op_batch_mat_mul.py::{AN_INDEPENDENT}"),
    "matmul": (f"test_op_matmul.py::{GOLDENS}", f"test_op_matmul.py::{AN_INDEPENDENT}"),
    "convolution_backward": (f"test_op_convolution_backward.py::{GOLDENS}",
                             f"test_op_convolution_backward.py::{AN_INDEPENDENT}"),
    "conv_tbc_backward": (f"test_op_conv_tbc_backward.py::{GOLDENS}", f"test_op_conv_tbc_backward.py::{AN_INDEPENDENT}"),
    "batch_norm_backward": (f"test_op_batch_norm_backward.py::{GOLDENS}", f"test_op_batch_norm_backward.py::{AN_INDEPENDENT}"),
    "binary_cross_entropy_backward": (LOSS_RUN, LOSS_RUN),
    "binary_cross_entropy_with_logits_backward": (LOSS_RUN, LOSS_RUN),
    "elu_backward": (TEXTBOOK, KERNELS),
    "embedding_dense_backward": (f"test_op_embedding_dense_backward.py::{GOLDENS}",
                                 f"test_op_embedding_dense_backward.py::{AN_INDEPENDENT}"),
    "fast_gelu_backward": (TEXTBOOK, KERNELS),
    "gelu_backward_v2": (f"test_op_gelu_backward_v2.py::{EVERY_X}", KERNELS),
    "ge_glu_backward": ("test_op_ge_glu_backward.py::test_geglu_backward_goldens_equal_the_oracle_rounded_once",
                        f"test_op_ge_glu_backward.py::{AN_INDEPENDENT}"),
    "ge_glu_v3_backward": ("test_op_ge_glu_v3_backward.py::test_every_v3_golden_equals_the_oracle_rounded_once",
                           f"test_op_ge_glu_backward.py::{AN_INDEPENDENT}"),  # (parametrised by op key)
    "gelu_backward": (TEXTBOOK, KERNELS),
    "group_norm_backward": (f"test_op_group_norm_backward.py::{GOLDENS}", f"test_op_group_norm_backward.py::{AN_INDEPENDENT}"),
    "hardsigmoid_backward": (TEXTBOOK, KERNELS),
    "hardswish_backward": (f"test_op_hardswish_backward.py::{EVERY_X}", KERNELS),
    "hardtanh_backward": (TEXTBOOK, KERNELS),
    "instance_norm_grad": (f"test_op_instance_norm_grad.py::{GOLDENS}", f"test_op_instance_norm_grad.py::{AN_INDEPENDENT}"),
    "kl_div_backward": (LOSS_RUN, LOSS_RUN),
    "l1_loss_backward": (LOSS_RUN, LOSS_RUN),
    "layer_norm_backward": (f"test_op_layer_norm_backward.py::{BUNDLED_GOLDENS}", ROWS_RUN),
    "layer_norm_grad": ("test_op_layer_norm_grad.py::test_bundled_cases_pass_and_goldens_are_the_oracle_rounded_once",
                        ROWS_RUN),
    "leaky_relu_backward": (TEXTBOOK, KERNELS),
    "log_sigmoid_backward": (TEXTBOOK, KERNELS),
    "logit_grad": (f"test_op_logit_grad.py::{GOLDENS}", f"test_op_logit_grad.py::{AN_INDEPENDENT}"),
    "l2_normalize_grad": (f"test_op_l2_normalize_grad.py::{BUNDLED_GOLDENS}",
                          f"test_op_l2_normalize_grad.py::{AN_INDEPENDENT}"),
    "log_softmax_backward": (f"test_op_log_softmax_backward.py::{BUNDLED_GOLDENS}", f"test_op_log_softmax_backward.py::{ATEN}"),
    "max_pool2d_with_indices_backward": (f"test_op_max_pool2d_with_indices_backward.py::{GOLDENS}",
                                         f"test_op_max_pool2d_with_indices_backward.py::{AN_INDEPENDENT}"),
    "max_pool2d_with_mask_backward": (f"test_op_max_pool2d_with_mask_backward.py::{GOLDENS}",
                                      f"test_op_max_pool2d_with_mask_backward.py::{AN_INDEPENDENT}"),
    "max_pool3d_with_argmax_backward": (f"test_op_max_pool3d_with_argmax_backward.py::{GOLDENS}",
                                        f"test_op_max_pool3d_with_argmax_backward.py::{AN_INDEPENDENT}"),
    "mish_backward": (TEXTBOOK, KERNELS),
    "mish_grad": (f"test_op_mish_grad.py::{GOLDENS}", KERNELS),
    "batch_norm_elemt_backward": (f"test_op_batch_norm_elemt_backward.py::{GOLDENS}",
                                  f"test_op_batch_norm_elemt_backward.py::{AN_INDEPENDENT}"),
    "batch_norm_reduce_backward": (f"test_op_batch_norm_reduce_backward.py::{GOLDENS}",
                                   f"test_op_batch_norm_reduce_backward.py::{AN_INDEPENDENT}"),
    "prelu_backward": (f"test_op_prelu_backward.py::{GOLDENS}", f"test_op_prelu_backward.py::{AN_INDEPENDENT}"),
    "mse_loss_backward": ("test_op_mse_loss_backward.py::test_golden_is_the_exact_value_rounded_once", LOSS_RUN),
    "nll_loss_backward": ("test_op_nll_loss_backward.py::test_bundled_goldens_against_the_oracle", ROWS_RUN),
    "nll_loss2d_backward": (f"test_op_nll_loss2d_backward.py::{BUNDLED_GOLDENS}",
                            f"test_op_nll_loss2d_backward.py::{AN_INDEPENDENT}"),
    "repeat_interleave_grad": (f"test_op_repeat_interleave_grad.py::{GOLDENS}",
                               f"test_op_repeat_interleave_grad.py::{AN_INDEPENDENT}"),
    "rms_norm_grad": (f"test_op_rms_norm_grad.py::{BUNDLED_GOLDENS}", ROWS_RUN),
    "selu_backward": (TEXTBOOK, KERNELS),
    "sigmoid_backward": ("test_op_sigmoid_backward.py::test_golden_is_correctly_rounded_for_every_16bit_y", KERNELS),
    "silu_backward": (TEXTBOOK, KERNELS),
    "smooth_l1_loss_backward": (LOSS_RUN, LOSS_RUN),
    "soft_margin_loss_backward": (LOSS_RUN, LOSS_RUN),
    "softmax_backward": (f"test_op_softmax_backward.py::{BUNDLED_GOLDENS}", f"test_op_softmax_backward.py::{ATEN}"),
    "softmax_grad_ext": (f"test_op_softmax_grad_ext.py::{BUNDLED_GOLDENS}", f"test_op_softmax_grad_ext.py::{AN_INDEPENDENT}"),
    "softplus_backward": (TEXTBOOK, KERNELS),
    "softshrink_backward": (TEXTBOOK, KERNELS),
    "swi_glu_grad": (f"test_op_swi_glu_grad.py::{GOLDENS}", f"test_op_swi_glu_grad.py::{AN_INDEPENDENT}"),
    "swish_backward": (TEXTBOOK, KERNELS),
    "threshold_backward": (TEXTBOOK, KERNELS),
}

# op key: (its test file, the check of one case -> (elements, wrong), fewest golden elements checked, its ATen
# kernel for harness.run_case, fewest cases judged); the check None: its oracle is elsewhere (ENTRIES)
LOSS = {
    "binary_cross_entropy_backward": ("test_op_binary_cross_entropy_backward", "check_case", 1_150_000, "aten_device", 60),
    "binary_cross_entropy_with_logits_backward": ("test_op_binary_cross_entropy_with_logits_backward", "check_case",
                                                  1_150_000, "aten_device", 50),
    "kl_div_backward": ("test_op_kl_div_backward", "check_case", 1_050_000, "aten_device", 60),
    "l1_loss_backward": ("test_op_l1_loss_backward", "round_oracle", 1_300_000, "aten_device", 60),
    "mse_loss_backward": ("test_op_mse_loss_backward", None, 0, "aten_device", 100),
    "smooth_l1_loss_backward": ("test_op_smooth_l1_loss_backward", "check_case", 1_150_000, "aten_device", 50),
    "soft_margin_loss_backward": ("test_op_soft_margin_loss_backward", "check_case", 1_150_000, "aten_device", 60),
}

# op key: (its test file, its float32 kernel on a case's whole rows: another summation order than the op's)
ROWS = {
    "layer_norm_backward": ("test_op_layer_norm_backward", "aten_float32"),
    "layer_norm_grad": ("test_op_layer_norm_grad", "aten_float32"),
    "nll_loss_backward": ("test_op_nll_loss_backward", "aten_float32"),
    "rms_norm_grad": ("test_op_rms_norm_grad", "aten_sequential"),
}

# op key (or "user:<file>"): (its defects, its legitimate variants), each as the op declares them
VARIANTS = {
    "adaptive_avg_pool2d_backward": (
        "adaptive2d-floor-end adaptive2d-largest-divisor adaptive2d-last-write-wins adaptive2d-uniform-windows",
        "adaptive2d-column-sums adaptive2d-columns adaptive2d-divide adaptive2d-reversed adaptive2d-small-kernel"),
    "adaptive_avg_pool3d_backward": (
        "adaptive3d-depth-divisor-dropped adaptive3d-floor-end adaptive3d-largest-divisor adaptive3d-last-write-wins "
        "adaptive3d-uniform-windows",
        "adaptive3d-columns adaptive3d-divide adaptive3d-reciprocal adaptive3d-reversed"),
    "avg_pool2d_backward": (
        "avgpool-include-pad-always avgpool-include-pad-ignored avgpool-kernel-size-divisor "
        "avgpool-last-write-wins avgpool-override-ignored avgpool-padding-off-by-one avgpool-stride-off-by-one",
        "avgpool-columns avgpool-reciprocal avgpool-reversed"),
    "avg_pool3d_backward": (
        "avgpool3d-depth-stride-off-by-one avgpool3d-include-pad-always avgpool3d-include-pad-ignored "
        "avgpool3d-kernel-size-divisor avgpool3d-last-write-wins avgpool3d-override-ignored "
        "avgpool3d-padding-off-by-one avgpool3d-stride-off-by-one",
        "avgpool3d-columns avgpool3d-divide avgpool3d-reversed"),
    "batch_mat_mul": (
        "bmm-bf16-accumulation bmm-fp16-accumulation bmm-halved bmm-k-tail-dropped bmm-not-transposed bmm-zeros",
        "bmm-split-k"),
    "matmul": (
        "matmul-bf16-accumulation matmul-fp16-accumulation matmul-halved matmul-k-tail-dropped matmul-not-transposed "
        "matmul-self-not-transposed matmul-wrong-batch matmul-zeros",
        "matmul-split-k"),
    "convolution_backward": (
        "conv-bf16-accumulation conv-bias-one-sample conv-flipped-kernel conv-fp16-accumulation conv-groups-ignored "
        "conv-padding-row-dropped",
        "conv-reversed-rounds conv-split-k"),
    "conv_tbc_backward": (
        "conv-bf16-accumulation conv-bias-one-sample conv-flipped-kernel conv-fp16-accumulation "
        "conv-padding-row-dropped",
        "conv-reversed-rounds conv-split-k tbc-ncl-lowering"),
    "batch_norm_elemt_backward": (
        "syncbn-elemt-counter-first syncbn-elemt-counter-numel syncbn-elemt-invstd-once syncbn-elemt-mean-dy-ignored "
        "syncbn-elemt-no-final-invstd syncbn-elemt-stats-of-first-channel syncbn-elemt-sums-swapped "
        "syncbn-elemt-weight-ignored syncbn-elemt-xmu-term-sign",
        "syncbn-elemt-float32-means syncbn-elemt-reciprocal-count"),
    "batch_norm_reduce_backward": (
        "syncbn-reduce-bf16-accumulation syncbn-reduce-first-sample syncbn-reduce-fp16-accumulation "
        "syncbn-reduce-lost-core-partial syncbn-reduce-mean-ignored syncbn-reduce-mean-term-sign "
        "syncbn-reduce-stats-swapped syncbn-reduce-with-weight syncbn-reduce-without-invstd",
        "syncbn-reduce-centred syncbn-reduce-sample-major syncbn-reduce-sequential"),
    "batch_norm_backward": (
        "bn-bessel-divisor bn-bf16-accumulation bn-dgamma-term-sign bn-fp16-accumulation "
        "bn-inference-formula-in-training bn-lost-core-partial bn-no-dbeta-term bn-no-final-rstd bn-stats-swapped "
        "bn-weight-grad-without-rstd",
        "bn-aten-formula bn-recompute-association bn-sample-major bn-sequential"),
    "binary_cross_entropy_backward": (
        "cof-in-half epsilon-dropped mean-forgotten sign-slip weight-ignored",
        "aten-divide"),
    "binary_cross_entropy_with_logits_backward": (
        "cof-in-half mean-forgotten pos-weight-ignored pos-weight-on-both-terms sigmoid-of-minus-x weight-ignored",
        "aten-divide"),
    "elu_backward": (
        "elu-exp-without-input-scale elu-negcoef-alpha-only elu-result-ignored elu-scale-dropped elu-strict-zero",
        "elu-factor-first"),
    "embedding_dense_backward": (
        "emb-bf16-accumulation emb-fp16-accumulation emb-last-write-wins emb-off-by-one emb-padding-kept "
        "emb-row-stride emb-scale-missing emb-scale-twice emb-zeros",
        "emb-core-partials emb-pairwise emb-reversed emb-sequential"),
    "fast_gelu_backward": (
        "exp-overflow expanded-formula half-constant sign-slip",
        "stable-formula"),
    "ge_glu_backward": (
        "geglu-approximate-ignored geglu-gelu-recomputed geglu-linear-half-dropped geglu-no-pdf-term "
        "geglu-wrong-half",
        "geglu-accurate-gelu-grad geglu-linear-last"),
    "ge_glu_v3_backward": (
        "geglu-approximate-ignored geglu-gelu-recomputed geglu-linear-half-dropped geglu-no-pdf-term "
        "geglu-wrong-half",
        "geglu-accurate-gelu-grad geglu-linear-last"),
    "gelu_backward": (
        "cubic-derivative exp-overflow gelu-erf-form no-nan-select sign-slip",
        "fused-axpy stable-formula"),
    "gelu_backward_v2": (
        "approximate-ignored cubic-derivative erf-missing-sqrt2 exp-overflow no-nan-select pdf-missing-half "
        "sign-slip",
        "fused-axpy stable-formula"),
    "group_norm_backward": (
        "gn-channel-sums-over-group gn-first-sample-only gn-gamma-of-first-channel gn-rstd-squared",
        "gn-centred gn-numpy-sums gn-reversed-samples"),
    "instance_norm_grad": (
        "in-fp16-accumulation in-gamma-last-sample-only in-no-epsilon in-no-var-term in-rstd-squared "
        "in-stats-over-samples in-unbiased-var-factor in-variance-as-rstd in-variance-mean-swapped",
        "in-centred in-fused-muladd in-rounded-rsqrt in-tree-sums"),
    "hardsigmoid_backward": (
        "inclusive-bounds sign-slip",
        "stable-formula"),
    "hardswish_backward": (
        "exclusive-bounds sign-slip sixth-slope unclamped-top",
        "stable-formula true-division"),
    "hardtanh_backward": (
        "hardtanh-bounds-swapped hardtanh-inclusive-window hardtanh-multiply-mask hardtanh-nan-blocked",
        "hardtanh-clamp-compare"),
    "kl_div_backward": (
        "cof-in-half kl-batchmean-as-mean kl-divisor-from-target kl-log-target-swapped kl-positive-target-mask "
        "kl-reduction-codes-swapped kl-sign-slip mean-forgotten",
        "kl-aten-order kl-float-cof"),
    "l1_loss_backward": (
        "cof-in-half mean-by-self-numel mean-forgotten nan-sign-propagates sign-slip subgradient-one-at-zero",
        "divide-by-n reciprocal-once"),
    "layer_norm_backward": (
        "ln-bessel-divisor ln-bf16-accumulation ln-drop-last-element ln-fp16-accumulation ln-gamma-in-weight-grad "
        "ln-last-axis-only ln-mean-rstd-swapped ln-no-final-rstd ln-no-mean-term ln-s2-sign-flip "
        "ln-sums-across-rows",
        "ln-aten-formula ln-doc-order ln-sequential"),
    "layer_norm_grad": (
        "lng-bessel-divisor lng-bf16-accumulation lng-drop-last-element lng-fp16-accumulation "
        "lng-fp16-eps-on-fp32 lng-gamma-in-weight-grad lng-no-epsilon lng-no-final-rstd lng-no-mean-term lng-s2-sign-flip "
        "lng-sqrt-not-rsqrt lng-sums-across-rows lng-variance-as-rstd lng-variance-mean-swapped",
        "lng-aten-formula lng-divide-sqrt-doc-order lng-rounded-rsqrt lng-sequential"),
    "leaky_relu_backward": (
        "inclusive-zero sign-slip swapped-branches zero-slope",
        "blend-formula mask-multiply"),
    "log_sigmoid_backward": (
        "exp-overflow reads-buffer sign-slip",
        "stable-formula"),
    "logit_grad": (
        "logit-eps-ignored logit-open-window logit-reciprocal logit-sign-slip logit-zero-outside",
        "logit-divide-twice logit-exact-window"),
    "l2_normalize_grad": (
        "l2n-dropped-element l2n-eps-as-min l2n-flipped-sum l2n-half-accumulation l2n-missing-sum l2n-multiply-norm "
        "l2n-no-sqrt l2n-x-for-y",
        "l2n-reciprocal l2n-torch-order l2n-tree-everywhere"),
    "log_softmax_backward": (
        "logsoftmax-dropped-element logsoftmax-flipped-sum logsoftmax-half-accumulation logsoftmax-missing-exp "
        "logsoftmax-missing-sum logsoftmax-wrong-axis",
        "logsoftmax-aten-order logsoftmax-exp-2ulp"),
    "max_pool2d_with_indices_backward": (
        "maxpool-accumulate-fp16 maxpool-first-in-window maxpool-index-transposed maxpool-last-write-wins",
        "maxpool-columns maxpool-reversed"),
    "max_pool2d_with_mask_backward": (
        "maxpool-mask-accumulate-fp16 maxpool-mask-first-in-window maxpool-mask-index-axes-reversed "
        "maxpool-mask-last-maximum maxpool-mask-last-write-wins maxpool-mask-padding-ignored",
        "maxpool-mask-columns maxpool-mask-reversed"),
    "max_pool3d_with_argmax_backward": (
        "maxpool3d-accumulate-fp16 maxpool3d-first-in-window maxpool3d-index-axes-reversed maxpool3d-last-maximum "
        "maxpool3d-last-write-wins maxpool3d-padding-ignored",
        "maxpool3d-columns maxpool3d-reversed"),
    "mish_backward": (
        "mish-no-sigmoid mish-one-branch mish-tanh-of-x sign-slip",
        "mish-sech-form"),
    "mish_grad": (
        "mishgrad-exp-of-x mishgrad-sign-slip mishgrad-tanhx-ignored",
        "mishgrad-sigmoid-form"),
    "prelu_backward": (
        "prelu-bf16-accumulation prelu-fp16-accumulation prelu-mask-multiplied prelu-swapped-branches "
        "prelu-weight-grad-first-sample prelu-weight-grad-positive-side prelu-weight-grad-unmasked "
        "prelu-weight-of-first-channel prelu-zero-as-positive",
        "prelu-float32-products prelu-sample-major prelu-sequential"),
    "mse_loss_backward": (
        "cof-in-half divide-last factor-two-dropped graph-input-order integer-cof mean-by-output-numel "
        "mean-forgotten reduction-codes-swapped sign-slip",
        "aten-formula dy-first v2-cof"),
    "nll_loss_backward": (
        "nll-drop-last-class nll-ignore-unchecked nll-mean-batch-divisor nll-mean-no-divide nll-no-weight "
        "nll-sign-flip nll-swapped-axes",
        "nll-reciprocal-mean nll-weight-first"),
    "nll_loss2d_backward": (
        "nll-drop-last-class nll-ignore-unchecked nll-mean-batch-divisor nll-mean-no-divide nll-no-weight "
        "nll-sign-flip nll2d-channels-last",
        "nll-reciprocal-mean nll-weight-first"),
    "repeat_interleave_grad": (
        "rig-bf16-accumulation rig-first-only rig-fp16-accumulation rig-last-run-dropped rig-off-by-one "
        "rig-wrong-axis",
        "rig-chunks-64 rig-pairwise rig-reversed rig-sequential"),
    "rms_norm_grad": (
        "rms-bf16-accumulation rms-dgamma-with-gamma rms-dgamma-without-rstd rms-drop-last-element "
        "rms-fp16-accumulation rms-last-axis-only rms-mean-term-sign-flip rms-no-final-rstd rms-no-mean-term "
        "rms-padded-divisor rms-sum-down-columns",
        "rms-aten-decomposition rms-fused-mul-add rms-sequential"),
    "selu_backward": (
        "selu-doc-formula selu-nan-negative-branch selu-negcoef-alpha-only selu-scale-dropped selu-strict-zero",
        "selu-one-rounding"),
    "sigmoid_backward": (
        "cancelling-formula complex64-compute conj-missing graph-input-order output-as-input product-first "
        "real-part-only sign-slip",
        "conj-each"),
    "silu_backward": (
        "exp-overflow expanded-formula sign-slip",
        "stable-formula"),
    "smooth_l1_loss_backward": (
        "beta-ignored cof-in-half mean-by-output-numel mean-forgotten sign-slip",
        "aten-order closed-compares"),
    "soft_margin_loss_backward": (
        "cof-in-half exp-sign-flipped mean-by-self-numel mean-forgotten sign-slip",
        "aten-order"),
    "softmax_backward": (
        "softmax-dropped-element softmax-flipped-sum softmax-graph-input-order softmax-half-accumulation "
        "softmax-logsoftmax-sum softmax-missing-sum softmax-wrong-axis",
        "softmax-aten-order softmax-fused-multiply-add"),
    "softmax_grad_ext": (
        "sgext-dropped-element sgext-flipped-sum sgext-half-accumulation sgext-missing-sum sgext-scale-first-element "
        "sgext-scale-ignored sgext-swapped-inputs",
        "sgext-golden-order sgext-sequential-short-rows sgext-tree-short-rows"),
    "softplus_backward": (
        "exp-overflow inclusive-threshold no-threshold sign-slip threshold-on-x",
        "multiply-form stable-formula"),
    "softshrink_backward": (
        "softshrink-forward-value softshrink-inclusive softshrink-nan-blocked softshrink-one-sided",
        "softshrink-two-compares"),
    "swi_glu_grad": (
        "swiglu-halves-swapped swiglu-interleaved swiglu-no-derivative-term swiglu-out-b-without-a "
        "swiglu-sign-slip",
        "swiglu-silu-first swiglu-stable"),
    "swish_backward": (
        "beta-ignored beta-once exp-overflow expanded-formula sign-slip y-as-forward-output",
        "fused-multiply-add stable-formula"),
    "threshold_backward": (
        "threshold-ignored threshold-inclusive threshold-inverted threshold-nan-blocked threshold-cast-to-dtype "
        "threshold-int-through-half",
        "threshold-compare-wide"),
    USER_KEY: ("inclusive-window", ""),  # (USER_OP, loaded as a user's run loads it)
}

# op key: (fewest cases, most cases, output elements under) of its case file; "*" any other op. The loss ops' files
# are held to the realistic size each op brings (and the suite's time): 60 to 130 cases, under 2 M elements.
_LOSS_SIZE = (60, 130, 2_000_000)
SMALL = {"*": (40, 280, 11_000_000), "mse_loss_backward": (101, 280, 4_000_000), USER_KEY: (3, 40, 10_000),
         **dict.fromkeys(("binary_cross_entropy_backward", "binary_cross_entropy_with_logits_backward",
                          "kl_div_backward", "l1_loss_backward", "smooth_l1_loss_backward", "soft_margin_loss_backward"), _LOSS_SIZE)}

# check: {op key: why the op is let off it} ("stub header": test_the_prototype_is_the_stub_headers); none is now
OPT_OUT: dict[str, dict[str, str]] = {}

# the C type of each declared parameter kind in an aclnn prototype
C_TYPES = {"tensor": {"aclTensor*"}, "int": {"int64_t", "int8_t", "uint64_t", "int"}, "float": {"float"},
           "double": {"double"}, "scalar": {"aclScalar*"}, "bool": {"bool"}, "bool_list": {"aclBoolArray*"},
           "int_list": {"aclIntArray*"}, "string": {"char*"}}


def test_names(place: str) -> tuple[Path, str] | None:
    """(the file, the test) of a "file::test" place; None for a shared one."""
    if "::" not in place:
        return None
    name, test = place.split("::")
    return HERE / name, test


def prototype(op, include: Path = STUB_INCLUDE) -> list[tuple[str, str]]:
    """(C type, name) of each parameter of <op>GetWorkspaceSize in the op's declared header."""
    text = (include / op.api_header).read_text()
    found = re.search(rf"\b{op.name}GetWorkspaceSize\s*\(([^)]*)\)", text)
    assert found, f"{op.api_header} declares no {op.name}GetWorkspaceSize"
    params = []
    for p in found.group(1).split(","):
        p = " ".join(p.replace("*", "* ").split()).removeprefix("const ")
        c_type, _, name = p.rpartition(" ")
        params.append((c_type.replace(" *", "*").replace("* ", "*").strip(), name))
    return params


def exact_at_disagreements(op, m) -> tuple[int, list]:
    """Every element of every output of a (small, finite) case's blocks through `exact` whole and through `exact_at`
    asked for all of them (golden/rows.py's two ways in): (elements compared, [(output, position, whole, at)] that
    differ; where both are approximations of an irrational value (a square root's 60 digits) they may differ by
    1e-50 relative)."""
    from aclnn_cli.golden.rows import exact_block, exact_elements

    from independent_rows import case_blocks

    attrs = m.attribute_values
    block = {k: v for k, v in case_blocks(m).items() if k not in attrs}
    whole = exact_block(op, block, attrs)
    compared, wrong = 0, []
    for name, values in whole.items():
        flat = np.asarray(values, dtype=object).reshape(-1)
        at = exact_elements(op, block, attrs, name, np.arange(flat.size))
        for i, (a, b) in enumerate(zip(flat, at)):
            if a != b and abs(Fraction(a) - Fraction(b)) > abs(Fraction(a)) * Fraction(1, 10**50):
                wrong.append((name, i, a, b))
        compared += flat.size
    return compared, wrong
