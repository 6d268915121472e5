"""Issue 18 (part 1): tolerance ranges that follow from the property.

A tolerance value is accepted only if, with it, a sign-flipped and an all-zero result of ordinary
magnitude still FAIL, for every standard, op and dtype, from the command line and from YAML; values
just outside are refused (one line, exit 2, naming the key, the standard and the range), and so are
values no result could meet. The ranges and the meaning of "ordinary" are in tolerances.py.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.casedir import manifest as M
from aclnn_cli.judge.comparison import Options, compare_range, tolerance_dtype
from aclnn_cli.judge.judging import OutputJudging, case_judging, complex_gamma
from aclnn_cli.judge.verify import check_run_tolerances
from aclnn_cli.cli.verdicts import _tolerances  # (the command line's KEY=VALUE parser)
from aclnn_cli.standards.rules import STANDARDS, find_standard

from gate_edges import (BROKEN, DTYPES, TUNABLE, assert_ordinary, case_dirs, distinct_edges, every_op, op_dtypes,
                        outside_values, suite_yaml, write_broken)
from shared import linked_copy
from helpers import one_line_error, run_cli, write_yaml

HARDSIGMOID_WIDE = """
op: aclnnHardsigmoidBackward
cases:
  - {name: a, dtype: float32, shape: [512], seed: 1, inputs: {self: {uniform: [-8, 8]}}}
  - {name: h, dtype: float16, shape: [512], seed: 1, inputs: {self: {uniform: [-8, 8]}}}
"""


def _gen(tmp_path, text, name="cases.yaml", out="out"):
    r = run_cli("gen", write_yaml(tmp_path, text, name), "-o", tmp_path / out)
    assert r.exit_code == 0, r.output
    return tmp_path / out


def _one_line_refusal(r, *needles):
    return one_line_error(r, *needles, ignore=("gen: ", "verify: "))  # (the commands' progress lines aside)


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """HardsigmoidBackward over [-8, 8] (most goldens 0): the outside tester's case, broken both ways."""
    tmp = tmp_path_factory.mktemp("wide")
    out = _gen(tmp, HARDSIGMOID_WIDE)
    return out


def _verify_broken(out, broken, *args):
    for case in case_dirs(out):
        write_broken(case, broken)
    return run_cli("verify", out, *args)


# --- The outside tester's probes: each failed (exit 0, or a never-meetable value accepted) before -------

@pytest.mark.parametrize("broken", BROKEN)
def test_probe_ulp_share_one_is_refused(wide, broken):
    r = _verify_broken(wide, broken, "--standard", "ulp", "--tolerance", "share=1.0")
    _one_line_refusal(r, "tolerance 'share'", "standard 'ulp'", "(0, 0.25]", "got 1")


@pytest.mark.parametrize("broken", BROKEN)
def test_probe_thousandth_tiny_share_is_refused(wide, broken):
    r = _verify_broken(wide, broken, "--standard", "thousandth", "--tolerance", "share=1e-30")
    _one_line_refusal(r, "tolerance 'share'", "standard 'thousandth'", "[0.75, 1)", "got 1e-30")


@pytest.mark.parametrize("broken", BROKEN)
def test_probe_T_half_alone_is_refused_and_with_mare_one_still_fails(wide, broken):
    r = _verify_broken(wide, broken, "--tolerance", "T=0.5")
    _one_line_refusal(r, "tolerance 'T'", "mare*T = 5 (mare 10, T 0.5) must be at most 0.5", "T must be in (0, 0.05]",
                      "standard 'mere-mare'")
    r = run_cli("verify", wide, "--tolerance", "T=0.5", "--tolerance", "mare=1")
    assert r.exit_code == 1 and "2 FAIL" in r.output, r.output


@pytest.mark.parametrize("broken", BROKEN)
def test_probe_benchmark_huge_ratios_are_refused_from_the_command_line(wide, broken):
    r = _verify_broken(wide, broken, "--standard", "benchmark", "--tolerance", "ratio=1e6", "--tolerance",
                       "max_rel_ratio=1e6")
    _one_line_refusal(r, "tolerance 'ratio'", "standard 'benchmark'", "[1, 128] for float16", "got 1e+06")
    r = run_cli("verify", wide, "--standard", "benchmark", "--tolerance", "ratio=128")  # the top: still fails
    assert r.exit_code == 1 and "2 FAIL" in r.output, r.output


def test_probe_benchmark_huge_ratios_are_refused_from_a_case_file(tmp_path):
    text = ("op: aclnnHardsigmoidBackward\ncases:\n  - {name: h, dtype: float16, shape: [64], standard: benchmark, "
            "tolerance: {ratio: 1e6, max_rel_ratio: 1e6}, inputs: {self: {uniform: [-8, 8]}}}\n")
    r = run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / "out")
    _one_line_refusal(r, "cases.yaml", "case 'h'", "tolerance.ratio", "standard 'benchmark'", "[1, 128] for float16")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_probe_thousandth_share_one_from_yaml_is_refused_as_never_met(tmp_path):
    text = ("op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: float32, shape: [64], standard: thousandth, "
            "tolerance: {share: 1.0}}\n")
    r = run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / "out")
    _one_line_refusal(r, "case 'a'", "tolerance.share", "standard 'thousandth'", "[0.75, 1)", "got 1")
    r = run_cli("gen", write_yaml(tmp_path, text.replace("1.0}", "0.999999}")), "-o", tmp_path / "out")
    assert r.exit_code == 0, r.output  # just under 1: a correct dump passes
    assert run_cli("emulate", tmp_path / "out").exit_code == 0
    assert run_cli("verify", tmp_path / "out").exit_code == 0


def test_probe_T_half_from_yaml_is_refused_naming_the_joint_bound(tmp_path):
    text = "op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: float32, shape: [64], tolerance: {T: 0.5}}\n"
    r = run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / "out")
    _one_line_refusal(r, "case 'a'", "tolerance.T", "mare*T", "standard 'mere-mare'")
    r = run_cli("gen", write_yaml(tmp_path, text.replace("{T: 0.5}", "{T: 0.5, mare: 1}")), "-o", tmp_path / "out")
    assert r.exit_code == 0, r.output


# --- Every accepted edge fails a sign flip and zeros: every standard, op and dtype --------------------

@pytest.fixture(scope="module")
def every(tmp_path_factory):
    """Per dtype, an out directory with every op in the registry, a sign-flipped and a zero copy of each;
    each case checked to be of ordinary magnitude (tolerances.py)."""
    tmp = tmp_path_factory.mktemp("every")
    outs = {}
    for d in DTYPES:
        ops = [op for op in every_op() if d in op_dtypes(op)]
        files = [write_yaml(tmp / d, suite_yaml(op, dtypes=(d,)), f"{op.key}.yaml") for op in ops]
        outs[d] = tmp / d / "out"
        r = run_cli("gen", *files, "-o", outs[d])
        assert r.exit_code == 0, r.output
        dirs = case_dirs(outs[d])
        assert len(dirs) == len(ops) * len(BROKEN)
        for case in dirs:
            assert_ordinary(M.load(case))
            write_broken(case, "sign" if case.name.split("-")[1] == "sign" else "zero")
    return outs


@pytest.mark.parametrize("std_name", TUNABLE)
def test_every_accepted_edge_fails_broken_dumps_through_the_judge(every, std_name):
    std = find_standard(std_name)
    checked = 0
    for out in every.values():
        for case in case_dirs(out):
            m = M.load(case)
            # every output, and for a Rows op also its second look (every element against its term scale)
            looks = (False, True) if m.op.family.shared_errors else (False,)
            for out in m.judged:
                dtype, floor = tolerance_dtype(m, out)
                for edge, relieve_all in itertools.product(distinct_edges(std, dtype), looks):
                    params = std.params(dtype, edge.values)  # accepted
                    opts = Options(standard=std_name, relieve_all=relieve_all)
                    judged = OutputJudging(out, std, params, dtype, floor,
                                           complex_gamma(m, out) if out.dtype.is_complex else None)
                    metrics, bench, _ = compare_range(m, opts, 0, out.layout.numel, judged=judged, out_name=out.name)
                    verdict = std.judge(metrics, params, dtype, bench)
                    assert not verdict.passed, (m.case_id, out.name, edge, relieve_all, verdict.reason)
                    checked += 1
    assert checked >= sum(len(op_dtypes(op)) for op in every_op()) * len(BROKEN) * 4


def family_ops():
    """One bundled op per family (the first by key of those taking every dtype). The command line and case files
    carry a tolerance to the same judge whatever the op; the judge-level test above runs every op at every accepted
    edge, and the two below prove the carrying once per way a family judges."""
    first = {}
    for op in every_op():
        if op_dtypes(op) == DTYPES:
            first.setdefault(type(op.family).__name__, op)
    return list(first.values())


@pytest.fixture(scope="module")
def every_family(every, tmp_path_factory):
    """`every`'s broken cases of family_ops() only, per dtype (their files linked: verify writes none of them)."""
    keys = tuple(f"{op.key}-" for op in family_ops())
    outs = {}
    for d, out in every.items():
        names = [c.name for c in case_dirs(out) if c.name.startswith(keys)]
        outs[d] = linked_copy(out, tmp_path_factory.mktemp(f"family-{d}") / "out", cases=names, dumps=True)
    return outs


def _verdicts(junit) -> list[tuple[str, str]]:
    """(status, standard) of every case of a verify run's JUnit XML (the failure's text begins "STATUS (standard):";
    a case that passed has none: PASS, its standard unread). JUnit, not the JSON: a run with --json also gathers
    the HTML report's error data, which these runs would spend most of their time on and never read."""
    import xml.etree.ElementTree as ET

    out = []
    for tc in ET.parse(junit).getroot().iter("testcase"):
        failed = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
        if failed is None:
            out.append(("PASS", "?"))
        else:
            head = failed.text.split(":", 1)[0]
            out.append((failed.get("type"), head.split(" (", 1)[1].rstrip(")")))
    return out


def _tolerance_pairs(values):
    return [f"{k}={v!r}" for k, v in values.items()]


def _tolerance_args(values):
    return [a for pair in _tolerance_pairs(values) for a in ("--tolerance", pair)]


def _carried(manifests, opts: Options, std, edge) -> None:
    """Every output of every case is judged by `std` with exactly `edge`'s values (case_judging: what verify builds
    for it from the run's options and the manifest; a refused value raises)."""
    for m in manifests:
        for judged in case_judging(m, opts):
            assert judged.std.name == std.name, (m.case_id, judged.std.name)
            assert judged.params == std.params(judged.dtype, edge.values), (m.case_id, edge)


@pytest.mark.parametrize("std_name", TUNABLE)
def test_every_accepted_edge_fails_broken_dumps_through_the_cli(every_family, tmp_path, std_name):
    """Per dtype, one `verify --standard --tolerance` round trip at the all-maxima corner (every key on the command
    line): every case FAIL. Then every edge from the same KEY=VALUE text the command's parser reads: the run's
    tolerances are checked against every case and reach the judge as the edge's exact values (_carried), and the
    judge-level test above fails broken dumps of every op at each of those values."""
    std = find_standard(std_name)
    for d, out in every_family.items():
        edges = distinct_edges(std, D.lookup(d))
        carried = next(e for e in edges if e.label == f"corner {'+' * len(e.values)}")
        r = run_cli("verify", out, "-j", "1", "--standard", std_name, *_tolerance_args(carried.values), "--junit",
                    tmp_path / "v.xml")
        assert r.exit_code == 1, (d, carried, r.output)
        statuses = {status for status, _ in _verdicts(tmp_path / "v.xml")}
        assert statuses == {"FAIL"}, (d, carried, statuses)
        manifests, broken = M.load_all(case_dirs(out))
        assert manifests and not broken, broken
        for edge in edges:
            opts = Options(standard=std_name, tolerance=_tolerances(None, None, _tolerance_pairs(edge.values)))
            check_run_tolerances(manifests, opts)  # (accepted: a refusal raises)
            _carried(manifests, opts, std, edge)


@pytest.mark.parametrize("std_name", TUNABLE)
def test_every_accepted_edge_from_yaml_fails_broken_dumps(tmp_path, std_name):
    """The same edges carried by case files (standard and tolerance in YAML; an op of each family: family_ops): gen
    accepts every one, and each case's manifest reaches the judge with its edge's exact values (_carried); the
    judge-level test above fails broken dumps of every op at each. End to end, the all-maxima corner of each dtype:
    gen, break the dumps, verify: every case FAIL, judged by this standard."""
    std = find_standard(std_name)
    files, edge_of, corner = [], {}, []
    for op in family_ops():
        lines = [f"op: {op.name}", "cases:"]
        for d in DTYPES:
            for i, edge in enumerate(distinct_edges(std, D.lookup(d))):
                tol = ", ".join(f"{k}: {v!r}" for k, v in edge.values.items())
                one = suite_yaml(op, names=(f"e{i}",), shape=64, extra=f", standard: {std_name}, tolerance: {{{tol}}}",
                                 dtypes=(d,)).splitlines()
                lines += one[2:]
                edge_of[f"{op.key}-e{i}-{d}"] = edge
                if edge.label == f"corner {'+' * len(edge.values)}":
                    corner.append(f"{op.key}-e{i}-{d}")
        files.append(write_yaml(tmp_path, "\n".join(lines) + "\n", f"{op.key}.yaml"))
    out = tmp_path / "out"
    r = run_cli("gen", *files, "-o", out, "-j", "1")  # (in this process: ~1,000 small cases, no worker pays its way)
    assert r.exit_code == 0, r.output
    manifests, broken = M.load_all(case_dirs(out))
    assert sorted(m.case_id for m in manifests) == sorted(edge_of) and not broken
    for m in manifests:
        _carried([m], Options(), std, edge_of[m.case_id])
    ends = linked_copy(out, tmp_path / "corner", cases=corner)
    assert len(corner) == len(family_ops()) * len(DTYPES)
    for broken_kind in BROKEN:
        for case in case_dirs(ends):
            write_broken(case, broken_kind)
        r = run_cli("verify", ends, "-j", "1", "--junit", tmp_path / "v.xml")
        assert r.exit_code == 1, r.output
        verdicts = _verdicts(tmp_path / "v.xml")
        assert len(verdicts) == len(corner) and {standard for _, standard in verdicts} == {std_name}
        assert {status for status, _ in verdicts} == {"FAIL"}, (broken_kind, verdicts)


# --- Just outside the range: refused, from both sources ---------------------------------------------

@pytest.mark.parametrize("std_name", TUNABLE)
def test_just_outside_values_are_refused_from_the_command_line(every, std_name):
    std = find_standard(std_name)
    for d in DTYPES:
        dtype = D.lookup(d)
        for key, value, why in outside_values(std, dtype):
            with pytest.raises(ValueError) as exc:
                std.params(dtype, {key: value})
            assert f"tolerance '{key}'" in str(exc.value) and f"standard '{std_name}'" in str(exc.value)
            r = run_cli("verify", every[d], "--standard", std_name, "--tolerance", f"{key}={value!r}")
            line = _one_line_refusal(r, f"tolerance '{key}'", f"standard '{std_name}'")
            rng = std.ranges[key]
            if why == "joint":  # the range that is left with the other keys at their defaults
                top = next(j for j in std.joints if key in j.keys).top(key, std.defaults(dtype))
                assert f"{key} must be in (0, {top:g}]" in line and "must be at most" in line, line
            else:
                assert rng.text(dtype) in line, line


@pytest.mark.parametrize("std_name", TUNABLE)
def test_just_outside_values_are_refused_from_yaml(tmp_path, std_name):
    std = find_standard(std_name)
    for d in DTYPES:
        for key, value, why in outside_values(std, D.lookup(d)):
            text = (f"op: aclnnSiluBackward\ncases:\n  - {{name: c, dtype: {d}, shape: [16], standard: {std_name}, "
                    f"tolerance: {{{key}: {value!r}}}}}\n")
            r = run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / "out")
            _one_line_refusal(r, "cases.yaml", "case 'c'", f"key 'tolerance.{key}'", f"standard '{std_name}'")
            assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("std_name, key, value, text", [
    ("thousandth", "share", 1.0, "[0.75, 1)"),  # within > share: never true at 1
    ("thousandth", "share", 2.0, "[0.75, 1)"),
    ("benchmark", "ratio", 0.5, "[1, "),  # a device identical to the benchmark would fail
    ("benchmark", "max_rel_ratio", 0.99, "[1, 1e+06]"),
])
def test_never_meetable_values_are_refused(every, tmp_path, std_name, key, value, text):
    r = run_cli("verify", every["float32"], "--standard", std_name, "--tolerance", f"{key}={value}")
    _one_line_refusal(r, f"tolerance '{key}'", f"standard '{std_name}'", text)
    yaml = (f"op: aclnnSiluBackward\ncases:\n  - {{name: c, dtype: float32, shape: [16], standard: {std_name}, "
            f"tolerance: {{{key}: {value}}}}}\n")
    r = run_cli("gen", write_yaml(tmp_path, yaml), "-o", tmp_path / "out")
    _one_line_refusal(r, f"key 'tolerance.{key}'", text)


def test_yaml_and_command_line_tolerances_are_judged_together(tmp_path):
    """A case's T and the run's mare meet in the joint bound: the merged values are checked (exit 2)."""
    text = "op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: float32, shape: [64], tolerance: {T: 0.05}}\n"
    out = _gen(tmp_path, text)
    assert run_cli("emulate", out).exit_code == 0
    assert run_cli("verify", out).exit_code == 0
    r = run_cli("verify", out, "--tolerance", "mare=20")
    assert r.exit_code == 2 and "mare*T" in r.output and "Traceback" not in r.output, r.output


def test_defaults_sit_inside_every_range():
    for std in STANDARDS.values():
        for d in DTYPES:
            dtype = D.lookup(d)
            p = std.params(dtype)
            assert std.params(dtype, p) == p
            for k, v in p.items():
                assert std.ranges[k].contains(v, dtype), (std.name, d, k, v)


def test_correct_kernels_pass_at_every_accepted_edge_of_the_strict_side(tmp_path):
    """The edges that are hardest to meet (thousandth share just under 1, benchmark ratio 1) are meetable."""
    out = _gen(tmp_path, suite_yaml(find_op_silu(), names=("ok",), shape=64))
    assert run_cli("emulate", out).exit_code == 0
    share = float(np.nextafter(1.0, 0.0))
    assert run_cli("verify", out, "--standard", "thousandth", "--tolerance", f"share={share!r}").exit_code == 0
    assert run_cli("verify", out, "--standard", "benchmark", "--tolerance", "ratio=1").exit_code == 0


def find_op_silu():
    from aclnn_cli.ops import OPS
    return OPS["aclnnSiluBackward"]


def test_an_unknown_tolerance_name_with_control_characters_is_one_line(every):
    """Found by the fuzz target: the name was echoed raw, a carriage return split the line."""
    r = run_cli("verify", every["float16"], "--tolerance", "a\rb\nc=1")
    _one_line_refusal(r, "has no tolerance 'a\\rb\\nc'", "standard 'mere-mare'")


def test_allclose_atol_and_rtol_are_bounded_together(every):
    """allclose's bound atol + rtol|g| at |g| = 1/8 stays under 3/4 of it: a small rtol leaves room for atol."""
    std = find_standard("allclose")
    assert std.params(D.FLOAT16, {"atol": 0.09})["atol"] == 0.09  # rtol 1e-3: 0.09 + 0.000125 <= 0.09375
    r = run_cli("verify", every["float16"], "--standard", "allclose", "--tolerance", "atol=0.09")
    assert r.exit_code == 1 and "0 PASS" not in r.output and "PASS" not in r.output.splitlines()[-1], r.output
    r = run_cli("verify", every["float16"], "--standard", "allclose", "--rtol", "0.5", "--atol", "0.05")
    _one_line_refusal(r, "tolerance 'rtol': atol + 0.125*rtol = 0.1125 (atol 0.05, rtol 0.5) must be at most 0.09375",
                      "with atol 0.05, rtol must be in (0, 0.35]", "standard 'allclose'")


def test_a_manifest_from_an_older_gen_with_a_refused_value_is_that_cases_error(tmp_path):
    """Older gens accepted thousandth `share: 1`; such a case is an ERROR (exit 2) naming the range, the
    other cases are judged."""
    text = ("op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: float32, shape: [64], standard: thousandth}\n"
            "  - {name: b, dtype: float32, shape: [64]}\n")
    out = _gen(tmp_path, text)
    assert run_cli("emulate", out).exit_code == 0
    path = out / "silu_backward-a" / "case.json"
    raw = json.loads(path.read_text())
    raw["tolerance"] = {"share": 1.0}
    raw["digest"] = M.digest(raw)
    path.write_text(json.dumps(raw))
    r = run_cli("verify", out, "--json", tmp_path / "v.json")
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    cases = {c["case_id"]: c for c in json.loads((tmp_path / "v.json").read_text())["cases"]}
    assert cases["silu_backward-b"]["status"] == "PASS"
    bad = cases["silu_backward-a"]
    assert bad["status"] == "ERROR" and "tolerance 'share' must be a fraction of elements in [0.75, 1), got 1 " \
        "(standard 'thousandth')" in bad["reason"], bad["reason"]
