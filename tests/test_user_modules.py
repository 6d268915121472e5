"""User op modules cannot take the tool down (issue 18, part 6).

A user's module runs inside aclnn-cli: whatever it does while loading (sys.exit, Ctrl-C, any
BaseException, a 5 KB message), whatever it declares (wrong types, no output, names twice, a
bundled op's key) and wherever it lives (a FIFO, an empty folder) is one line naming the file,
exit 2, at load. The CLI cases run in a fresh process each, as a user's run would; declarations
are checked in this process through the public `register` (the registry is restored after each).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from aclnn_cli.files.text import clip
from aclnn_cli.errors import UserError
from aclnn_cli.judge.results import CaseResult, Repro
from aclnn_cli.ops import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, register
from aclnn_cli.values.attrvalues import ATTRIBUTE_KINDS
from aclnn_cli.ops.registry import DECLARED_IN, OPS

from clifork import cli_process
from helpers import one_line_error

USER_OPS = Path(__file__).parent / "user_ops"
HERE = __file__
TIMEOUT = 120  # seconds: a hang (a FIFO opened as a module) fails the test instead of stalling it


def cli(*args, cwd=None, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ACLNN_CLI_OPS"}
    env.update(env_extra or {})
    return cli_process(*map(str, args), env=env, cwd=cwd, timeout=TIMEOUT)


def one_line(done: subprocess.CompletedProcess) -> str:
    """The run's one error line (helpers.one_line_error), all of its stderr, without the prefix."""
    line = one_line_error(done)
    assert done.stderr == line + "\n", done.stderr
    return line.removeprefix("aclnn-cli: error: ")


# ---------------------------------------------------------------- loading: however the module ends

MODULE_ENDINGS = {
    "sys_exit_0": ("import sys\nsys.exit(0)\n",
                   "the op module called sys.exit(0) while loading; an op module must only declare (aclnn-cli stops here)"),
    "keyboard_interrupt": ("raise KeyboardInterrupt\n", "loading the op module was interrupted (KeyboardInterrupt)"),
    "base_exception": ("class Escape(BaseException):\n    pass\nraise Escape('out of here')\n",
                       "loading the op module failed: Escape: out of here"),
}


@pytest.mark.parametrize("ending", list(MODULE_ENDINGS))
def test_a_module_that_exits_or_escapes_is_one_line_and_exit_2(tmp_path, ending):
    source, message = MODULE_ENDINGS[ending]
    module = tmp_path / "my_op.py"
    module.write_text(source)
    assert one_line(cli("--ops", module, "ops", "--json")) == f"{module}: {message}"


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """A small bundled case, generated and emulated with a sign-flipped kernel: verify must fail it."""
    root = tmp_path_factory.mktemp("gate")
    cases = root / "c.yaml"
    cases.write_text("op: aclnnSiluBackward\ncases:\n  - name: small\n    shape: [64]\n    dtype: float32\n")
    out = root / "out"
    assert cli("gen", cases, "-o", out).returncode == 0
    assert cli("emulate", out, "--defect", "sign-slip").returncode == 0
    assert cli("verify", out).returncode == 1  # the gate, without a user module
    return out


def test_verify_never_passes_because_a_module_exited(generated, tmp_path):
    """The probe: `sys.exit(0)` in a module made verify exit 0 in silence with no JSON, so a sign-flipped
    kernel passed CI. Now the run stops at the module (exit 2) and writes nothing."""
    module = tmp_path / "quiet.py"
    module.write_text("import sys\nsys.exit(0)\n")
    results = tmp_path / "v.json"
    message = one_line(cli("--ops", module, "verify", generated, "--json", results))
    assert message.startswith(f"{module}: the op module called sys.exit(0)")
    assert not results.exists()


def test_a_long_multiline_message_is_cut_to_one_short_line(tmp_path):
    module = tmp_path / "loud.py"
    module.write_text("raise ValueError('line\\n' * 1000)\n")  # a 5 KB message
    message = one_line(cli("--ops", module, "ops"))
    told = message.removeprefix(f"{module}: loading the op module failed: ")
    assert told.startswith("ValueError: line\\nline\\n") and told.endswith("...") and len(told) == 300


# ---------------------------------------------------------------- where the module is

def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


PATHS = {  # name -> (make the path in tmp_path, the message)
    "missing": (lambda d: d / "nope.py", "no op file or folder here"),
    "not_py": (lambda d: (d / "op.txt").write_text("x = 1\n") and d / "op.txt",
               "an op module is a .py file (a folder of them, or a package)"),
    "fifo": (lambda d: _fifo(d / "op.py"), "an op module is a .py file, this is a FIFO"),
    "empty_folder": (lambda d: (d / "ops").mkdir() or d / "ops",
                     "no op modules (*.py, not starting with _) in this folder"),
    "registers_nothing": (lambda d: (d / "op.py").write_text("X = 1\n") and d / "op.py",
                          "this op module registers no operator (it calls register(OpSpec(...)); a helper module in "
                          "an op folder is named _*.py)"),
}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("kind", list(PATHS))
def test_a_path_that_holds_no_op_module_is_one_line(tmp_path, kind):
    make, message = PATHS[kind]
    path = make(tmp_path)
    assert one_line(cli("--ops", path, "ops")) == f"{path}: {message}"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_in_an_op_folder_is_refused_not_opened(tmp_path):
    """Opening a FIFO to import it blocks forever (nobody writes to it): it is refused before any import."""
    folder = tmp_path / "ops"
    folder.mkdir()
    (folder / "a_real_op.py").write_text((USER_OPS / "my_hardtanh_backward.py").read_text())
    _fifo(folder / "b_pipe.py")
    assert one_line(cli("--ops", folder, "ops")) == f"{folder / 'b_pipe.py'}: an op module is a .py file, this is a FIFO"


def test_a_user_op_with_a_bundled_key_is_refused_before_it_overwrites_bundled_cases(tmp_path):
    """The probe: a user op keyed `silu_backward` wrote its cases over the bundled op's in OUT."""
    module = tmp_path / "mine.py"
    module.write_text((USER_OPS / "my_hardtanh_backward.py").read_text()
                      .replace('key="my_hardtanh_backward"', 'key="silu_backward"'))
    message = one_line(cli("--ops", module, "gen", "-o", tmp_path / "out"))
    assert message == (f"{module}: op aclnnMyHardtanhBackward: key: aclnnSiluBackward (key silu_backward) is a "
                       "bundled op: give this op another name and key")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- what the module declares


@pytest.fixture
def registry():
    """Registrations made by a test are undone, so this process's registry stays the bundled ops'."""
    ops, declared = dict(OPS), dict(DECLARED_IN)
    yield
    OPS.clear(), OPS.update(ops), DECLARED_IN.clear(), DECLARED_IN.update(declared)


def _reference(t):
    value = np.asarray(t["gradOutput"], dtype=np.float64)
    return Reference(value, np.zeros_like(value), np.abs(value))


@defect
def _kernel(t):
    """Defect: a probe variant."""
    return t["gradOutput"]


GRAD, SELF, OUT = (TensorSpec("gradOutput", "input", {"normal": [0, 1]}), TensorSpec("self", "input", {"uniform": [-2, 2]}),
                   TensorSpec("out", "output", {"constant": 0}))
VALID = OpSpec(name="aclnnUserProbeOp", key="user_probe_op", summary="probe", formula="out = gradOutput",
               tensors=(GRAD, SELF, OUT), attributes=(AttrSpec("alpha", "scalar", default=1.0),),
               products={"A2": ("float32", "float16")}, dims=(0, 8), empty_ok=True, reference=_reference)

BAD_FIELDS = {  # id -> (fields replaced in VALID, "field: message" the refusal ends with)
    "name_not_a_string": (dict(name=42), "name: expected a string, got 42"),
    "name_not_an_api_name": (dict(name="my op"),
                             "name: expected an aclnn API name (aclnn then letters, digits or _), got 'my op'"),
    "key_empty": (dict(key=""), "key: expected a snake_case key (a-z, 0-9, _, from a letter, up to 64), got ''"),
    "summary_not_text": (dict(summary=None), "summary: expected a string, got None"),
    "header_escapes": (dict(header="../../x.h"),
                       "header: expected a header path like aclnnop/aclnn_user_probe_op.h, got '../../x.h'"),
    "tensors_not_a_tuple": (dict(tensors="gradOutput"), "tensors: expected a tuple, got 'gradOutput'"),
    "tensor_not_a_tensorspec": (dict(tensors=(GRAD, "self", OUT)), "tensors[1]: expected a TensorSpec, got 'self'"),
    "no_output": (dict(tensors=(GRAD, SELF)),
                  "tensors: expected one or more inputs and exactly one output (several only in the rows family), got 2 inputs and 0 outputs"),
    "two_outputs": (dict(tensors=(GRAD, OUT, dataclasses.replace(OUT, name="out2"))),
                    "tensors: expected one or more inputs and exactly one output (several only in the rows family), got 1 inputs and 2 outputs"),
    "unknown_role": (dict(tensors=(GRAD, dataclasses.replace(SELF, role="inout"), OUT)),
                     "tensors[1].role: expected one of input, output, got 'inout'"),
    "tensor_name_twice": (dict(tensors=(GRAD, dataclasses.replace(SELF, name="gradOutput"), OUT)),
                          "tensors[1].name: 'gradOutput' is declared twice (tensor and attribute names are one "
                          "namespace)"),
    "attribute_named_as_a_tensor": (dict(attributes=(AttrSpec("self", "scalar", default=1.0),)),
                                    "attributes[0].name: 'self' is declared twice (tensor and attribute names are one "
                                    "namespace)"),
    "attribute_name_twice": (dict(attributes=(AttrSpec("a", "bool", default=True), AttrSpec("a", "bool", default=True))),
                             "attributes[1].name: 'a' is declared twice (tensor and attribute names are one namespace)"),
    "tensor_name_not_an_identifier": (dict(tensors=(GRAD, dataclasses.replace(SELF, name="my self"), OUT)),
                                      "tensors[1].name: expected an identifier, got 'my self'"),
    "default_fill_broken": (dict(tensors=(GRAD, dataclasses.replace(SELF, default_fill={"uniform": [0]}), OUT)),
                            "tensors[1].default_fill: 'uniform' takes two numbers, got [0]"),
    "read_by_kernel_not_bool": (dict(tensors=(GRAD, dataclasses.replace(SELF, read_by_kernel="no"), OUT)),
                                "tensors[1].read_by_kernel: expected True or False, got 'no'"),
    "unknown_attribute_kind": (dict(attributes=(AttrSpec("alpha", "float32", default=1.0),)),
                               "attributes[0].kind: expected one of scalar, bool, string, int_list, int, bool_list, double, "
                               "float, got 'float32'"),
    "attribute_default_of_another_kind": (dict(attributes=(AttrSpec("flag", "bool", default=1),)),
                                          "attributes[0].default: expected true or false, got 1"),
    "optional_without_default": (dict(attributes=(AttrSpec("alpha", "scalar", optional=True),)),
                                 "attributes[0].default: an optional attribute needs the default the op uses for null"),
    "unknown_scalar_dtype": (dict(attributes=(AttrSpec("alpha", "scalar", default=1.0, scalar_dtype="int8"),)),
                             "attributes[0].scalar_dtype: expected one of float32, float16, bfloat16, float64, int32, int64, "
                             "got 'int8'"),
    "choices_of_a_scalar": (dict(attributes=(AttrSpec("alpha", "scalar", default=1.0, choices=("a",)),)),
                            "attributes[0].choices: only a string attribute has choices (this one is a scalar)"),
    "string_default_not_a_choice": (dict(attributes=(AttrSpec("mode", "string", default="x", choices=("none",)),)),
                                    "attributes[0].default: expected one of 'none', got 'x'"),
    "no_product": (dict(products={}), "products: expected at least one product"),
    "unknown_dtype": (dict(products={"A2": ("float32", "float8")}),
                      "products[A2][1]: expected one of float32, float16, bfloat16, int64, int32, uint8, int16, int8, "
                      "complex64, complex128, got 'float8'"),
    "dtypes_as_a_list": (dict(products={"A2": ["float32"]}), "products[A2]: expected a tuple, got ['float32']"),
    "dims_reversed": (dict(dims=(3, 1)), "dims: expected (min, max) ranks with 0 <= min <= max <= 8, got (3, 1)"),
    "dims_strings": (dict(dims=("0", "8")),
                     "dims: expected (min, max) ranks with 0 <= min <= max <= 8, got ('0', '8')"),
    "empty_ok_not_bool": (dict(empty_ok="yes"), "empty_ok: expected True or False, got 'yes'"),
    "no_reference": (dict(reference=None), "reference: expected a function, got None"),
    "kernel_not_callable": (dict(kernel=3), "kernel: expected a function or None, got 3"),
    "golden_reference_not_callable": (dict(golden_reference="x"), "golden_reference: expected a function or None, got 'x'"),
    "golden_reference_elementwise": (dict(golden_reference=_kernel),
                                     "golden_reference: only a family with blocks takes one (an Elementwise reference "
                                     "computes only what gen needs)"),
    "edge_at_not_callable": (dict(edge_at=1), "edge_at: expected a function or None, got 1"),
    "reference_at_share_zero": (dict(reference_at_share=0), "reference_at_share: expected a number in (0, 1], got 0"),
    "reference_at_share_over_one": (dict(reference_at_share=16),
                                    "reference_at_share: expected a number in (0, 1], got 16"),
    "complex_formula_cancelling": (dict(products={"A2": ("complex64",)},
                                        complex_formula=lambda t: t["gradOutput"] * t["self"] - t["self"]),
                                   "complex_formula: no relative error bound follows from it (NoRelativeBound: "
                                   "complex_formula adds or subtracts a rounded value (it may cancel: no relative error "
                                   "bound follows)); the complex standard judges against one: use +, - and * of the "
                                   "inputs and real constants, adding or subtracting only unrounded values"),
    "redrawn_an_output": (dict(redrawn=("out",)), "redrawn[0]: expected one of gradOutput, self, got 'out'"),
    "unknown_cast_mode": (dict(cast_mode={"float16": "up"}),
                          "cast_mode[float16]: expected one of rint, round, got 'up'"),
    "contract_not_a_contract": (dict(contract="same"), "contract: expected a Contract, got 'same'"),
    "broadcast_on_another_product": (dict(contract=Contract(broadcast_on=("A5",))),
                                     "contract.broadcast_on[0]: expected one of A2, got 'A5'"),
    "variant_name_unusable": (dict(variants={"my defect!": _kernel}),
                              "variants: expected a variant name (letters, digits, _ . -), got 'my defect!'"),
    "variant_not_callable": (dict(variants={"mine": "x"}), "variants[mine]: expected a function, got 'x'"),
    "bundled_key": (dict(key="silu_backward"),
                    "key: aclnnSiluBackward (key silu_backward) is a bundled op: give this op another name and key"),
    "bundled_name_in_another_case": (dict(name="aclnnsilubackward"),
                                     "name: aclnnSiluBackward (key silu_backward) is a bundled op: give this op another "
                                     "name and key"),
}


def test_a_complex_formula_reading_an_attribute_without_a_default_registers(registry):
    """register traces complex_formula with the attributes' defaults for its error bound (ops/complexparts.py); one
    that cannot run on a missing default is left to the cases, which carry the value (judging traces it again)."""
    spec = dataclasses.replace(VALID, products={"A2": ("complex64",)},
                               attributes=(AttrSpec("alpha", "scalar", default=None, optional=False),),
                               complex_formula=lambda t: t["gradOutput"] * t["alpha"])
    assert register(spec).name == VALID.name


@pytest.mark.parametrize("case", list(BAD_FIELDS))
def test_register_checks_the_whole_declaration(registry, case):
    fields, message = BAD_FIELDS[case]
    spec = dataclasses.replace(VALID, **fields)
    with pytest.raises(UserError) as caught:
        register(spec)
    name = fields.get("name", VALID.name)
    label = name if isinstance(name, str) else repr(name)
    assert str(caught.value) == f"{HERE}: op {label}: {message}"
    assert spec.name not in OPS or OPS[spec.name] is not spec


def test_a_declaration_that_is_not_an_opspec(registry):
    with pytest.raises(UserError) as caught:
        register("aclnnSomething")
    assert str(caught.value) == f"{HERE}: op 'aclnnSomething': register: expected an OpSpec, got 'aclnnSomething'"


def test_the_same_op_registered_twice(registry):
    register(VALID)
    with pytest.raises(UserError) as caught:
        register(dataclasses.replace(VALID, key="another_key"))
    assert str(caught.value) == (f"{HERE}: op aclnnUserProbeOp: name: aclnnUserProbeOp (key user_probe_op) is an op "
                                 f"already registered ({clip(HERE, 80)}): give this op another name and key")


def test_every_attribute_kind_register_accepts_is_one_gen_and_verify_read(registry):
    """One list of kinds (ops/base.ATTRIBUTE_KINDS): register accepts each, and the one reader gen (case
    files) and verify (manifests) share has each; before, an unknown kind was written by gen and refused by
    verify."""
    from aclnn_cli.values.attrvalues import PARSERS

    assert tuple(PARSERS) == ATTRIBUTE_KINDS == ("scalar", "bool", "string", "int_list", "int", "bool_list", "double",
                                                 "float")
    defaults = {"scalar": 1.0, "bool": True, "string": "none", "int_list": (1, 2), "int": -1, "bool_list": (True, False),
                "double": 1e-5, "float": 0.5}
    attributes = tuple(AttrSpec(f"a_{kind}", kind, default=defaults[kind], choices=("none",) if kind == "string" else ())
                       for kind in ATTRIBUTE_KINDS)
    assert register(dataclasses.replace(VALID, attributes=attributes)).attributes == attributes


def test_the_bundled_ops_pass_the_same_checks(registry):
    """Every bundled declaration goes through register's checks (a re-registration under a fresh name and key, its
    own graph ops, aclnnKlDivBackward's KlDivLossGrad, under fresh names too)."""
    for spec in list(OPS.values()):
        graph_ops = {f"{k}Copy": dataclasses.replace(g, api=spec.name + "Copy") for k, g in spec.graph_ops.items()}
        fresh = dataclasses.replace(spec, name=spec.name + "Copy", key=spec.key + "_copy", graph_ops=graph_ops)
        registered = register(fresh)
        assert OPS[fresh.name] is registered and registered.products == spec.products


# ---------------------------------------------------------------- a user function failing while the tool runs

def _failing_op(tmp_path: Path, failure: str) -> tuple[Path, Path]:
    """The worked example whose reference does `failure` when FAIL_NOW is set; its cases generated and
    emulated with a defect (so verify re-evaluates the reference where the dump differs)."""
    module = tmp_path / "op.py"
    module.write_text((USER_OPS / "my_hardtanh_backward.py").read_text().replace(
        '    x, dy = t["self"], t["gradOutput"]\n',
        f'    import os, sys\n    if os.environ.get("FAIL_NOW"):\n        {failure}\n    x, dy = t["self"], t["gradOutput"]\n', 1))
    cases = tmp_path / "c.yaml"
    cases.write_text("op: aclnnMyHardtanhBackward\ncases:\n  - name: ends\n    shape: [64]\n    dtype: float32\n"
                     "    inputs: {self: {values: [-1.0, 1.0, 0.5]}}\n")
    out = tmp_path / "out"
    assert cli("--ops", module, "gen", cases, "-o", out).returncode == 0
    assert cli("--ops", module, "emulate", out, "--defect", "inclusive-window").returncode == 0
    return module, out


def test_a_user_function_that_exits_fails_verify_instead_of_passing_it(tmp_path):
    """The same hole at run time: a reference calling sys.exit(0) made verify exit 0 with no results."""
    module, out = _failing_op(tmp_path, "sys.exit(0)")
    results = tmp_path / "v.json"
    done = cli("--ops", module, "verify", out, "--json", results, env_extra={"FAIL_NOW": "1"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (case,) = json.loads(results.read_text())["cases"]
    assert case["status"] == "ERROR"
    assert case["reason"] == f"{module}: op aclnnMyHardtanhBackward: reference failed: SystemExit: 0"


def test_a_user_function_error_is_one_line_in_gen_and_in_verify_workers(tmp_path):
    module, out = _failing_op(tmp_path, "raise ValueError('boom\\n' * 400)")
    message = one_line(cli("--ops", module, "gen", tmp_path / "c.yaml", "-o", tmp_path / "again", "-j", "2",
                           env_extra={"FAIL_NOW": "1"}))
    told = message.removeprefix(f"{module}: op aclnnMyHardtanhBackward: reference failed: ")
    assert told.startswith("ValueError: boom\\nboom\\n") and len(told) == 300
    done = cli("--ops", module, "verify", out, "-j", "2", env_extra={"FAIL_NOW": "1"})
    assert done.returncode == 2 and "Traceback" not in done.stderr + done.stdout
    assert "ERROR" in done.stdout


# ---------------------------------------------------------------- repro lines


def test_a_repro_line_quotes_every_user_value():
    """The probe: a case named `a b` was printed as `--case a b-r`, which a shell splits in two."""
    result = CaseResult("a b-r", "aclnnX", "float32", [4], "A2", "FAIL", "mere-mare", "", path="/o u t/a b-r",
                        repro=Repro("aclnn-cli gen '/cases/my cases.yaml'", "/o u t", " --tolerance 'T=0.001'"))
    assert result.repro == ("aclnn-cli gen '/cases/my cases.yaml' --case 'a b-r' -o '/o u t' && aclnn-cli verify "
                            "'/o u t/a b-r' --tolerance 'T=0.001'")
    gen, verify = (shlex.split(part) for part in result.repro.split(" && "))
    assert gen == ["aclnn-cli", "gen", "/cases/my cases.yaml", "--case", "a b-r", "-o", "/o u t"]
    assert verify == ["aclnn-cli", "verify", "/o u t/a b-r", "--tolerance", "T=0.001"]


def test_a_user_ops_repro_line_runs_as_printed(tmp_path):
    """A failing user-op case, its op file, cases and output in folders with spaces: the printed repro line, run
    through a shell, regenerates and re-verifies that one case (with the --ops the op needs) and fails it again."""
    root = tmp_path / "my run"
    root.mkdir()
    module = root / "my op.py"
    module.write_text((USER_OPS / "my_hardtanh_backward.py").read_text())
    cases = root / "my cases.yaml"
    cases.write_text("op: aclnnMyHardtanhBackward\ncases:\n  - name: ends\n    shape: [64]\n    dtype: float32\n"
                     "    inputs: {self: {values: [-1.0, 1.0, 0.5]}}\n")
    out = root / "o u t"
    assert cli("--ops", module, "gen", cases, "-o", out).returncode == 0
    assert cli("--ops", module, "emulate", out, "--defect", "inclusive-window").returncode == 0
    done = cli("--ops", module, "verify", out, "--json", root / "v.json")
    assert done.returncode == 1, done.stderr
    (case,) = json.loads((root / "v.json").read_text())["cases"]
    assert case["status"] == "FAIL" and case["case_id"].startswith("my_hardtanh_backward-ends")
    repro = case["repro"]
    assert repro.startswith(f"aclnn-cli --ops {shlex.quote(str(module))} gen {shlex.quote(str(cases))} --case ")
    python = f"{shlex.quote(sys.executable)} -m aclnn_cli"
    env = {k: v for k, v in os.environ.items() if k != "ACLNN_CLI_OPS"}
    line = " && ".join(python + part.removeprefix("aclnn-cli") for part in repro.split(" && "))
    again = subprocess.run(line, shell=True, capture_output=True, text=True, env=env,
                           timeout=TIMEOUT)
    assert again.returncode == 1, again.stderr
    assert "1 failed" in again.stdout or "FAIL" in again.stdout
