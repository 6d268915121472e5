"""Verdicts as data: each standard's rows (metric, value, limit, comparison, within) on hand-made errors with
known answers; the reason made from them; rows per output in verify's JSON; every report renders the rows it
is given (never a standard's own numbers), and reads results from before the rows."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.judge.compare import Metrics, apply_rule, element_errors
from aclnn_cli.judge.results import CaseResult, RunResult
from aclnn_cli.report.formats import merged_run, print_cases
from aclnn_cli.report.junit import junit_xml
from aclnn_cli.standards.rules import Row, Verdict, find_standard

from helpers import run_cli, write_yaml


def judged(name: str, a, g, dtype, **overrides) -> Verdict:
    std = find_standard(name)
    p = std.params(dtype, overrides)
    e = element_errors(np.asarray(a, float), np.asarray(g, float), dtype.smallest_normal, dtype, flush_ok=std.flush_ok)
    apply_rule(e, std.rule(p))
    m = Metrics()
    m.add(e, 0, track_small=True)
    return std.judge(m, p, dtype, None)


def by_metric(v: Verdict) -> dict[str, Row]:
    return {r.metric: r for r in v.rows}


def test_mere_mare_rows_hold_the_measured_values_against_the_published_limits():
    g = np.ones(1024)
    a = g.copy()
    a[5] = 1 + 2.0**-6  # one element off by 16T (fp16 T = 2^-10): MERE 2^-6/1024 = 2^-16, MARE 2^-6
    v = judged("mere-mare", a, g, D.FLOAT16)
    rows = by_metric(v)
    assert list(rows) == ["NaN/Inf mismatches", "MERE", "MARE", "|error balance|"]
    assert (rows["MERE"].value, rows["MERE"].limit, rows["MERE"].comparison, rows["MERE"].within) == (
        2.0**-16, 2.0**-10, "<", True)
    assert (rows["MARE"].value, rows["MARE"].limit, rows["MARE"].within) == (2.0**-6, 10 * 2.0**-10, False)
    assert rows["MARE"].note == "at element 5"
    # |balance| <= T/16 + 4 ulp / sqrt(n), with the fp16 ulp of 1 = 2^-10 halved (precision 11): 2^-14 + 2^-9/32
    assert rows["|error balance|"].limit == pytest.approx(2.0**-14 + 4 * 2.0**-11 / 32, rel=1e-12)
    assert rows["|error balance|"].value == pytest.approx(2.0**-16) and rows["|error balance|"].within
    assert rows["NaN/Inf mismatches"].value == 0 and rows["NaN/Inf mismatches"].within
    assert not v.passed and v.reason == rows["MARE"].text() == "MARE 0.0156 (limit < 0.00977, 1.60x) at element 5"


def test_a_pass_reason_lists_its_rows_and_a_fail_names_the_first_row_over():
    g = np.ones(64)
    v = judged("mere-mare", g, g, D.FLOAT32)
    assert v.passed and all(r.within for r in v.rows)
    assert v.reason.startswith("MERE 0 < 0.000122, MARE 0 < 0.00122, |error balance| 0 <= ")
    nan = g.copy()
    nan[3] = np.nan
    bad = judged("mere-mare", nan, g, D.FLOAT32)
    assert not bad.passed and bad.reason == "NaN/Inf mismatches 1 (limit <= 0) (first at element 3)"


@pytest.mark.parametrize("name, a, metric, value, limit, comparison, passed", [
    ("allclose", [1.0, 1.1, 1.0, 1.0], "elements over the allclose bound", 1, 0, "<=", False),
    ("absolute-threshold", [1.0, 1.0, 1.0, 1.0], "elements over the absolute-threshold bound", 0, 0, "<=", True),
    ("thousandth", [1.0, 1.01, 1.0, 1.0], "share within relative error 0.0001", 0.75, 0.9999, ">", False),
    ("msopst", [1.0, 1.02, 1.0, 1.0], "share with relative diff > 0.01", 0.25, 0.05, "<=", False),
    ("ulp", [1.0, 1.0 + 2.0**-14, 1.0, 1.0], "share over 32 ulp", 0.25, 0.05, "<", False),
])
def test_each_standard_rows_its_bound(name, a, metric, value, limit, comparison, passed):
    v = judged(name, a, np.ones(4), D.FLOAT32)
    row = by_metric(v)[metric]
    assert (row.value, row.limit) == pytest.approx((value, limit), rel=1e-6) and row.comparison == comparison
    assert v.passed is passed and row.within is passed


def test_ulp_passes_on_either_row_and_says_which():
    a = np.ones(100)
    a[:10] = 1 + 40 * 2.0**-23  # 10 % of elements 40 ulp off: share over 32 ulp fails, mean ulp 4 < 64 passes
    v = judged("ulp", a, np.ones(100), D.FLOAT32)
    rows = by_metric(v)
    assert not rows["share over 32 ulp"].within and rows["mean ulp error"].within and v.passed
    assert v.reason == rows["mean ulp error"].text() == "mean ulp error 4 < 64 (either passes)"


def test_named_rows_carry_the_output_and_the_reason_does_not():
    v = judged("mere-mare", np.ones(4), np.ones(4), D.FLOAT32)
    named = v.named("gradWeight")
    assert {r.output for r in named.rows} == {"gradWeight"} and {r.output for r in v.rows} == {""}
    assert named.reason == v.reason and [r.value for r in named.rows] == [r.value for r in v.rows]
    assert named.rows[1].text().startswith("gradWeight: MERE 0 < ")


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    """verify --json of two SiluBackward cases, a correct one and a sign-slipped one."""
    tmp = tmp_path_factory.mktemp("rows")
    out = tmp / "out"
    text = "op: aclnnSiluBackward\ncases:\n  - {name: ok, dtype: float16, shape: [40, 3], seed: 2}\n" \
           "  - {name: slip, dtype: float16, shape: [40, 3], seed: 2}\n"
    assert run_cli("gen", write_yaml(tmp, text), "-o", out, "-j", 1).exit_code == 0
    assert run_cli("emulate", out, "-j", 1).exit_code == 0
    from aclnn_cli.casedir import manifest as M
    from aclnn_cli.casedir import dirs as casedirs
    from aclnn_cli.device.defects import find_variant
    from aclnn_cli.device.emulate import emulate_case

    emulate_case(M.load(next(d for d in casedirs.find_cases(out) if "slip" in d.name)), variant=find_variant("sign-slip"))
    r = run_cli("verify", out, "--json", tmp / "v.json", "--junit", tmp / "v.xml", "-j", 1)
    assert r.exit_code == 1, r.output
    return json.loads((tmp / "v.json").read_text()), (tmp / "v.xml").read_text(), r.output, tmp


def test_verify_json_has_rows_naming_the_output(verified):
    data = verified[0]
    assert data["schema"] == "aclnn-cli/verify/4"
    cases = {c["case_id"].split("-")[1]: c for c in data["cases"]}
    for c in cases.values():
        assert [r["metric"] for r in c["rows"]] == ["NaN/Inf mismatches", "MERE", "MARE", "|error balance|"]
        assert {r["output"] for r in c["rows"]} == {"gradInput"}
        mere = c["rows"][1]
        assert mere["value"] == c["metrics"]["mere"] and mere["limit"] == c["params"]["T"] == 2.0**-10
        assert c["rows"][2]["limit"] == c["params"]["mare"] * c["params"]["T"]
    assert cases["ok"]["status"] == "PASS" and all(r["within"] for r in cases["ok"]["rows"])
    slip = cases["slip"]
    assert slip["status"] == "FAIL" and not slip["rows"][1]["within"]
    assert slip["reason"].startswith("MERE ") and "(limit < 0.000977, " in slip["reason"]


def test_console_and_junit_print_the_rows_of_a_failure(verified):
    data, xml, console, _ = verified
    slip = next(c for c in data["cases"] if "slip" in c["case_id"])
    assert "OVER    gradInput: MERE " in console and "within  gradInput: NaN/Inf mismatches 0 <= 0" in console
    failure = ET.fromstring(xml).find(f"testcase[@name='{slip['case_id']}']/failure").text
    assert f"OVER    {Row(**slip['rows'][1]).text()}" in failure.splitlines()  # (the row's own words, output named)


def test_reports_render_the_rows_they_are_given_not_a_standards_numbers(tmp_path, verified):
    """A results file whose row limit no standard has (0.123456): console, JUnit and HTML show that limit."""
    data = verified[0]
    case = next(c for c in data["cases"] if "slip" in c["case_id"])
    case = dict(case, rows=[dict(case["rows"][1], limit=0.123456, value=0.5, within=False, note="made up")])
    run = merged_run([case])
    assert "limit &lt; 0.123" in junit_xml([run.cases[0].to_json()])
    from io import StringIO

    from rich.console import Console

    buf = StringIO()
    print_cases(Console(file=buf, width=200, highlight=False), run)
    assert "OVER    gradInput: MERE 0.5 (limit < 0.123, 4.05x) made up" in buf.getvalue()
    pytest.importorskip("matplotlib")
    (tmp_path / "r.json").write_text(json.dumps(dict(data, cases=[case])))
    assert run_cli("report", tmp_path / "r.json", "--html", tmp_path / "r.html").exit_code == 1
    page = (tmp_path / "r.html").read_text()
    assert "<td>&lt; 0.1235</td>" in page and '<td class="num over">0.5</td>' in page and "made up" in page


def test_results_of_schema_3_still_report_and_bad_rows_are_one_line(tmp_path, verified):
    data = verified[0]
    old = dict(data, schema="aclnn-cli/verify/3", cases=[{k: v for k, v in c.items() if k != "rows"}
                                                         for c in data["cases"]])
    (tmp_path / "old.json").write_text(json.dumps(old))
    r = run_cli("report", tmp_path / "old.json")
    assert r.exit_code == 1 and "FAIL" in r.output and "OVER" not in r.output
    bad = dict(data, cases=[dict(data["cases"][0], rows=[{"metric": "MERE"}])])
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    r = run_cli("report", tmp_path / "bad.json")
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "'rows' #1 must be an object with output, metric" in lines[0]


def test_rows_round_trip_through_a_result_and_json():
    rows = [Row("dx", "MERE", 1e-4, 2.0**-10, "<", True).to_json(),
            Row("dgamma", "MARE", math.inf, 0.01, "<", False, "at element 3").to_json()]
    c = CaseResult("c", "op", "float16", [2], "A2", "FAIL", "mere-mare", "r", rows=rows)
    assert c.rows == rows and c.rows is not rows
    back = merged_run([json.loads(json.dumps(c.to_json()))]).cases[0]
    assert back.rows[1]["value"] == "inf" and back.rows[0] == rows[0]  # (strict JSON: inf as a string)
    assert RunResult([back]).exit_code == 1
