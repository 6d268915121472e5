"""The window family's arithmetic (aclnn_cli/ops/families/window.py) against brute force written here: the number of
windows as ops-nn's tiling computes it (avg_pool_v2_grad_tiling_base.cpp, CheckGradShapeForCalculated, C++ integer
division) and PyTorch's pooling_output_shape, and which input positions each window covers, counted with and without
the padding, over every small geometry the contract accepts (padding at most half the kernel)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from aclnn_cli.ops.families.window import AxisWindows, Window, pooled_size

from clifork import cli_process


def tiling_size(n: int, k: int, s: int, p: int, ceil: bool) -> int:
    """CheckGradShapeForCalculated, with C++'s division (the operands are never negative here)."""
    if ceil:
        out = (n - k + 2 * p + s - 1) // s + 1
        if (out - 1) * s >= n + p:
            out -= 1
        return out
    return (n - k + 2 * p) // s + 1


GEOMETRIES = [(n, k, s, p, ceil) for n, k, s in itertools.product(range(1, 13), range(1, 7), range(1, 5))
              for p in range(0, k // 2 + 1) for ceil in (False, True) if n + 2 * p >= k]


@pytest.mark.parametrize("ceil", [False, True])
def test_the_number_of_windows_is_the_tilings(ceil):
    for n, k, s, p, c in GEOMETRIES:
        if c == ceil:
            assert pooled_size(n, k, s, p, 1, ceil) == tiling_size(n, k, s, p, ceil), (n, k, s, p, ceil)


def test_coverage_and_counts_are_brute_forces():
    for n, k, s, p, ceil in GEOMETRIES:
        out = pooled_size(n, k, s, p, 1, ceil)
        a = AxisWindows(n, out, k, s, p)
        want = np.zeros((out, n), np.int64)
        padded = []
        for o in range(out):
            start = o * s - p
            for i in range(start, start + k):
                if 0 <= i < n:
                    want[o, i] = 1
            padded.append(min(start + k, n + p) - start)  # (the SIMT kernel's poolSize along one axis)
        assert np.array_equal(a.cover(), want), (n, k, s, p, ceil)
        assert list(a.padded()) == padded and list(a.clipped()) == list(want.sum(axis=1))
        first, last = a.first_last()
        for i in range(n):
            assert list(range(first[i], last[i])) == list(np.flatnonzero(want[:, i]))
            got = a.covering()[i]
            assert list(got[got >= 0]) == list(np.flatnonzero(want[:, i]))


def test_dilation_spreads_a_window():
    a = AxisWindows(10, pooled_size(10, 3, 2, 1, 2), 3, 2, 1, 2)
    assert a.out == 4
    assert [list(np.flatnonzero(r)) for r in a.cover()] == [[1, 3], [1, 3, 5], [3, 5, 7], [5, 7, 9]]


def test_parameters_take_one_value_for_both_axes_and_an_empty_stride_is_the_kernel():
    fam = Window(driver="self")
    k, s, p, d, ceil = fam.parameters({"kernelSize": (3,), "stride": (), "padding": (1, 0), "ceilMode": True})
    assert (k, s, p, d, ceil) == ((3, 3), (3, 3), (1, 0), (1, 1), True)
    assert fam.parameters({"kernelSize": (3, 2), "stride": None, "padding": (0,)})[1] == (3, 2)


class _Op:
    def __init__(self):
        from aclnn_cli.ops.base import TensorSpec

        self.tensors = (TensorSpec("gradOutput", "input", {}), TensorSpec("self", "input", {}),
                        TensorSpec("gradInput", "output", {}))


def test_shapes_follow_the_forward_and_another_is_named():
    fam = Window(driver="self")
    attrs = {"kernelSize": (3,), "stride": (2,), "padding": (1,), "ceilMode": False}
    shapes = fam.case_shapes(_Op(), (2, 3, 9, 8), attrs, {})
    assert shapes == {"gradOutput": (2, 3, 5, 4), "self": (2, 3, 9, 8), "gradInput": (2, 3, 9, 8)}
    assert fam.shape_problem(_Op(), shapes, attrs) is None
    geo = fam.geometry(shapes, attrs)
    assert (geo.a1, geo.r, geo.a0) == (6, 9, 8)
    own = fam.own_geometry("gradOutput", shapes, attrs, geo)
    assert (own.a1, own.r, own.a0) == (6, 5, 4)
    bad = dict(shapes, gradOutput=(2, 3, 5, 5))
    assert "pool [9, 8] into [5, 4]" in fam.shape_problem(_Op(), bad, attrs)
    assert "leading axes" in fam.shape_problem(_Op(), dict(shapes, gradOutput=(2, 4, 5, 4)), attrs)
    assert "leave no window" in fam.shape_problem(_Op(), {**shapes, "gradOutput": shapes["self"]},
                                                  {"kernelSize": (30,), "padding": (0,)})


def test_three_spatial_axes_cut_a_volume_into_rows_d_h_of_w():
    """spatial=3: one value per axis (one value every axis's), a block per (n, c) volume with R = D H, the pooled
    tensor's R = Do Ho; pool.windows unfolds the blocks with the depths the op's case_values give."""
    from aclnn_cli.ops.window import pool

    fam = Window(driver="self", spatial=3)
    k, s, p, d, _ = fam.parameters({"kernelSize": (3,), "stride": (), "padding": (1, 0, 1)})
    assert (k, s, p, d) == ((3, 3, 3), (3, 3, 3), (1, 0, 1), (1, 1, 1))
    attrs = {"kernelSize": (3, 2, 1), "stride": (2, 2, 1), "padding": (1, 0, 0), "ceilMode": False}
    shapes = fam.case_shapes(_Op(), (2, 3, 7, 8, 5), attrs, {})
    assert shapes["gradOutput"] == (2, 3, 4, 4, 5) and fam.shape_problem(_Op(), shapes, attrs) is None
    geo = fam.geometry(shapes, attrs)
    assert (geo.a1, geo.r, geo.a0) == (6, 56, 5)
    own = fam.own_geometry("gradOutput", shapes, attrs, geo)
    assert (own.a1, own.r, own.a0) == (6, 16, 5)
    assert "(N, C, D, H, W) or (C, D, H, W)" in fam.shape_problem(_Op(), {**shapes, "self": (2, 3, 7, 8)}, attrs)
    assert "pool [7, 8, 5] into [4, 4, 5]" in fam.shape_problem(_Op(), {**shapes, "gradOutput": (2, 3, 4, 5, 5)}, attrs)
    t = {"self": np.zeros((6, 56, 5)), "gradOutput": np.zeros((6, 16, 5)), **attrs,
         **pool.depths(fam)(shapes)}
    axes = pool.windows(fam, t)
    assert [(a.n, a.out, a.k, a.s, a.p) for a in axes] == [(7, 4, 3, 2, 1), (8, 4, 2, 2, 0), (5, 5, 1, 1, 0)]
    assert pool.volume(t["gradOutput"], axes, pooled=True).shape == (6, 4, 4, 5)
    counts = pool.counts(axes)
    assert counts.shape == (7, 8, 5) and counts[1, 0, 0] == 2 and counts[0, 0, 0] == 1  # (D: windows 0 and 1 share 1)


def test_a_window_naming_what_the_op_has_not_is_one_line(tmp_path):
    """declcheck: the window family's pooled tensor is an input besides the driver, its window attributes int lists
    (ceil mode a bool) of the op."""

    module = tmp_path / "my_pool.py"
    module.write_text('''
import numpy as np
from aclnn_cli.ops import register
from aclnn_cli.ops.base import AttrSpec, OpSpec, Reference, TensorSpec
from aclnn_cli.ops.families import Window

def reference(t):
    z = np.zeros(t["self"].shape)
    return Reference(z, z, z)

SPEC = register(OpSpec(
    name="aclnnMyPoolGrad", key="my_pool_grad", summary="s", formula="f",
    tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}), TensorSpec("self", "input", {"normal": [0, 1]}),
             TensorSpec("gradInput", "output", {"constant": 0})),
    attributes=(AttrSpec("kernelSize", "int_list"), AttrSpec("padding", "int"), AttrSpec("ceilMode", "bool")),
    products={"950": ("float32",)}, dims=(3, 4), empty_ok=False,
    family=Window(driver="self", grad="gradOutput", stride=None),
    reference=reference))
''')
    r = cli_process("--ops", str(module), "ops")
    assert r.returncode == 2 and "family.padding" in r.stderr and "int_list" in r.stderr, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not r.stdout.strip()
