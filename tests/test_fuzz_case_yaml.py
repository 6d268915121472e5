"""Fuzz target: our YAML case files, through the reader gen uses (parse, schema, expansion).

Documents are near-valid: a real op and the real keys, with hostile leaves (wrong types, huge and
negative numbers, NaN, long and odd strings, deep lists, anchors) now and then, so that most
documents get past their first key. The only outcomes allowed are cases or the one-line refusal
(tests/fuzzing.py).
"""

from __future__ import annotations

import yaml
from hypothesis import strategies as st

from aclnn_cli.values import yamlsafe
from aclnn_cli.cases.loader import cases_from_doc
from aclnn_cli.errors import UserError

from fuzzing import allowed_outcome, fuzz_target

OPS = ["aclnnSiluBackward", "aclnnLeakyReluBackward", "aclnnGeluBackwardV2", "aclnnSoftplusBackward",
       "aclnnHardswishBackward", "aclnnHardsigmoidBackward"]
scalar = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**31, 2**63, 10**30, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["float16", "bfloat16", "float32", "float64", "int8", "NCHW", "910B", "910", "310P", "..", "a/b",
                     "", "\x00", "1e309", "nan"]))
leaf = st.one_of(scalar, st.lists(scalar, max_size=4))


def mostly(valid, hostile, tenths: int = 8):
    """`valid` about tenths/10 of the time, else `hostile` (a plain one_of weighs hostile's many branches
    against valid's one, and most documents would stop at their first key)."""
    return st.tuples(st.sampled_from(range(10)), valid, hostile).map(lambda t: t[1] if t[0] < tenths else t[2])


small_shape = st.lists(st.integers(min_value=0, max_value=9), min_size=1, max_size=3)
shape = mostly(small_shape, st.one_of(st.lists(st.integers(min_value=-2, max_value=70), max_size=9), leaf))
number = mostly(st.floats(min_value=-10, max_value=10), scalar)
generator = mostly(st.one_of(
    st.fixed_dictionaries({"uniform": st.lists(number, min_size=2, max_size=2)}),
    st.fixed_dictionaries({"normal": st.lists(number, min_size=2, max_size=2)}),
    st.fixed_dictionaries({"constant": number}), st.fixed_dictionaries({"values": st.lists(number, max_size=6)})),
    st.one_of(st.dictionaries(st.text(max_size=8), leaf, max_size=2), leaf))
tensor = mostly(st.fixed_dictionaries({}, optional={"shape": shape, "dtype": leaf, "layout": leaf, "nullptr": leaf}),
                leaf)
case_keys = {
    "dtype": mostly(st.sampled_from(["float16", "bfloat16", "float32"]), leaf),
    "product": mostly(st.sampled_from(["950", "A2", "A3", "910", "310P"]), leaf),
    "seed": mostly(st.integers(min_value=0, max_value=2**32), scalar),
    "inputs": st.dictionaries(st.sampled_from(["self", "gradOutput", "x"]), generator, max_size=2),
    "tensors": st.dictionaries(st.sampled_from(["self", "gradOutput", "gradInput", "x"]), tensor, max_size=2),
    "attributes": st.dictionaries(st.sampled_from(["negativeSlope", "approximate", "beta", "threshold", "x"]),
                                  mostly(number, leaf, 5), max_size=2),
    "tolerance": st.dictionaries(st.sampled_from(["T", "rtol", "atol", "share", "ulps", "ratio", "x"]),
                                 mostly(st.floats(min_value=0, max_value=2), scalar), max_size=2),
    "standard": mostly(st.sampled_from(["mere-mare", "ulp", "thousandth", "allclose", "benchmark", "bitwise"]), leaf),
    "expect_status": mostly(st.sampled_from([0, 161001, 161002, 561103]), scalar),
    "contract": leaf,
}
case = st.fixed_dictionaries({"name": mostly(st.sampled_from(["a", "b", "c-1"]), scalar), "shape": shape},
                             optional=case_keys)
document = st.fixed_dictionaries(
    {"op": mostly(st.sampled_from(OPS), scalar, 9), "cases": mostly(st.lists(case, min_size=1, max_size=3), leaf, 9)},
    optional={"defaults": mostly(st.fixed_dictionaries({}, optional=case_keys), leaf, 9)})


def _load(text: str) -> None:
    try:
        cases_from_doc("fuzz.yaml", yamlsafe.parse("fuzz.yaml", text.encode("utf-8", "surrogatepass")))
    except UserError as exc:
        allowed_outcome(exc)


@fuzz_target(doc=document)
def test_fuzz_case_documents(doc):
    """A structured case document, dumped as YAML, loads into cases or is refused in one line."""
    _load(yaml.safe_dump(doc, allow_unicode=True))


@fuzz_target(doc=document, cut=st.integers(min_value=0, max_value=400), junk=st.sampled_from(
    ["[", "{", "]", "&a ", "*a", "<<: *a", ": :", "- ", "!!python/object:os.system", "\t", "'", '"', "%YAML 1.1\n",
     "---\n", "\x00", "\ufeff", "? ", "!!binary AAA", "[" * 200, "- " * 200]))
def test_fuzz_case_documents_damaged(doc, cut, junk):
    """The same documents with YAML syntax spliced in anywhere."""
    text = yaml.safe_dump(doc, allow_unicode=True)
    cut = min(cut, len(text))
    _load(text[:cut] + junk + text[cut:])
