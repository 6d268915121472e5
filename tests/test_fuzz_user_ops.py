"""Structured fuzzing of user op modules: declarations through the public `register`, and module files.

A declaration is built near-valid (the worked example's shape) with hostile leaves in any field:
wrong types, huge integers, NaN, deep nesting, duplicate names, long strings, odd unicode. The only
outcomes allowed are a registration that every reader of the declaration then handles (its
properties, `aclnn-cli ops`, the default case written to a manifest and read back as verify reads
it), or the one-line UserError (`allowed_outcome`). A module file ends in any way Python can
(sys.exit with any code, any BaseException with any message, bytes that are no Python).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from aclnn_cli.cases.attributes import case_combos, from_manifest, to_manifest
from aclnn_cli.cli.main import op_info
from aclnn_cli.errors import UserError
from aclnn_cli.ops import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, register
from aclnn_cli.ops.user import load_paths

from fuzzing import allowed_outcome, fuzz_target, scratch
from helpers import restored_registry  # (whatever an example registers is gone after it)


def _reference(t):
    value = np.asarray(t["gradOutput"], dtype=np.float64)
    return Reference(value, np.zeros_like(value), np.abs(value))


@defect
def _variant(t):
    """Defect: the gradient passed through."""
    return t["gradOutput"]


ODD_TEXT = st.sampled_from(["", " ", "x" * 5000, "a\nb", "\u202eevil", "\x00", "é", "💥", "..", "a b", "aclnn",
                            "silu_backward", "aclnnSiluBackward", "SiluBackward", "gradOutput", "float64", "nan"])
LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=2**64, max_value=2**300),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30), ODD_TEXT, st.binary(max_size=8),
                 st.just(_reference), st.just(object()))
NESTED = st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                                                    st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                      max_leaves=12)


def hostile(valid, odds: int = 6):
    """Mostly the valid value (`odds` to 1), sometimes a hostile one: most examples reach the deeper fields."""
    valid = valid if isinstance(valid, st.SearchStrategy) else st.just(valid)
    return st.sampled_from([valid] * odds + [NESTED]).flatmap(lambda chosen: chosen)


def mostly(valid, *others: st.SearchStrategy, odds: int = 8):
    """`valid` (`odds` to 1 against each of the others): names that collide or break, now and then."""
    return st.sampled_from([st.just(valid)] * odds + list(others)).flatmap(lambda chosen: chosen)


IDENT = st.one_of(st.sampled_from(["gradOutput", "self", "out", "alpha", "min", "max"]), ODD_TEXT, st.text(max_size=8))
FILL = st.one_of(st.sampled_from([{"normal": [0, 1]}, {"uniform": [-2, 2]}, {"constant": 0}, {"values": [1.0, "nan"]}]),
                 st.dictionaries(st.sampled_from(["normal", "uniform", "values", "bogus"]), NESTED, max_size=2))
TENSOR = st.builds(TensorSpec, name=hostile(IDENT), role=hostile(st.sampled_from(["input", "output", "inout"])),
                   default_fill=hostile(FILL), read_by_kernel=hostile(st.booleans()))
ATTR = st.builds(AttrSpec, name=hostile(IDENT),
                 kind=hostile(st.sampled_from(["scalar", "bool", "string", "int_list", "float", "tensor"])),
                 default=st.one_of(st.none(), st.floats(), st.booleans(), st.sampled_from(["none", "tanh"]),
                                   st.tuples(st.integers(), st.integers()), NESTED),
                 optional=hostile(st.booleans()), choices=hostile(st.sampled_from([(), ("none", "tanh"), (" x",)])),
                 scalar_dtype=hostile(st.sampled_from(["float32", "float16", "bfloat16", "float64", "int8"])))
VALID_TENSORS = (TensorSpec("gradOutput", "input", {"normal": [0, 1]}), TensorSpec("self", "input", {"uniform": [-2, 2]}),
                 TensorSpec("out", "output", {"constant": 0}))
TENSORS = mostly(VALID_TENSORS, st.lists(TENSOR, max_size=4).map(tuple), NESTED, odds=4)
DTYPES = st.lists(st.sampled_from(["float32", "float16", "bfloat16", "float64", "fp32", "int8"]), max_size=3).map(tuple)
KEYS = st.one_of(st.none(), st.integers(), st.floats(), ODD_TEXT, st.tuples(st.integers()))  # hashable, hostile
PRODUCTS = mostly({"A2": ("float32", "float16")},
                  st.dictionaries(st.one_of(st.sampled_from(["A2", "A3", "950"]), KEYS), hostile(DTYPES), max_size=3), odds=3)
CONTRACT = mostly(Contract(), st.builds(
    Contract, dtypes=hostile(st.sampled_from(["same", "promote"])), broadcast_on=hostile(st.just(("A2",))),
    mixed_fp32_on=hostile(st.just(())), also_accepts=hostile(st.just(("float64",))), out_is_promoted=hostile(False),
    checks_dims=hostile(True), attribute_rule=hostile(st.none())), NESTED, odds=3)
VALID = dict(name="aclnnFuzzOp", key="fuzz_op", summary="s", formula="f", tensors=VALID_TENSORS,
             products={"A2": ("float32", "float16")}, dims=(0, 8), empty_ok=True, reference=_reference,
             attributes=(AttrSpec("alpha", "scalar", default=1.0),))
FIELDS = {  # each field: near-valid values and hostile ones (NESTED: any type, any depth)
    "name": st.one_of(st.sampled_from(["aclnnSiluBackward", "aclnnfuzzop", "aclnnSiluBackwarD", "aclnn" + "x" * 200]),
                      ODD_TEXT, NESTED),
    "key": st.one_of(st.sampled_from(["silu_backward", "SiluBackward", "Fuzz", "fuzz op", "x" * 65]), ODD_TEXT, NESTED),
    "summary": NESTED, "formula": NESTED, "special_values": NESTED, "tensors": st.one_of(st.lists(TENSOR, max_size=4)
                                                                                         .map(tuple), NESTED),
    "products": st.one_of(st.dictionaries(st.one_of(st.sampled_from(["A2", "A3", "950"]), KEYS), hostile(DTYPES),
                                          max_size=3), NESTED),
    "dims": st.one_of(st.tuples(st.integers(-2, 10), st.integers(-2, 10)), NESTED),
    "empty_ok": NESTED, "reference": NESTED, "exact": NESTED, "kernel": NESTED, "ieee": NESTED, "edge": NESTED,
    "textbook": NESTED, "attributes": st.one_of(st.lists(ATTR, min_size=1, max_size=3).map(tuple), NESTED),
    "cast_mode": st.one_of(st.dictionaries(st.one_of(st.sampled_from(["float16", "x"]), KEYS),
                                           st.sampled_from(["rint", "round", "up"]), max_size=2), NESTED),
    "contract": st.one_of(st.builds(
        Contract, dtypes=hostile(st.sampled_from(["same", "promote", "mixed"])), broadcast_on=hostile(("A2",)),
        mixed_fp32_on=hostile(st.sampled_from([(), ("A3",)])), also_accepts=hostile(("float64",)),
        out_is_promoted=hostile(False), checks_dims=hostile(True), attribute_rule=hostile(st.none())), NESTED),
    "variants": st.one_of(st.dictionaries(st.one_of(st.sampled_from(["fuzz-defect", "sign-slip", "a b"]), KEYS),
                                          hostile(_variant), max_size=2), NESTED),
    "header": st.one_of(st.sampled_from(["aclnnop/aclnn_fuzz_op.h", "../x.h", "a\nb.h", "/abs.h"]), NESTED),
    "oracle_attributes": NESTED,
}
# A valid declaration with one to three fields replaced: every field gets its turn at being the bad one.
DECLARATION = st.lists(st.sampled_from(sorted(FIELDS)), min_size=0, max_size=3, unique=True).flatmap(
    lambda chosen: st.fixed_dictionaries({f: FIELDS[f] for f in chosen})).map(lambda over: {**VALID, **over})


def _use(spec: OpSpec) -> None:
    """What gen, verify and `aclnn-cli ops` read of a declaration, on its default case."""
    assert spec.output.role == "output" and spec.inputs and spec.dtypes
    assert [name for name, _ in spec.api_params]
    op_info(spec)

    def err(message: str, key: str) -> Exception:
        return UserError(message, where=key)

    try:
        combos = case_combos(spec, {}, err)
    except UserError as exc:  # an attribute without a default: a case must give one (the case file's error)
        assert "needs a value for" in str(exc)
        return
    for combo in combos:
        assert from_manifest(spec, to_manifest(spec, combo)) == combo  # what gen writes, verify reads


@fuzz_target(fields=DECLARATION)
def test_fuzz_register_a_declaration(fields):
    with restored_registry():
        try:
            spec = register(OpSpec(**fields))
        except BaseException as exc:
            allowed_outcome(exc)
            return
        _use(spec)


ENDINGS = st.one_of(
    st.builds(lambda code: f"import sys\nsys.exit({code!r})\n",
              st.one_of(st.none(), st.integers(), st.text(max_size=50), st.just("x" * 10_000))),
    st.builds(lambda cls, msg: f"raise {cls}({msg!r})\n",
              st.sampled_from(["KeyboardInterrupt", "SystemExit", "GeneratorExit", "BaseException", "Exception",
                               "MemoryError", "RecursionError", "ValueError", "UnicodeError", "StopIteration"]),
              st.one_of(st.text(max_size=60), ODD_TEXT, st.just("line\n" * 2000))),
    st.just("class Bad(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\nraise Bad()\n"),
    st.just("from aclnn_cli.errors import UserError\nraise UserError('x\\n' * 900, where='y' * 900)\n"),
    st.just("from aclnn_cli.ops import register\nregister(42)\n"),
    st.just("X = 1\n"),
)


@fuzz_target(source=st.one_of(ENDINGS, st.binary(max_size=200), ENDINGS.map(str.encode).map(lambda b: b"\xff" + b)))
def test_fuzz_load_a_module(source):
    with scratch() as d, restored_registry():
        module = d / "fuzz_op.py"
        module.write_bytes(source if isinstance(source, bytes) else source.encode())
        try:
            load_paths([module])
        except BaseException as exc:
            allowed_outcome(exc)
            return
        raise AssertionError("a module that registers no op loaded")  # (none of these register one)
