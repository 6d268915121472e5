"""What verify and report print: the cases that did not pass in full, a summary that keeps contract (negative)
cases apart from precision ones, the totals; every case only with -v. Fast and screen-sized at thousands of cases."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from aclnn_cli.report.formats import merged_run, is_contract, print_cases, print_summary
from aclnn_cli.judge.results import CaseResult, RunResult

from helpers import manifest, run_cli, write_yaml

OPS = ("aclnnSiluBackward", "aclnnFastGeluBackward", "aclnnLogSigmoidBackward", "aclnnHardsigmoidBackward")
DTYPES = ("float32", "float16", "bfloat16")
WORST = {"index": 3, "coords": [0, 3], "inputs": {"gradOutput": 1.0, "self": 2.0}, "expected": 0.5, "actual": 0.5,
         "abs_error": 0.0, "rel_error": 0.0, "ulp_error": 0.0}


def precision(i: int, status: str = "PASS", reason: str = "", **kw) -> CaseResult:
    op, dtype = OPS[i % 4], DTYPES[(i // 4) % 3]
    metrics = {"max_abs_error": 1.2e-6, "max_rel_error": 3e-4, "mere": 1e-7, "mare": 3e-4}
    return CaseResult(**{"case_id": f"case-{i:05d}-{dtype}", "op": op, "dtype": dtype, "shape": [64, 64],
                         "product": "A2", "status": status, "standard": "mere-mare", "reason": reason,
                         "metrics": metrics, "worst": [dict(WORST)],
                         "repro": f"aclnn-cli gen c.yaml --case {i} -o out && aclnn-cli verify out/{i}", **kw})


REJECTED = "phase one returned 161002 as expected"
WRONG = "phase one returned 0 (ACLNN_SUCCESS), expected 161002 (ACLNN_ERR_PARAM_INVALID)"


def contract(i: int, dtype: str = "float64", status: str = "PASS", reason: str = REJECTED,
             product: str = "A2") -> CaseResult:
    return CaseResult(f"neg-{i:05d}-{dtype}", OPS[i % 4], dtype, [2, 2], product, status, "mere-mare", reason,
                      kind="contract")


def printed(result) -> str:
    """What a command printed, without verify's progress lines (stderr, one per ~10% of cases in CI logs)."""
    return "".join(ln for ln in result.output.splitlines(keepends=True) if not re.match(r"verify: \d+/\d+ cases", ln))


def render(run: RunResult, verbose: bool = False) -> str:
    console = Console(file=io.StringIO(), width=160)
    print_cases(console, run, show_passing=verbose)
    print_summary(console, run)
    return console.file.getvalue()


def test_an_all_pass_run_of_2000_cases_prints_one_screenful_with_the_totals():
    text = render(RunResult([precision(i) for i in range(2000)]))
    assert len(text.splitlines()) < 40, text
    assert "2000 cases (2000 precision, 0 contract): 2000 PASS - all cases pass" in text
    assert "case-00001" not in text


def test_verbose_prints_every_case_id():
    cases = [precision(i) for i in range(2000)] + [contract(i) for i in range(50)]
    text = render(RunResult(cases), verbose=True)
    assert all(c.case_id in text for c in cases)
    small = render(RunResult(cases[:20]), verbose=True)  # a rich table when there are few
    assert all(c.case_id in small for c in cases[:20]) and "┃ case" in small


def test_cases_that_did_not_pass_are_printed_in_full_among_thousands_of_passes():
    cases = [precision(i) for i in range(3000)]
    cases[17] = precision(17, "FAIL", "MARE 0.0117 (limit 0.00977, 1.20x)")
    cases[1234] = precision(1234, "ERROR", "dump has 8190 bytes, expected 8192")
    cases[2999] = precision(2999, "MISTRUSTED", "every input the kernel reads is constant")
    cases.append(contract(1, "float16", "STATUS", WRONG))
    cases.append(contract(2, "float16", "MISSING", "no status file at out/neg/status.txt"))
    run = RunResult(cases)
    text = render(run)
    lines = text.splitlines()
    assert len(lines) < 80, text
    for c in run.cases:
        if c.status != "PASS":
            judged = "contract" if c.case_id.startswith("neg") else c.standard  # a negative case has no standard
            assert f"{c.status} {c.case_id} ({judged}): {c.reason}" in lines
            assert not c.repro or f"    repro: {c.repro}" in lines
            assert sum(c.case_id in line for line in lines) >= 2  # its row and its details
    assert sum(line.startswith("    [0, 3] (gradOutput=1, self=2): expected 0.5") for line in lines) == 3
    assert "case-00018" not in text
    assert "3002 cases (3000 precision, 2 contract): 2997 PASS, 1 FAIL, 1 MISTRUSTED, 1 MISSING, 1 STATUS, 1 ERROR" \
           " - gate failed" in text


def test_contract_cases_are_summarised_apart_from_precision_cases():
    cases = [precision(i) for i in range(24)] + [contract(i) for i in range(8)] + [
        contract(9, "float16", "STATUS", WRONG),
        contract(10, "float16", "MISSING", "no status file at out/x/status.txt"),
        contract(11, "bfloat16", "PASS", REJECTED, product="910")]
    text = render(RunResult(cases)).partition("verify: precision cases by op and dtype")[2]
    head, _, tail = text.partition("verify: contract cases")
    assert head and "phase one must reject" in tail
    assert "float64" not in head and "float64" not in tail  # contract cases are by product, not dtype
    assert "STATUS" not in head and "STATUS" in tail and "MISSING" in tail
    assert "35 cases (24 precision, 11 contract)" in text
    assert "verify: contract" not in render(RunResult(cases[:24]))
    assert "verify: precision" not in render(RunResult(cases[24:]))


@pytest.mark.parametrize("case, kind", [
    (contract(0), True),
    (contract(0, "float16", "STATUS", WRONG), True),
    (contract(0, "float16", "MISSING", "no status file at out/x/status.txt"), True),
    (contract(0, "float64", "ERROR", "out/x/status.txt: status file must hold phase one's status as a decimal"), True),
    (contract(0, "bfloat16", "ERROR", "out/x/status.txt: status file must hold ...", product="910"), True),
    (precision(0), False),
    (precision(0, "STATUS", "phase one returned 161002 (ACLNN_ERR_PARAM_INVALID), expected 0 (ACLNN_SUCCESS)",
               metrics=None), False),
    (precision(0, "MISSING", "no dump at out/x/out.bin", metrics=None), False),
    (precision(0, "PASS", "empty tensor: nothing to compare (phase one and layout only)", metrics=None), False),
    (CaseResult("x", "?", "?", [], "?", "ERROR", "mere-mare", "unreadable manifest"), False),
])
def test_results_from_before_kind_are_told_apart_by_what_they_hold(case, kind):
    assert is_contract(case) is kind
    old = {k: v for k, v in case.to_json().items() if k != "kind"}  # a JSON written before `kind` existed
    assert is_contract(merged_run([old]).cases[0]) is kind


@pytest.mark.parametrize("text", ["[/]", "[bold]", "[red]x[/red]", "a\\", "[/bold]]]", ":smile:", "[link=x]y"])
def test_case_ids_and_reasons_with_markup_characters_print_verbatim(text):
    bad = precision(1, "FAIL", f"reason {text} end")
    bad.case_id = f"id{text}"
    bad.worst = [dict(WORST, coords=text, mismatch=f"expected NaN, got {text}")]
    bad.repro = f"repro {text}"
    neg = contract(2, "float16", "STATUS", f"phase one returned 0 {text}, expected 161002 {text}")
    neg.case_id, neg.op = f"neg{text}", f"op{text}"
    run = RunResult([precision(0), bad, neg])
    for verbose in (False, True):
        out = render(run, verbose)
        assert f"FAIL id{text} (mere-mare): reason {text} end" in out
        assert f"expected NaN, got {text}" in out and f"repro: repro {text}" in out
        assert f"STATUS neg{text}" in out and f"op{text}" in out


def test_non_finite_metrics_read_back_from_strict_json_print():
    c = precision(0, "FAIL", "NaN/Inf mismatches: 3, first at element 100")
    c.metrics = {"max_abs_error": "nan", "max_rel_error": "inf", "mere": "-inf", "mare": "nan"}
    c.worst = [dict(WORST, expected="nan", actual="inf", abs_error="inf", mismatch="expected NaN, got inf"),
               dict(WORST, expected="-inf", actual=1.0, abs_error="inf", rel_error="nan", ulp_error="inf"),
               {"coords": "odd"}, "not an element"]
    big = precision(1)
    big.metrics = {"max_abs_error": 10 ** 400, "mere": [1], "mare": {"x": 1}, "max_rel_error": True}
    run = RunResult([c, big])
    for verbose in (False, True):
        out = render(run, verbose)
        assert "expected nan, got inf: expected NaN, got inf" in out and "expected -inf, got 1" in out
        assert "not an element" in out and "nan" in out and "inf" in out


def test_10000_cases_print_one_screenful_by_default_and_one_line_each_with_verbose():
    """No timing assertion (shared, noisy machines): make bench measures speed. Shape only."""
    run = RunResult([precision(i) for i in range(10_000)])
    assert len(render(run).splitlines()) < 40
    verbose = render(run, verbose=True)
    ids = [c.case_id for c in run.cases]
    assert all(i in verbose for i in ids) and verbose.count("\n") >= 10_000


def test_verify_and_report_end_to_end(tmp_path):
    text = """
op: aclnnSiluBackward
cases:
  - {name: ok, dtype: bfloat16, shape: [8, 8], seed: 1}
  - {name: also_ok, dtype: float32, shape: [16], seed: 3}
  - {name: bad, dtype: float16, shape: [64], seed: 2}
  - {name: contract, contract: true, dtype: float16, shape: [3, 4], product: A2}
"""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    bad = out / "silu_backward-bad"
    output_tensor = next(t for t in manifest(bad)["tensors"] if t["role"] == "output")
    (bad / output_tensor["dump"]).write_bytes(b"\x00\x7e" * 64)  # every float16 element NaN
    negative = sorted(d for d in out.iterdir() if "contract" in d.name)
    (negative[0] / "status.txt").write_text("0\n")

    r = run_cli("verify", out, "--json", tmp_path / "v.json")
    assert r.exit_code == 1, r.output
    output = printed(r)
    ok = [d.name for d in out.iterdir() if d.name.endswith(("-ok", "-also_ok"))]
    assert ok and not any(name in output for name in ok)
    assert "FAIL silu_backward-bad (mere-mare): " in output
    assert f"STATUS {negative[0].name} (contract): phase one returned 0 " in output
    assert "repro: aclnn-cli gen " in output
    head, _, tail = output.partition("verify: contract cases by op and product")
    assert "verify: precision cases by op and dtype" in head and tail
    n = len(list(out.iterdir()))
    assert f"{n} cases (3 precision, {len(negative)} contract): {n - 2} PASS, 1 FAIL, 1 STATUS - gate failed" in output

    v = run_cli("verify", out, "-v")
    assert v.exit_code == 1 and all(d.name in printed(v) for d in out.iterdir())
    rep = run_cli("report", tmp_path / "v.json", "--verbose")
    assert rep.exit_code == 1 and all(d.name in rep.output for d in out.iterdir())
    quiet = run_cli("report", tmp_path / "v.json")
    assert f"{n} cases (3 precision, {len(negative)} contract)" in quiet.output and ok[0] not in quiet.output


def test_the_worst_elements_printed_are_the_ones_judged(tmp_path):
    """A promoted Hardsigmoid case (fp16 inputs, bf16 out) is judged with fp16's floor (6.1e-5): the
    worst elements carry the relative errors the verdict used, worst first, not errors recomputed
    against bf16's floor (which made a 3e-7 miss on a 1.7e-7 result read as 200%)."""
    import json

    text = ("op: aclnnHardsigmoidBackward\ncases:\n  - {name: p, shape: [8], seed: 3,\n"
            "     inputs: {self: {constant: 0.0}, gradOutput: {values: [1.0, -1.0, 1.0e-6, -1.0e-6, 2.0e-6, "
            "3.0e-6, -2.0e-6, 4.0e-6]}},\n"
            "     tensors: {gradOutput: {dtype: float16}, self: {dtype: float16}, out: {dtype: bfloat16}}}\n")
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out, "--defect", "sign-slip").exit_code == 0
    assert run_cli("verify", out, "--json", tmp_path / "v.json").exit_code == 1
    case = json.loads((tmp_path / "v.json").read_text())["cases"][0]
    rels = [w["rel_error"] for w in case["worst"]]
    assert case["status"] == "FAIL" and len(rels) >= 3
    assert rels == sorted(rels, reverse=True) and rels[0] == case["metrics"]["max_rel_error"]
    tiny = [w for w in case["worst"] if abs(w["expected"]) < 1e-5]
    assert tiny and all(w["rel_error"] == pytest.approx(w["abs_error"] / 2.0**-14) for w in tiny)


def test_failing_lines_are_the_same_text_with_and_without_colour():
    """Where no style can show, the failing cases' lines are written as plain text (formats.Lines); with colour
    they go through rich. Both say the same, bar the colour codes: 600 failing cases (more than a table's rows and
    a PIECE), a tab and an escape code in a reason among them."""
    bad = [precision(i, "FAIL", reason=f"mare 12 > 10\tat\x1b[31m {i}") for i in range(600)]
    run = RunResult(bad + [contract(1, status="FAIL", reason=WRONG)])
    plain = Console(file=io.StringIO(), width=160)
    coloured = Console(file=io.StringIO(), width=160, force_terminal=True, color_system="standard")
    for console in (plain, coloured):
        print_cases(console, run)
    assert plain.color_system is None and coloured.color_system is not None
    without_codes = re.sub(r"\x1b\[[0-9;]*m", "", coloured.file.getvalue())
    assert "\x1b" in coloured.file.getvalue() and "\x1b" not in plain.file.getvalue()
    assert plain.file.getvalue() == without_codes
    assert plain.file.getvalue().count("repro: ") == 600 and "10?at?[31m 5" in plain.file.getvalue()
