"""The lazy registry (ops/registry.py): BUNDLED names every op file, and a command imports only its ops."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import aclnn_cli.ops as ops_pkg
from aclnn_cli.ops import OPS, find_op
from aclnn_cli.ops.registry import BUNDLED, DECLARED_IN

from helpers import run_cli, write_yaml

OPS_DIR = Path(ops_pkg.__file__).parent


def test_bundled_table_names_every_op_file_and_nothing_else():
    declaring = {p.stem for p in OPS_DIR.glob("*.py") if "\nSPEC = register(" in p.read_text()}
    assert set(BUNDLED.values()) == declaring
    bundled = {name: Path(DECLARED_IN[name]).stem for name in OPS if Path(DECLARED_IN[name]).parent == OPS_DIR}
    assert bundled == BUNDLED
    assert all(OPS[name].key == module for name, module in BUNDLED.items())


def test_find_op_takes_every_spelling_it_took_before():
    for name, module in BUNDLED.items():
        spec = OPS[name]
        for spelling in (name, name.removeprefix("aclnn"), module, name.upper(), f"  {name} "):
            assert find_op(spelling) is spec, spelling


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"})
    return {m for m in json.loads(out.stdout.splitlines()[-1]) if m.startswith("aclnn_cli.ops.")}


OP_MODULES = {f"aclnn_cli.ops.{m}" for m in BUNDLED.values()}


def test_looking_up_one_op_imports_that_op_only():
    loaded = _modules_after("from aclnn_cli.ops import find_op; find_op('aclnnSiluBackward')")
    assert loaded & OP_MODULES == {"aclnn_cli.ops.silu_backward"}


def test_verify_of_one_op_imports_that_op_only(tmp_path):
    """The whole verify command in one process (its workers would import what they unpickle)."""
    out = tmp_path / "out"
    yaml = write_yaml(tmp_path, "op: aclnnSigmoidBackward\ncases:\n  - {name: a, dtype: float16, shape: [64]}\n")
    assert run_cli("gen", yaml, "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    code = ("import sys\nfrom aclnn_cli.cli import main\n"
            f"try:\n    main(['verify', {str(out)!r}, '-j', '1'])\nexcept SystemExit as e:\n    assert e.code == 0, e.code")
    assert _modules_after(code) & OP_MODULES == {"aclnn_cli.ops.sigmoid_backward"}


def test_reading_the_registry_whole_loads_every_op():
    loaded = _modules_after("from aclnn_cli.ops import OPS; n = len(OPS)")
    assert OP_MODULES <= loaded
