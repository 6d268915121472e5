"""Small helpers shared by the tests: write a case file, run the CLI, read storage."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.cli.main import main


def write_yaml(tmp: Path, text: str, name: str = "cases.yaml") -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    p = tmp / name
    p.write_text(text)
    return p


def read_yaml(path: Path):
    """A YAML file (a converted case file, a bundled one) read by PyYAML, not the tool's reader (yamlsafe.py): its
    safe loader, libyaml's where PyYAML has it (several times faster on the converted suites)."""
    import yaml

    return yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def run_cli(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def emulated_case(tmp: Path, text: str):
    """The one case of a case file's text, generated and emulated on one worker into tmp/out: its manifest."""
    from aclnn_cli.casedir import manifest as M

    out = tmp / "out"
    assert run_cli("gen", write_yaml(tmp, text), "-o", out, "-j", 1).exit_code == 0
    assert run_cli("emulate", out, "-j", 1).exit_code == 0
    return M.load(next(d for d in out.iterdir() if d.is_dir()))


def same_verdict(got: dict, before: dict) -> None:
    """Two results of one case (CaseResult.to_json) agree: status, reason and every metric (floats to 1e-12)."""
    import pytest

    assert got["status"] == before["status"] and got["reason"] == before["reason"]
    for key, value in before["metrics"].items():
        if isinstance(value, float):
            assert got["metrics"][key] == pytest.approx(value, rel=1e-12, abs=1e-300), key
        else:
            assert got["metrics"][key] == value, key


def verify_records(out: Path, jobs: int | None = None) -> tuple[int, dict[str, dict]]:
    """`aclnn-cli verify OUT -j jobs` (None: the command's default) in this process: (its exit code, {case id: the case's record as verify --json
    writes it}), without the HTML report's error data, which --json gathers (a third of a small case's judging) and
    the callers never read. The judging path is the command's without --json (the default one)."""
    from aclnn_cli.casedir.dirs import find_cases
    from aclnn_cli.judge.verify import Options, verify_dirs
    from aclnn_cli.files.options import default_jobs

    run = verify_dirs(find_cases(out), Options(), jobs=jobs or default_jobs())
    return run.exit_code, {c.case_id: c.to_json(errors=False) for c in run.cases}


def junit_statuses(path: Path) -> dict[str, str]:
    """{case id: status} of verify's JUnit XML (a case without a failure or error element passed). JUnit, not the JSON,
    where a test runs verify as a process and reads only statuses: --json gathers the HTML report's error data."""
    import xml.etree.ElementTree as ET

    out = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        bad = next(iter(tc), None)
        out[tc.get("name")] = "PASS" if bad is None else bad.get("type")
    return out


def manifest(case_dir: Path) -> dict:
    return json.loads((case_dir / "case.json").read_text())


def read_storage(case_dir: Path, tensor: dict, key: str = "file") -> np.ndarray:
    return np.fromfile(case_dir / tensor[key], dtype=D.lookup(tensor["dtype"]).np_dtype)


def logical(case_dir: Path, tensor: dict, key: str = "file") -> np.ndarray:
    """Read a tensor back through the manifest's shape/strides/offset only."""
    storage = read_storage(case_dir, tensor, key)
    shape, strides, offset = tensor["shape"], tensor["strides"], tensor["offset"]
    index = np.full(shape, offset, dtype=np.int64)  # (element coords -> offset + sum(coord * stride), axis by axis)
    for axis, (size, stride) in enumerate(zip(shape, strides)):
        index += (np.arange(size, dtype=np.int64) * stride).reshape([-1 if a == axis else 1 for a in range(len(shape))])
    return np.array(storage[index], dtype=storage.dtype)  # (np.array: a 0-d view's element as an array)


def tensor(m: dict, name: str) -> dict:
    return next(t for t in m["tensors"] if t["name"] == name)


def generated(root: Path, cases_yaml: str) -> Path:
    """gen of a case file text into root/out (for a module-scoped suite that tests copy before changing)."""
    out = root / "out"
    result = run_cli("gen", write_yaml(root, cases_yaml), "-o", out)
    assert result.exit_code == 0, result.output
    return out


def fresh_copy(out: Path, tmp: Path) -> Path:
    """A private copy of a generated OUT, for a test that changes it."""
    import shutil

    return Path(shutil.copytree(out, tmp / "out"))


def one_line_error(result, *needles: str, ignore: tuple[str, ...] = ()) -> str:
    """The one error line of a refused run, asserted: exit 2, no traceback, exactly one non-blank line (lines
    starting with an `ignore` prefix aside: a command's progress) which starts 'aclnn-cli: error: ' and holds each
    needle; returned whole. `result` is run_cli's (its output) or a subprocess's (its stdout and stderr)."""
    if hasattr(result, "returncode"):  # (subprocess.CompletedProcess)
        code, text = result.returncode, result.stdout + result.stderr
    else:
        code, text = result.exit_code, result.output
    assert code == 2, (code, text[-2000:])
    assert "Traceback" not in text, text[-2000:]
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith(ignore)]
    assert len(lines) == 1 and lines[0].startswith("aclnn-cli: error: "), text[-2000:]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@contextlib.contextmanager
def restored_registry():
    """Whatever is registered inside (ops, their variants, user modules) is gone after it."""
    import sys

    from aclnn_cli.device.defects import CATALOGUE
    from aclnn_cli.ops.registry import DECLARED_IN, OPS

    ops, declared, catalogue, modules = dict(OPS), dict(DECLARED_IN), dict(CATALOGUE), set(sys.modules)
    try:
        yield
    finally:
        OPS.clear(), OPS.update(ops), DECLARED_IN.clear(), DECLARED_IN.update(declared)
        CATALOGUE.clear(), CATALOGUE.update(catalogue)
        for name in set(sys.modules) - modules:
            if name.startswith("aclnn_cli_user_ops"):
                del sys.modules[name]
