"""Structured fuzzing of the shard readers: gen's shard records in OUT (what verify, emulate and run
select by) and the coverage in verify's results (what report merges by).

Documents are near-valid: the right structure, with hostile leaves (wrong types, huge or negative
ints, NaN, duplicates, odd unicode, long strings, deep nesting) and names that disagree with contents.
"""

from __future__ import annotations

import json
import os

from hypothesis import strategies as st

from aclnn_cli.errors import UserError
from aclnn_cli.report.formats import merged_run
from aclnn_cli.report.merged import load_shard_results
from aclnn_cli.casedir.shard import MAX_COUNT, Coverage, ResultsFile, coverage_problems, merged_coverage
from aclnn_cli.casedir.shardout import RECORD_SCHEMA, read_records, select
from fuzzing import MAX_LINE, allowed_outcome, fuzz_target, scratch

HEX = "19cf90c17a39a2acb720d3b10b56a7e926ed0cbd6c952e9cacbc6b03c8e77bbd"
OTHER_HEX = "0" * 63 + "1"
ODD_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["", ".", "..", "a/b", ".hidden", "a\0b", "x" * 5000, "\u202e\u200bcase", "case\n2", "\\x", "é中"])
IDS = st.sampled_from(["c1", "c2", "c3", "c4"]) | ODD_TEXT
HOSTILE = (st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.floats() | ODD_TEXT
           | st.lists(st.integers(-3, 5), max_size=4) | st.dictionaries(ODD_TEXT, st.integers(), max_size=2))
SMALL = st.integers(1, 4) | st.sampled_from([0, -1, MAX_COUNT, MAX_COUNT + 1, 2 ** 64, True])


def _maybe(value_strategy, hostile=HOSTILE):
    """Mostly a good value, sometimes a hostile leaf."""
    return st.one_of(value_strategy, value_strategy, value_strategy, hostile)


def coverage_doc():
    return st.fixed_dictionaries({
        "suite": _maybe(st.sampled_from([HEX, OTHER_HEX, HEX.upper(), HEX[:-1]])),
        "suite_cases": _maybe(SMALL), "count": _maybe(SMALL),
        "shards": _maybe(st.lists(SMALL, min_size=0, max_size=5)),
        "cases": _maybe(st.lists(IDS, min_size=0, max_size=6)),
    }, optional={"extra": HOSTILE})


def _text(doc, raw: str) -> str:
    """The document as JSON text, sometimes with a duplicate key, deep nesting or a NaN spliced in."""
    text = json.dumps(doc, allow_nan=True)
    if raw == "duplicate" and text.startswith("{") and len(text) > 2:
        return '{"schema": 1, ' + text[1:]
    if raw == "deep":
        return text[:-1] + ', "x": ' + "[" * 200 + "]" * 200 + "}" if text.startswith("{") else text
    if raw == "truncated":
        return text[: len(text) // 2]
    if raw == "nan":
        return text.replace("1", "NaN", 1)
    return text


RAW = st.sampled_from(["plain", "plain", "plain", "duplicate", "deep", "truncated", "nan"])


@fuzz_target(doc=coverage_doc(), schema=_maybe(st.just(RECORD_SCHEMA)), name=st.tuples(SMALL, SMALL), raw=RAW,
             dirs=st.lists(IDS, max_size=5), shard=st.tuples(st.integers(0, 4), st.integers(1, 5)),
             second=st.none() | st.tuples(coverage_doc(), st.tuples(SMALL, SMALL)))
def test_fuzz_shard_records_in_out(doc, schema, name, raw, dirs, shard, second):
    """Shard records (and case directories) in OUT: verify/emulate/run's selection gives cases or one line."""
    with scratch() as out:
        (out / f"aclnn-shard-{name[0]}-of-{name[1]}.json").write_text(_text(dict(doc, schema=schema), raw),
                                                                      encoding="utf-8", errors="surrogatepass")
        if second is not None:  # another shard's record beside it (a shared OUT, or a mix)
            (out / f"aclnn-shard-{second[1][0]}-of-{second[1][1]}.json").write_text(
                json.dumps(dict(second[0], schema=RECORD_SCHEMA)), encoding="utf-8")
        for d in dirs:
            try:
                (out / d).mkdir()
                (out / d / "case.json").write_text("{}")
            except (OSError, ValueError):
                pass  # (a name the file system refuses is not a case directory)
        index, count = min(shard[0], shard[1] - 1), shard[1]
        try:
            records = read_records(out)
            chosen = select(out, (index, count))
        except UserError as exc:
            allowed_outcome(exc)
            return
        assert all(len(r.coverage.shards) == 1 for r in records)
        if chosen.coverage is not None:
            assert sorted(p.name for p in chosen.dirs) == sorted(chosen.coverage.cases)
            assert all(os.path.isdir(p) for p in chosen.dirs)


def case_doc():
    return st.fixed_dictionaries({
        "case_id": _maybe(st.sampled_from(["c1", "c2", "c3", "c4"])), "op": _maybe(st.just("aclnnSiluBackward")),
        "dtype": _maybe(st.just("float32")), "product": _maybe(st.just("A2")),
        "status": _maybe(st.sampled_from(["PASS", "FAIL", "ERROR", "MISTRUSTED"])),
        "standard": _maybe(st.just("mere-mare")), "reason": _maybe(st.just("")),
    }, optional={"shape": HOSTILE, "metrics": HOSTILE, "worst": HOSTILE, "kind": HOSTILE})


def results_doc():
    return st.fixed_dictionaries({
        "schema": _maybe(st.sampled_from(["aclnn-cli/verify/3", "aclnn-cli/verify/2", "aclnn-cli/verify/1"])),
        "cases": _maybe(st.lists(case_doc(), max_size=4)),
    }, optional={"coverage": st.none() | coverage_doc() | HOSTILE, "summary": HOSTILE})


@fuzz_target(docs=st.lists(st.tuples(results_doc(), RAW), min_size=1, max_size=3))
def test_fuzz_results_files_merged_by_report(docs):
    """verify --json files as report reads them: merged cases (whole shards of one suite) or one line."""
    with scratch() as d:
        for i, (doc, raw) in enumerate(docs):
            (d / f"r{i}.json").write_text(_text(doc, raw), encoding="utf-8", errors="surrogatepass")
        try:
            cases, coverage = load_shard_results([d])
            run = merged_run(cases, coverage)
        except UserError as exc:
            allowed_outcome(exc)
            for line in getattr(exc, "problems", []):
                assert "\n" not in line and len(line) <= MAX_LINE, repr(line[:600])
            return
        assert len(run.cases) == len(cases) and run.exit_code in (0, 1, 2)
        if coverage is not None:
            assert sorted(c["case_id"] for c in cases) == sorted(coverage.cases)


def coverages():
    """Coverages as Coverage.from_json lets them be (shards within the count, more cases than shards)."""
    def one(suite, n, shards, cases):
        shards = tuple(sorted({min(i, n) for i in shards}))
        return Coverage(suite, max(n, len(cases)), n, shards, cases)

    return st.builds(one, st.sampled_from([HEX, OTHER_HEX]), st.integers(1, 4) | st.just(MAX_COUNT),
                     st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True),
                     st.lists(IDS, min_size=1, max_size=4, unique=True).map(tuple))


@fuzz_target(files=st.lists(st.tuples(ODD_TEXT, st.none() | coverages(), st.lists(IDS, max_size=5)), max_size=4))
def test_fuzz_coverage_problems(files):
    """Any mix of results files: a list of one-line problems (none: whole shards of one suite, or no shards)."""
    read = [ResultsFile(name, cov, cases) for name, cov, cases in files]
    problems = coverage_problems(read)
    assert all("\n" not in p and len(p) <= MAX_LINE for p in problems), problems
    if not problems and any(f.coverage for f in read):
        whole = merged_coverage(read)
        assert whole is not None and sorted(whole.shards) == list(range(1, whole.count + 1))
        assert {x for f in read for x in f.cases} == set(whole.cases)
