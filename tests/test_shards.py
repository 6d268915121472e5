"""Issue 18: shards that cannot lose a case.

gen --shard records its shard in OUT; verify, emulate and run act on every case of a sharded OUT
(a --shard that disagrees with gen is refused, never a second split); verify over no cases is an
error; verify's results say which shard of which suite they cover, and report refuses a merge
where a shard or a shard's case is missing, a shard appears twice or suites are mixed. The README's
own sharding recipe is run as written, with a sign-flipped case in one shard.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from aclnn_cli.casedir import manifest as M
from aclnn_cli.cases.loader import load_cases
from aclnn_cli.casedir.shard import shard_ids
from helpers import run_cli, write_yaml

README = Path(__file__).resolve().parent.parent / "docs" / "performance.md"  # (the recipe's page)
CLI_DIR = Path(sys.executable).parent  # the aclnn-cli script beside the running interpreter
FAKE = Path(__file__).with_name("fake_runner.py")

SUITE = """
op: aclnnSiluBackward
defaults: {dtype: float32, seed: 5}
cases:
  - name: a
    shape: [[64], [96], [128], [160], [192], [224]]
"""
OTHER = SUITE + "  - {name: b, shape: [8]}\n"  # another suite: one more case


def flip(case_dir: Path) -> None:
    """Negate every element of a float32 case's output dump (a kernel that slipped the sign)."""
    dump = M.load(case_dir).output.dump
    (np.fromfile(dump, dtype=np.uint32) ^ np.uint32(0x80000000)).tofile(dump)


FLIP_SCRIPT = """import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_shards import flip
flip(Path(sys.argv[1]))
"""


def split(text: str) -> dict[int, list[str]]:
    """Shard number (1-based) -> its case ids, for a 2-way split of the suite."""
    pairs = [(c.case_id, c.numel) for c in load_cases([write_yaml_text(text)])]
    return {i + 1: sorted(shard_ids(pairs, i, 2)) for i in range(2)}


def write_yaml_text(text: str, _cache: dict = {}) -> Path:
    import tempfile

    if text not in _cache:
        root = Path(tempfile.mkdtemp(prefix="aclnn-shards-"))
        atexit.register(shutil.rmtree, root, True)  # (gone when the process ends, not left in /tmp)
        _cache[text] = write_yaml(root, text)
    return _cache[text]


def digest_of(text: str) -> str:
    """The suite's identity as the README defines it: sha256 over its sorted [case id, elements] pairs as
    JSON lines."""
    pairs = sorted((c.case_id, c.numel) for c in load_cases([write_yaml_text(text)]))
    return hashlib.sha256(b"".join(json.dumps([i, n]).encode() + b"\n" for i, n in pairs)).hexdigest()


def victim_of(shard2: list[str]) -> str:
    """A case of shard 2/2 that splitting shard 2's OUT again (the old verify --shard 2/2) leaves unjudged."""
    sizes = {c.case_id: c.numel for c in load_cases([write_yaml_text(SUITE)])}
    judged_again = shard_ids([(c, sizes[c]) for c in shard2], 1, 2)
    return sorted(set(shard2) - judged_again)[0]


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    """out1, out2: the two shards of SUITE, each gen'd into its own OUT and emulated; r1.json, r2.json:
    their verify results."""
    root = tmp_path_factory.mktemp("shards")
    cases = write_yaml(root, SUITE)
    for i in (1, 2):
        out = root / f"out{i}"
        assert run_cli("gen", cases, "-o", out, "--shard", f"{i}/2", "-j", 1).exit_code == 0
        assert run_cli("emulate", out, "-j", 1).exit_code == 0
        assert run_cli("verify", out, "--shard", f"{i}/2", "--json", root / f"r{i}.json", "-j", 1).exit_code == 0
    return root


@pytest.fixture()
def copy(shards, tmp_path):
    def make(name: str) -> Path:
        shutil.copytree(shards / name, tmp_path / name) if (shards / name).is_dir() else \
            shutil.copy(shards / name, tmp_path / name)
        return tmp_path / name
    return make


def error_lines(result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("aclnn-cli: error:")]


# ------------------------------------------------------------------- the README's recipe, as written

def readme_recipe() -> tuple[list[str], list[str]]:
    """The commands of README's Sharding recipe: (a CI matrix job's, the merge job's)."""
    text = README.read_text(encoding="utf-8")
    start = text.index("```sh", text.index("**Sharding.**"))
    block = text[start + len("```sh"):text.index("```", start + len("```sh"))]
    lines = [line.strip() for line in block.strip().splitlines()]
    cut = next(i for i, line in enumerate(lines) if line.startswith("# merge job"))
    job = [line for line in lines[:cut] if line and not line.startswith("#")]
    merge = [line for line in lines[cut:] if line and not line.startswith("#")]
    return job, merge


def _shell(commands: list[str], cwd: Path, **env) -> subprocess.CompletedProcess:
    script = "set -e\n" + "\n".join(commands) + "\n"
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PATH": f"{CLI_DIR}{os.pathsep}{os.environ['PATH']}", **env})


def test_readme_sharding_recipe_fails_when_one_case_of_one_shard_is_sign_flipped(tmp_path):
    job, merge = readme_recipe()
    assert "<device run>" in " ".join(job), "the recipe's device step is the placeholder the test fills in"
    assert any("aclnn-cli verify" in c for c in job) and any("aclnn-cli report" in c for c in merge)
    ids = split(SUITE)
    victim = victim_of(ids[2])
    jobs = {}
    for i in (1, 2):
        d = tmp_path / f"job{i}"
        write_yaml(d / "cases", SUITE)
        device = d / "device-run"  # the device step: the emulated kernels, one case's sign slipped in shard 2
        (d / "flip.py").write_text(FLIP_SCRIPT.format(tests=str(Path(__file__).parent)))
        device.write_text("#!/bin/sh\nset -e\naclnn-cli emulate out\n"
                          + (f"{sys.executable} flip.py out/{victim}\n" if i == 2 else ""))
        device.chmod(0o755)
        jobs[i] = _shell([c.replace("<device run>", "./device-run") for c in job], d, I=str(i), N="2")
    assert jobs[1].returncode == 0, jobs[1].stderr[-2000:]
    assert jobs[2].returncode == 1, (jobs[2].stdout[-2000:], jobs[2].stderr[-2000:])  # verify: a case FAILs
    assert "FAIL" in jobs[2].stdout and victim in jobs[2].stdout
    merge_dir = tmp_path / "merge"
    for i in (1, 2):  # (CI collects each job's results/ into the merge job's)
        shutil.copytree(tmp_path / f"job{i}" / "results", merge_dir / "results", dirs_exist_ok=True)
    merged = _shell(merge, merge_dir)
    assert merged.returncode == 1, (merged.stdout[-2000:], merged.stderr[-2000:])
    xml = next(merge_dir.glob("*.xml"))
    cases = {tc.get("name"): tc for tc in ET.parse(xml).getroot().findall("testcase")}
    assert sorted(cases) == sorted(ids[1] + ids[2])
    assert [n for n, tc in cases.items() if tc.find("failure") is not None] == [victim]


# ------------------------------------------------------------- verify, emulate, run of a sharded OUT

def test_verify_judges_every_case_of_a_sharded_out_with_or_without_shard(copy, tmp_path):
    out = copy("out2")
    ids = split(SUITE)[2]
    victim = victim_of(ids)
    flip(out / victim)
    for args in ([], ["--shard", "2/2"]):
        r = run_cli("verify", out, *args, "--json", tmp_path / "v.json", "-j", 1)
        assert r.exit_code == 1, r.output
        data = json.loads((tmp_path / "v.json").read_text())
        assert sorted(c["case_id"] for c in data["cases"]) == ids
        assert [c["case_id"] for c in data["cases"] if c["status"] == "FAIL"] == [victim]


def test_a_per_shard_verify_whose_record_is_gone_refuses(copy, tmp_path):
    """Finding 16: the record removed, verify --shard 2/2 re-split the shard's cases and never judged some."""
    out = copy("out2")
    flip(out / victim_of(split(SUITE)[2]))
    (out / "aclnn-shard-2-of-2.json").unlink()
    r = run_cli("verify", out, "--shard", "2/2", "-j", 1)
    lines = error_lines(r)
    assert r.exit_code == 2 and len(lines) == 1 and "gen --shard 2/2" in lines[0] and "no shard record" in lines[0], r.output
    r = run_cli("verify", out, "-j", 1)  # (without --shard: every case here is judged, the flipped one fails)
    assert r.exit_code == 1, r.output


def test_emulate_writes_every_case_of_a_sharded_out_with_shard(copy):
    out = copy("out2")
    for case in split(SUITE)[2]:
        M.load(out / case).output.dump.unlink()
    r = run_cli("emulate", out, "--shard", "2/2", "-j", 1)
    assert r.exit_code == 0 and "emulated 3 cases" in r.output, r.output
    assert all(M.load(out / c).output.dump.is_file() for c in split(SUITE)[2])


def _runner(tmp_path: Path) -> Path:
    path = tmp_path / "runner"
    path.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    path.chmod(0o755)
    return path


def test_run_drives_every_case_of_a_sharded_out_with_shard(copy, tmp_path):
    out = copy("out2")
    r = run_cli("run", out, "--runner", _runner(tmp_path), "--shard", "2/2")
    assert r.exit_code == 0 and "ran 3 cases" in r.output, r.output


@pytest.mark.parametrize("command", ["verify", "emulate", "run"])
def test_a_shard_that_disagrees_with_gen_is_refused(copy, tmp_path, command):
    out = copy("out1")
    extra = ["--runner", _runner(tmp_path)] if command == "run" else ["-j", 1]
    r = run_cli(command, out, "--shard", "2/2", *extra)
    assert r.exit_code == 2
    assert error_lines(r) == [f"aclnn-cli: error: {out}: --shard 2/2 disagrees with gen: this directory holds "
                              f"shard 1/2 of suite {digest_of(SUITE)[:12]} (aclnn-shard-1-of-2.json)"]


@pytest.mark.parametrize("command", ["verify", "emulate"])
def test_a_case_deleted_from_a_sharded_out_is_named(copy, command):
    out = copy("out1")
    ids = split(SUITE)[1]
    shutil.rmtree(out / ids[0])
    for args in ([], ["--shard", "1/2"]):
        r = run_cli(command, out, *args, "-j", 1)
        assert r.exit_code == 2
        assert error_lines(r) == [f"aclnn-cli: error: {out}: case {ids[0]} of shard 1/2 of suite "
                                  f"{digest_of(SUITE)[:12]} (aclnn-shard-1-of-2.json) missing: gen wrote it here "
                                  f"(deleted or moved?); run the same gen again"]


def test_a_case_of_another_shard_in_a_sharded_out_is_named(shards, copy):
    out = copy("out1")
    stray = split(SUITE)[2][0]
    shutil.copytree(shards / "out2" / stray, out / stray)
    r = run_cli("verify", out, "--shard", "1/2", "-j", 1)
    assert r.exit_code == 2
    assert error_lines(r) == [f"aclnn-cli: error: {out}: case {stray} in no shard gen recorded here (shard 1/2 of "
                              f"suite {digest_of(SUITE)[:12]} (aclnn-shard-1-of-2.json)): left from another gen? "
                              f"delete it or gen into a fresh directory"]


def test_verify_over_no_cases_is_an_error(tmp_path):
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, SUITE), "-o", out, "--case", "*-64", "--case", "*-96").exit_code == 0
    r = run_cli("verify", out, "--shard", "3/3", "-j", 1)
    assert r.exit_code == 2
    assert error_lines(r) == [f"aclnn-cli: error: {out}: shard 3/3 holds no case: the suite has 2 cases, so use "
                              f"at most 2 shards"]
    r = run_cli("verify", out, "--shard", "1/3", "-j", 1)  # another runner's shard is empty: the run cannot pass
    assert r.exit_code == 2
    assert error_lines(r) == [f"aclnn-cli: error: {out}: 3 shards for 2 cases: some shards would hold no case "
                              f"(use at most 2)"]
    r = run_cli("gen", write_yaml(tmp_path, SUITE), "-o", tmp_path / "other", "--shard", "7/7")
    assert r.exit_code == 2 and not (tmp_path / "other").exists()
    assert error_lines(r) == ["aclnn-cli: error: --shard: shard 7/7 holds no case: the suite has 6 cases, so use "
                              "at most 6 shards"]


def test_gen_refuses_to_mix_suites_or_splits_in_one_out(copy, tmp_path):
    out = copy("out1")
    other = write_yaml(tmp_path / "other", OTHER)
    same = write_yaml(tmp_path / "same", SUITE)
    name = f"shard 1/2 of suite {digest_of(SUITE)[:12]} (aclnn-shard-1-of-2.json)"
    r = run_cli("gen", other, "-o", out, "--shard", "2/2")
    assert r.exit_code == 2
    assert error_lines(r) == [f"aclnn-cli: error: {out}: this directory holds {name}; this gen is shard 2/2 of suite "
                              f"{digest_of(OTHER)[:12]}: gen each suite or split into its own directory"]
    r = run_cli("gen", same, "-o", out, "--shard", "2/3")
    assert r.exit_code == 2 and "this gen is shard 2/3" in error_lines(r)[0]
    r = run_cli("gen", same, "-o", out)
    assert r.exit_code == 2
    assert error_lines(r)[0].startswith(f"aclnn-cli: error: {out}: this directory holds {name}; gen without "
                                        f"--shard would add case ")
    victim = split(SUITE)[1][0]  # a failing case's repro line: gen of that one case into its OUT
    assert run_cli("gen", same, "--case", victim, "-o", out, "--force").exit_code == 0
    assert run_cli("gen", same, "-o", out, "--shard", "1/2").exit_code == 0  # the same shard again


# ------------------------------------------------------------------------ results and report

def test_results_say_which_shard_of_which_suite_they_cover(shards, tmp_path):
    data = json.loads((shards / "r1.json").read_text())
    assert data["schema"] == "aclnn-cli/verify/4"
    assert data["coverage"] == {"suite": digest_of(SUITE), "suite_cases": 6, "count": 2, "shards": [1],
                                "cases": split(SUITE)[1]}
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, SUITE), "-o", out, "--case", "*-64").exit_code == 0
    run_cli("verify", out, "--json", tmp_path / "whole.json", "-j", 1)
    assert json.loads((tmp_path / "whole.json").read_text())["coverage"] is None


def test_report_merges_whole_shards_and_says_so(shards, tmp_path):
    r = run_cli("report", shards / "r1.json", shards / "r2.json", "--json", tmp_path / "all.json")
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "all.json").read_text())
    assert data["summary"]["total"] == 6
    assert data["coverage"] == {"suite": digest_of(SUITE), "suite_cases": 6, "count": 2, "shards": [1, 2],
                                "cases": sorted(split(SUITE)[1] + split(SUITE)[2])}


def test_report_fails_when_a_shard_is_missing(shards):
    r = run_cli("report", shards / "r1.json")
    assert r.exit_code == 2
    assert error_lines(r) == [f"aclnn-cli: error: shard 2/2 of suite {digest_of(SUITE)[:12]} is missing: no results "
                              f"file holds it"]


def test_report_fails_when_a_shard_appears_twice(shards, copy, tmp_path):
    twice = tmp_path / "r1-again.json"
    shutil.copy(shards / "r1.json", twice)
    r = run_cli("report", shards / "r1.json", shards / "r2.json", twice)
    assert r.exit_code == 2
    assert error_lines(r) == [f"aclnn-cli: error: {twice}: shard 1/2 is also in {shards / 'r1.json'}: shards overlap"]


def test_report_fails_when_a_case_of_a_shard_is_missing(shards, tmp_path):
    data = json.loads((shards / "r2.json").read_text())
    lost = split(SUITE)[2][1]
    data["cases"] = [c for c in data["cases"] if c["case_id"] != lost]
    short = tmp_path / "r2.json"
    short.write_text(json.dumps(data))
    r = run_cli("report", shards / "r1.json", short)
    assert r.exit_code == 2
    assert error_lines(r) == [f"aclnn-cli: error: {short}: case {lost} of shard 2/2 of suite "
                              f"{digest_of(SUITE)[:12]} missing from its results"]


def test_report_fails_when_suites_are_mixed(shards, tmp_path):
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, OTHER), "-o", out, "--shard", "2/2").exit_code == 0
    assert run_cli("emulate", out, "-j", 1).exit_code == 0
    run_cli("verify", out, "--json", tmp_path / "other2.json", "-j", 1)
    r = run_cli("report", shards / "r1.json", tmp_path / "other2.json")
    assert r.exit_code == 2
    assert error_lines(r) == [
        f"aclnn-cli: error: {tmp_path / 'other2.json'}: suite {digest_of(OTHER)[:12]} mixed with suite "
        f"{digest_of(SUITE)[:12]} ({shards / 'r1.json'}): results of different suites",
        f"aclnn-cli: error: shard 2/2 of suite {digest_of(SUITE)[:12]} is missing: no results file holds it"]


def test_results_without_shard_information_merge_as_before(shards, tmp_path):
    for i in (1, 2):
        data = json.loads((shards / f"r{i}.json").read_text())
        del data["coverage"]
        (tmp_path / f"v2-{i}.json").write_text(json.dumps(dict(data, schema="aclnn-cli/verify/2")))
    r = run_cli("report", tmp_path / "v2-1.json", tmp_path / "v2-2.json", "--json", tmp_path / "all.json")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "all.json").read_text())["summary"]["total"] == 6
    r = run_cli("report", tmp_path / "v2-1.json", shards / "r2.json")  # but not mixed with shard results
    assert r.exit_code == 2
    assert error_lines(r)[0] == (f"aclnn-cli: error: {tmp_path / 'v2-1.json'}: results without shard information "
                                 f"mixed with shard 2/2 of suite {digest_of(SUITE)[:12]} ({shards / 'r2.json'})")


def test_a_result_without_a_shape_is_one_line(tmp_path):
    """Found by the results fuzz target: a case result without 'shape' crashed report (TypeError); its
    fields are now checked when it is read (report/formats.py), so it is one line naming file and case."""
    case = {"case_id": "c1", "op": "aclnnSiluBackward", "dtype": "float32", "product": "A2", "status": "PASS",
            "standard": "mere-mare", "reason": ""}
    (tmp_path / "r.json").write_text(json.dumps({"schema": "aclnn-cli/verify/2", "cases": [case]}))
    r = run_cli("report", tmp_path / "r.json", "--json", tmp_path / "all.json")
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert error_lines(r) == [f"aclnn-cli: error: {tmp_path / 'r.json'}: case #1: 'shape' must be a list of at most "
                              f"64 sizes"]
