"""ops-nn's aclnnGeGluBackward and aclnnGeGluV3Backward ATK suites, unmodified, through import, gen, emulate, verify.

Both files (230 KB and 267 KB, 202 cases each, 870 M and 1,017 M elements in all) are read from a git mirror of
hicann/ops-nn (tests/test_importers_batchnorm.py's `suite`: ACLNN_OPS_NN_SUITES, /tmp/ops-nn-suites, else
ACLNN_OPS_NN_GIT); without one these tests are skipped with the reason. Every case imports (none skipped: inputs
uniform in [1, 2], some tensors constant inf, -inf or NaN, every approximate 0); the quick loop generates, emulates
and verifies every case of up to QUICK_ELEMENTS elements.
"""

from __future__ import annotations


from helpers import junit_statuses
from test_importers_batchnorm import cli, expand, imported, suite, tensors

ATK = "activation/ge_glu_grad_v2/tests/st/aclnnGeGluBackward/atk_aclnnGeGluBackward.json"
ATK_V3 = "activation/ge_glu_grad_v2/tests/st/aclnnGeGluV3Backward/atk_aclnnGeGluV3Backward.json"
QUICK_ELEMENTS = 100_000
QUICK_CASES = 46  # of both files' 404


def test_both_atk_suites_import_every_case():
    for rel, op in ((ATK, "aclnnGeGluBackward"), (ATK_V3, "aclnnGeGluV3Backward")):
        result = imported(suite(rel), skip=True)
        cases = expand(result)
        assert result.skipped == [] and len(cases) == 202, (rel, result.skipped[:3])
        assert {c.op.name for c in cases.values()} == {op}
        assert {dict(c.attributes)["approximate"] for c in cases.values()} == {0}
        for c in cases.values():
            t = tensors(c)
            half = list(t["self"].layout.shape)
            axis = dict(c.attributes)["dim"] % len(half)
            half[axis] //= 2
            assert list(t["gradOutput"].layout.shape) == half == list(t["gelu"].layout.shape)


def _loop(tmp_path, limit: int, above: int = 0) -> int:
    """gen -> emulate -> verify of both files' cases of more than `above` and up to `limit` elements, all PASS;
    how many."""
    paths = [suite(ATK), suite(ATK_V3)]
    picks = [a for p in paths for c in expand(imported(p)).values()
             if above < tensors(c)["self"].layout.numel <= limit for a in ("--case", c.case_id)]
    out = tmp_path / "out"
    for args in (("gen", *paths, "-o", out, *picks), ("emulate", out)):
        r = cli(*args)
        assert r.returncode == 0, r.stderr[-3000:]
    r = cli("verify", out, "--junit", tmp_path / "v.xml")
    assert r.returncode == 0 and "all cases pass" in r.stdout, r.stdout[-3000:]
    return len(junit_statuses(tmp_path / "v.xml"))


def test_small_cases_of_both_atk_suites_pass_with_the_950_kernel(tmp_path):
    """Every case of up to QUICK_ELEMENTS elements (the inf / NaN ones among them) PASSes."""
    assert _loop(tmp_path, QUICK_ELEMENTS) == QUICK_CASES


def test_cases_up_to_a_million_elements_pass_with_the_950_kernel(tmp_path):
    """Slow (tests/slow-tests.txt): with the quick loop's 46, 195 of the 404 cases, 76 M elements (about 20 s on
    2 cores); here the 149 over QUICK_ELEMENTS (the quick loop's are not run again). The rest, up to 64 M elements
    a case and 1.9 G in all, is left to a machine with the memory and time for it."""
    assert _loop(tmp_path, 1_000_000, above=QUICK_ELEMENTS) == 195 - QUICK_CASES
