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
    """Every op module is in the folder of its family (ops/<family>/<op>.py), named by its key, and BUNDLED names
    exactly those modules."""
    declaring = {f"{p.parent.name}.{p.stem}" for p in OPS_DIR.glob("*/*.py") if "\nSPEC = register(" in p.read_text()}
    assert set(BUNDLED.values()) == declaring
    bundled = {name: f"{Path(DECLARED_IN[name]).parent.name}.{Path(DECLARED_IN[name]).stem}" for name in OPS
               if Path(DECLARED_IN[name]).parent.parent == OPS_DIR}
    assert bundled == BUNDLED
    assert all(OPS[name].key == module.rsplit(".", 1)[1] for name, module in BUNDLED.items())
    assert all(type(OPS[name].family).__name__.lower() == module.split(".")[0] for name, module in BUNDLED.items())


def test_find_op_takes_every_spelling_it_took_before():
    for name, module in BUNDLED.items():
        spec = OPS[name]
        for spelling in (name, name.removeprefix("aclnn"), module.rsplit(".", 1)[1], name.upper(), f"  {name} "):
            assert find_op(spelling) is spec, spelling


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"})
    return {m for m in json.loads(out.stdout.splitlines()[-1]) if m.startswith("aclnn_cli.ops.")}


OP_MODULES = {f"aclnn_cli.ops.{m}" for m in BUNDLED.values()}


def test_looking_up_one_op_imports_that_op_only():
    loaded = _modules_after("from aclnn_cli.ops import find_op; find_op('aclnnSiluBackward')")
    assert loaded & OP_MODULES == {"aclnn_cli.ops.elementwise.silu_backward"}


def test_verify_of_one_op_imports_that_op_only(tmp_path):
    """The whole verify command in one process (its workers would import what they unpickle)."""
    out = tmp_path / "out"
    yaml = write_yaml(tmp_path, "op: aclnnSigmoidBackward\ncases:\n  - {name: a, dtype: float16, shape: [64]}\n")
    assert run_cli("gen", yaml, "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    code = ("import sys\nfrom aclnn_cli.cli.main import main\n"
            f"try:\n    main(['verify', {str(out)!r}, '-j', '1'])\nexcept SystemExit as e:\n    assert e.code == 0, e.code")
    assert _modules_after(code) & OP_MODULES == {"aclnn_cli.ops.elementwise.sigmoid_backward"}


def test_reading_the_registry_whole_loads_every_op():
    loaded = _modules_after("from aclnn_cli.ops import OPS; n = len(OPS)")
    assert OP_MODULES <= loaded


def _entry_point_package(root: Path) -> Path:
    """A package installed the way pip leaves one (a module and its .dist-info with entry_points.txt), exposing
    tests/user_ops/my_center_backward.py in the group 'aclnn_cli.ops', on a directory for PYTHONPATH."""
    import shutil

    site = root / "site"
    (site / "my_center_ops").mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "user_ops" / "my_center_backward.py", site / "my_center_ops" / "__init__.py")
    info = site / "my_center_ops-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-center-ops\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[aclnn_cli.ops]\nmy_center = my_center_ops\n")
    return site


def test_an_entry_point_op_loads_when_its_name_is_looked_up_and_with_the_whole_registry(tmp_path):
    """Entry points are read lazily (not at every start): gen of a case naming the op, and `ops`, find it."""
    import os

    site = _entry_point_package(tmp_path)
    env = {**{k: v for k, v in os.environ.items() if k != "ACLNN_CLI_OPS"}, "PYTHONPATH": str(site)}
    cases = Path(__file__).parent / "user_ops" / "my_center_backward.yaml"

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "aclnn_cli", *map(str, args)], capture_output=True, text=True,
                              env=env, timeout=300)

    out = tmp_path / "out"
    for args in (("gen", cases, "-o", out), ("emulate", out), ("verify", out)):
        done = cli(*args)
        assert done.returncode == 0, (args, done.stdout[-1500:], done.stderr[-1500:])
    listed = json.loads(cli("ops", "--json").stdout)
    assert "aclnnMyCenterBackward" in {op["op"] for op in listed}
    without = subprocess.run([sys.executable, "-m", "aclnn_cli", "gen", str(cases), "-o", str(tmp_path / "o2")],
                             capture_output=True, text=True, timeout=300,
                             env={k: v for k, v in env.items() if k != "PYTHONPATH"})
    assert without.returncode == 2 and "aclnnMyCenterBackward" in without.stderr, without.stderr[-500:]


def test_the_tool_runs_one_blas_thread_per_process_unless_told_otherwise():
    """Its parallelism is the process pool: OpenBLAS's spinning threads would take the other worker's core
    (decision 57). A user's own setting wins."""
    code = "import os, aclnn_cli; print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['MKL_NUM_THREADS'])"
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.split() == ["1", "1"]
    env["OPENBLAS_NUM_THREADS"] = "3"
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.split() == ["3", "1"]
    env.pop("OPENBLAS_NUM_THREADS")
    threads = "import aclnn_cli, numpy, os; print(len(os.listdir('/proc/self/task')))"  # (OpenBLAS's are native)
    assert subprocess.run([sys.executable, "-c", threads], env=env, capture_output=True, text=True).stdout.strip() == "1"


def test_the_look_before_importlib_metadata_finds_the_group_however_it_is_written(tmp_path, monkeypatch):
    """user._entry_points_may_name_ours: no for installed packages none of which declares the group (the common case:
    importlib.metadata is then not imported); yes for the group's section as configparser and importlib.metadata
    read it (spaces around the name), and for what it cannot look into (a zip file on sys.path)."""
    from aclnn_cli.ops import user

    site = tmp_path / "site"
    info = site / "other-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n# [aclnn_cli.ops]\n")
    monkeypatch.setattr(sys, "path", [str(site), str(tmp_path / "missing")])
    assert not user._entry_points_may_name_ours()
    (info / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n\n  [ aclnn_cli.ops ]  \nx = y\n")
    assert user._entry_points_may_name_ours()
    (info / "entry_points.txt").write_text("[aclnn_cli.opsx]\nx = y\n")
    assert not user._entry_points_may_name_ours()
    (tmp_path / "lib.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    monkeypatch.setattr(sys, "path", [str(site), str(tmp_path / "lib.zip")])
    assert user._entry_points_may_name_ours()
    monkeypatch.setattr(sys, "path", [str(site)])

    class OwnDistributions:  # (an import hook that finds distributions importlib.metadata would ask)
        @staticmethod
        def find_distributions(context=None):
            return iter(())

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, OwnDistributions()])
    assert user._entry_points_may_name_ours()


def test_a_command_that_reads_the_registry_whole_does_not_import_importlib_metadata_without_a_plugin():
    """`ops` reads every op and the entry points: with no installed package declaring the group (this venv),
    importlib.metadata stays unimported (25 ms of a command's start)."""
    code = ("import atexit, sys, runpy; sys.argv = ['aclnn-cli', 'ops', '--json']\natexit.register(lambda: print("
            "'importlib.metadata' in sys.modules, file=sys.stderr))\nrunpy.run_module('aclnn_cli', run_name='__main__')")
    env = {k: v for k, v in __import__("os").environ.items() if k != "ACLNN_CLI_OPS"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr[-2000:]
