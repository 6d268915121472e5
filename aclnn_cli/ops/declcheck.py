"""An op declaration checked whole when it is registered.

Every part of the tool reads the one `OpSpec`: a field of the wrong type, a missing output, two
tensors of one name or an attribute kind nobody reads would otherwise load quietly and surface
as a traceback in gen, or as case files gen writes and verify refuses. Here each is one line
naming the declaring file, the op and the field, when the module loads. A name or key another
op already has (a bundled one above all: its cases would be overwritten in OUT) is refused too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from ..tensor import dtypes as D
from ..values.attrvalues import ATTRIBUTE_KINDS, parse_value
from ..values.fill import check_fits, parse_fill
from ..files.text import clip, show
from ..errors import UserError
from .base import ACL_FORMATS, FLOATS, PRODUCTS, AttrSpec, Contract, OpSpec, TensorSpec
from .families import Elementwise, Rows
from . import graphops
from .declfields import IDENT, FieldChecks, Refused

API_NAME = re.compile(r"aclnn[A-Za-z0-9_]{1,96}")  # the C function the harness calls
KEY = re.compile(r"[a-z][a-z0-9_]{0,63}")  # case ids and file names are made of it
PRODUCT = re.compile(r"[A-Za-z0-9_]{1,16}")
VARIANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # emulate --defect NAME
HEADER = re.compile(r"[A-Za-z0-9_./-]{1,200}\.h")  # #include "..." in the harness
MAX_DIMS = 8  # an aclTensor's rank
MESSAGE_LIMIT = 300  # a user module's or function's own message, in the one error line
ROLES = ("input", "output")
CAST_MODES = ("rint", "round")
CONTRACT_DTYPES = ("same", "promote")
SCALAR_DTYPES = (*FLOATS, "float64", "int32", "int64")  # what an aclScalar of the harness holds
BUNDLED_DIR = Path(__file__).resolve().parent


def is_bundled(file: str) -> bool:
    """Whether a declaration file is one of aclnn-cli's own ops (ops/<family>/<op>.py), not a user's module."""
    return bool(file) and Path(file).resolve().parent.parent == BUNDLED_DIR


class _Check(FieldChecks):
    """The checks of one declaration."""

    def run(self) -> None:
        s = self.spec
        self.text("name", s.name, API_NAME, "an aclnn API name (aclnn then letters, digits or _)")
        self.text("key", s.key, KEY, "a snake_case key (a-z, 0-9, _, from a letter, up to 64)")
        for field in ("summary", "formula", "special_values", "header"):
            self.text(field, getattr(s, field))
        if s.header and (not HEADER.fullmatch(s.header) or ".." in s.header):
            self.fail("header", f"expected a header path like aclnnop/aclnn_{s.key}.h, got {show(s.header)}")
        self.tensors(self.items("tensors", s.tensors))
        self.attributes(self.items("attributes", s.attributes))
        seen: set[str] = set()
        for field, name in [(f"tensors[{i}].name", t.name) for i, t in enumerate(s.tensors)] + \
                           [(f"attributes[{i}].name", a.name) for i, a in enumerate(s.attributes)]:
            if name in seen:  # (tensors and attributes share the mapping the op's functions receive)
                self.fail(field, f"'{name}' is declared twice (tensor and attribute names are one namespace)")
            seen.add(name)
        self.products(self.items("products", s.products, Mapping))
        dims = s.dims
        if not (isinstance(dims, tuple) and len(dims) == 2 and all(type(d) is int for d in dims)
                and 0 <= dims[0] <= dims[1] <= MAX_DIMS):
            self.fail("dims", f"expected (min, max) ranks with 0 <= min <= max <= {MAX_DIMS}, got {show(dims)}")
        self.flag("empty_ok", s.empty_ok)
        self.function("reference", s.reference, required=True)
        for field in ("exact", "exact_at", "reference_at", "edge_at", "golden_reference", "kernel", "ieee", "edge",
                      "textbook", "complex_formula"):
            self.function(field, getattr(s, field))
        share = s.reference_at_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            self.fail("reference_at_share", f"expected a number in (0, 1], got {show(share)}")
        if s.complex_formula is None and any(d in D.COMPLEXES for ds in dict(s.products).values() for d in ds):
            self.fail("complex_formula", "the products list a complex dtype: its goldens and emulated kernel are the "
                                         "op's complex_formula (exact on Dyadic values, in T on NumPy arrays)")
        if callable(s.complex_formula):
            self.error_bound(s)
        for dtype, mode in self.items("cast_mode", s.cast_mode, Mapping):
            self.choice("cast_mode", dtype, tuple(D.DTYPES))
            self.choice(f"cast_mode[{dtype}]", mode, CAST_MODES)
        self.contract(s.contract)
        self.family(s.family)
        self.function("case_values", s.case_values)
        self.function("case_dtypes", s.case_dtypes)
        self.signature(self.items("signature", s.signature))
        for name, fn in self.items("variants", s.variants, Mapping):
            self.text("variants", name, VARIANT, "a variant name (letters, digits, _ . -)")
            self.function(f"variants[{name}]", fn, required=True)
        for i, attrs in enumerate(self.items("oracle_attributes", s.oracle_attributes)):
            self.items(f"oracle_attributes[{i}]", attrs, Mapping)
        self.aliases(self.items("aliases", s.aliases, Mapping))
        self.derived(self.items("derived", s.derived, Mapping))
        self.names("redrawn", s.redrawn, tuple(t.name for t in s.tensors if t.role == "input"))
        if s.golden_reference is not None and s.family.element_local:
            self.fail("golden_reference", "only a family with blocks takes one (an Elementwise reference computes "
                                          "only what gen needs)")
        for name, graph in self.items("graph_ops", s.graph_ops, Mapping):
            self.graph_op(name, graph)

    def derived(self, items: tuple) -> None:
        """Input name -> the function deriving it from the other inputs' blocks: an input of a family with blocks,
        whose default fill is {derived: true}; and every such default fill has its function."""
        inputs = {t.name: t for t in self.spec.tensors if t.role == "input"}
        for name, fn in items:
            self.choice("derived", name, tuple(inputs))
            self.function(f"derived[{name}]", fn, required=True)
            if self.spec.family.element_local:
                self.fail(f"derived[{name}]", "a derived input needs a family with blocks (not Elementwise)")
        for name, t in inputs.items():
            fill = t.default_fill
            if isinstance(fill, Mapping) and "derived" in fill and name not in dict(items):
                self.fail("derived", f"{name}'s default fill is {{derived: true}} but derived has no function for it")

    def aliases(self, items: tuple) -> None:
        """Foreign name -> one of the op's tensors or attributes; never a spelling of one of its own names."""
        every = [t.name for t in self.spec.tensors] + [a.name for a in self.spec.attributes]
        for foreign, ours in items:
            self.text("aliases", foreign, IDENT, "a name (letters, digits, _)")
            if foreign.lower() in {n.lower() for n in every}:
                self.fail(f"aliases[{foreign}]", f"'{foreign}' already names a tensor or attribute of this op")
            self.choice(f"aliases[{foreign}]", ours, tuple(every))

    def tensors(self, tensors: tuple) -> None:
        for i, t in enumerate(tensors):
            field = f"tensors[{i}]"
            if not isinstance(t, TensorSpec):
                self.fail(field, f"expected a TensorSpec, got {show(t)}")
            self.text(f"{field}.name", t.name, IDENT, "an identifier")
            self.choice(f"{field}.role", t.role, ROLES)
            self.flag(f"{field}.read_by_kernel", t.read_by_kernel)
            self.flag(f"{field}.optional", t.optional)
            if not callable(t.default_fill):  # (a callable one is called per case, with the case's shapes)
                self._default_fill(f"{field}.default_fill", t.default_fill, [
                    d for d in self._dtypes_of(t) if t.integer_fill is None or not D.lookup(d).is_integer])
            if t.integer_fill is not None:
                self._default_fill(f"{field}.integer_fill", t.integer_fill,
                                   [d for d in self._dtypes_of(t) if D.lookup(d).is_integer])
            if not isinstance(t.formats, Mapping) or not all(
                    type(k) is int and 0 <= k <= 8 and v in ACL_FORMATS for k, v in t.formats.items()):
                self.fail(f"{field}.formats", f"expected {{dimensions 0-8: one of {', '.join(ACL_FORMATS)}}}, "
                                              f"got {show(t.formats)}")
            if t.dtypes is not None:
                self.names(f"{field}.dtypes", t.dtypes, tuple(D.DTYPES))
                if not t.dtypes or len(set(t.dtypes)) != len(t.dtypes):
                    self.fail(f"{field}.dtypes", f"expected distinct dtypes, at least one, got {show(t.dtypes)}")
        outputs = [t for t in tensors if t.role == "output"]
        many = not getattr(getattr(self.spec, "family", None), "element_local", True)  # (Rows: several outputs)
        if not outputs or (len(outputs) != 1 and not many) or len(outputs) == len(tensors):
            inputs = len(tensors) - len(outputs)
            self.fail("tensors", f"expected one or more inputs and exactly one output (several only in the rows family), got {inputs} inputs and "
                                 f"{len(outputs)} outputs")

    def attributes(self, attributes: tuple) -> None:
        for i, a in enumerate(attributes):
            field = f"attributes[{i}]"
            if not isinstance(a, AttrSpec):
                self.fail(field, f"expected an AttrSpec, got {show(a)}")
            self.text(f"{field}.name", a.name, IDENT, "an identifier")
            self.choice(f"{field}.kind", a.kind, ATTRIBUTE_KINDS)
            self.flag(f"{field}.optional", a.optional)
            self.choice(f"{field}.scalar_dtype", a.scalar_dtype, SCALAR_DTYPES)
            for j, choice in enumerate(self.items(f"{field}.choices", a.choices)):
                self.text(f"{field}.choices[{j}]", choice, re.compile(r"\S(.{0,62}\S)?"),
                          "a printable string without surrounding spaces, up to 64 characters")
            if a.choices and a.kind != "string":
                self.fail(f"{field}.choices", f"only a string attribute has choices (this one is a {a.kind})")
            if a.default is None:
                if a.optional:
                    self.fail(f"{field}.default", "an optional attribute needs the default the op uses for null")
                continue
            default = list(a.default) if a.kind in ("int_list", "bool_list") and isinstance(a.default, tuple) else a.default
            try:
                parse_value(a, default)
            except (ValueError, TypeError) as exc:
                self.fail(f"{field}.default", str(exc))

    def _default_fill(self, field: str, spec, dtypes: list[str]) -> None:
        """A default fill parses and fits every dtype it may be drawn in (else every case of that dtype is refused,
        one by one)."""
        try:
            fill = parse_fill(spec)
        except (ValueError, TypeError) as exc:
            self.fail(field, str(exc))
        for name in dtypes:
            problem = check_fits(fill, D.lookup(name))
            if problem:
                self.fail(field, f"{problem} (the tensor may be {name})")

    def _dtypes_of(self, t) -> list[str]:
        """The dtypes a tensor may take: its own list, else every dtype the op's products give."""
        if t.dtypes is not None:
            return [d for d in t.dtypes if d in D.DTYPES]
        products = self.spec.products if isinstance(self.spec.products, Mapping) else {}
        return sorted({d for dts in products.values() if isinstance(dts, (tuple, list)) for d in dts if d in D.DTYPES})

    def products(self, products: tuple) -> None:
        if not products:
            self.fail("products", "expected at least one product")
        for product, dtypes in products:
            self.text("products", product, PRODUCT, "a product name like A2 or 950")
            if product not in PRODUCTS:
                self.fail("products", f"unknown product {show(product)} (known: {', '.join(PRODUCTS)})")
            field = f"products[{product}]"
            self.names(field, dtypes, FLOATS + D.INTEGERS + D.COMPLEXES)  # (integers, complexes: their own standards)
            if not dtypes or len(set(dtypes)) != len(dtypes):
                self.fail(field, f"expected distinct dtypes, at least one, got {show(dtypes)}")

    def contract(self, c: Any) -> None:
        if not isinstance(c, Contract):
            self.fail("contract", f"expected a Contract, got {show(c)}")
        self.choice("contract.dtypes", c.dtypes, CONTRACT_DTYPES)
        products = tuple(p for p in self.spec.products)
        self.names("contract.broadcast_on", c.broadcast_on, products)
        self.names("contract.mixed_fp32_on", c.mixed_fp32_on, products)
        self.names("contract.also_accepts", c.also_accepts, tuple(D.DTYPES))
        self.flag("contract.out_is_promoted", c.out_is_promoted)
        self.flag("contract.checks_dims", c.checks_dims)
        self.function("contract.attribute_rule", c.attribute_rule)
        self.function("contract.shape_rule", c.shape_rule)
        self.function("contract.dtype_rule", c.dtype_rule)
        self.function("contract.dtype_attribute_rule", c.dtype_attribute_rule)
        self.function("contract.null_rule", c.null_rule)

    def family(self, f: Any) -> None:
        """Elementwise, Rows, Channels or Split; a Rows family's names are the op's tensors in the right role."""
        if not isinstance(f, (Elementwise, Rows)):
            self.fail("family", f"expected Elementwise(), Rows(...), Channels(...) or Split(...), got {show(f)}")
        ins = tuple(t.name for t in self.spec.inputs)
        if isinstance(f, Elementwise):
            if f.output_like is not None:
                self.choice("family.output_like", f.output_like, ins)
            return
        # (the other families' modules are read here, by the ops that have them: an elementwise op's run never
        # imports their classes)
        from .families import Channels, Classes, Contraction, Segments, Split, Window

        outs = tuple(t.name for t in self.spec.outputs)
        self.choice("family.driver", f.driver, ins)
        self.function("family.axes", f.axes, required=True)
        self.function("family.shapes", f.shapes)
        self.names("family.per_row", f.per_row, ins + outs)
        self.names("family.across_rows", f.across_rows, outs)
        if f.driver in f.per_row:
            self.fail("family.per_row", f"the driver {f.driver} is cut into rows; it cannot be per-row too")
        if type(f.kernel_chunk) is not int or not 0 <= f.kernel_chunk <= 1 << 24:
            self.fail("family.kernel_chunk", f"expected elements per kernel call, 0 to 2^24 (0: the pipeline's), got "
                                             f"{show(f.kernel_chunk)}")
        if f.kernel_chunk and f.across_rows:
            self.fail("family.kernel_chunk", "an across-rows output's partials are added chunk by chunk: its bits follow "
                                             "the pipeline's chunk, which kernel_chunk would change (leave it 0)")
        both = sorted(set(f.per_row) & set(f.across_rows))
        if both:
            self.fail("family.per_row", f"{both[0]} is summed across rows; it cannot be per-row too")
        if isinstance(f, Channels):
            self.names("family.bits_of", f.bits_of, ins + outs)
            self.names("family.whole", f.whole, ins)
            if set(f.whole) & {f.driver, *f.per_row}:
                self.fail("family.whole", "a tensor read whole is neither the driver nor per-channel")
        if isinstance(f, Classes):
            self.names("family.positions", f.positions, ins)
            self.names("family.whole", f.whole, ins)
            if set(f.positions + f.whole) & {f.driver, *f.per_row} or set(f.positions) & set(f.whole):
                self.fail("family.positions", "a per-position tensor or one read whole is neither the driver, per-row, "
                          "nor both")
        if isinstance(f, Split):
            self.names("family.halves", f.halves, ins)
            attrs = {a.name: a.kind for a in self.spec.attributes}
            if attrs.get(f.dim) != "int":
                self.fail("family.dim", f"expected the name of an int attribute (int64_t) to split at, got {show(f.dim)}")
            if f.driver in f.halves or set(f.halves) & set(f.per_row + f.across_rows):
                self.fail("family.halves", "a half is cut at dim; it cannot be the driver, per-row or summed across rows")
            if isinstance(f, Segments):
                self.names("family.segments", f.segments, outs)
                self.names("family.counts", (f.counts,), ins)
        if isinstance(f, Contraction):
            self.choice("family.right", f.right, tuple(n for n in ins if n != f.driver))
            self.choice("family.out", f.out, outs)
        if isinstance(f, Window):
            self.choice("family.grad", f.grad, tuple(n for n in ins if n != f.driver))
            kinds = {a.name: a.kind for a in self.spec.attributes}
            for field, kind in f.attribute_fields():
                name = getattr(f, field)
                if (name is not None or field == "kernel") and kinds.get(name) != kind:
                    self.fail(f"family.{field}", f"expected the name of a {kind} attribute, got {show(name)}")

    def signature(self, names: tuple) -> None:
        """Empty, or every tensor and attribute name once (the header's order)."""
        if not names:
            return
        every = [t.name for t in self.spec.tensors] + [a.name for a in self.spec.attributes]
        for i, name in enumerate(names):
            self.choice(f"signature[{i}]", name, tuple(every))
        missing = [n for n in every if n not in names]
        twice = sorted({n for n in names if names.count(n) > 1})
        if missing or twice:
            self.fail("signature", "expected every tensor and attribute name once; "
                                   + (f"missing {', '.join(missing)}" if missing else f"twice: {', '.join(twice)}"))

    def error_bound(self, s: OpSpec) -> None:
        """A complex output is judged against its formula's relative error bound (ops/complexparts.py): a formula
        without one (a sum of rounded values may cancel) could never be judged."""
        from .complexparts import NoRelativeBound, formula_gamma

        try:  # (with the attributes' defaults; a case's own values are traced when it is judged)
            formula_gamma(s.complex_formula, [t.name for t in s.inputs], {a.name: a.default for a in s.attributes}, 24)
        except NoRelativeBound as exc:
            self.fail("complex_formula", f"no relative error bound follows from it ({describe(exc, MESSAGE_LIMIT)}); "
                                         f"the complex standard judges against one: use +, - and * of the inputs "
                                         f"and real constants, adding or subtracting only unrounded values")
        except Exception:  # (the op's own code on placeholder values: what it says, gen and verify report per case)
            pass


def _aliases(spec: OpSpec) -> set[str]:
    """What find_op matches an op by: its name, the name without 'aclnn', its key (in any case)."""
    return {spec.name.lower(), spec.name.removeprefix("aclnn").lower(), spec.key.lower()}


def check(spec: Any, ops: Mapping[str, OpSpec], declared_in: Mapping[str, str], file: str) -> None:
    """Raise UserError (naming `file`, the op and the field) unless `spec` is a complete, new declaration."""
    label = clip(spec.name) if isinstance(getattr(spec, "name", None), str) else show(getattr(spec, "name", spec))
    try:
        if not isinstance(spec, OpSpec):
            raise Refused("register", f"expected an OpSpec, got {show(spec)}")
        _Check(spec).run()
        mine = _aliases(spec)
        for other in ops.values():
            if mine & _aliases(other):
                whose = "a bundled op" if is_bundled(declared_in.get(other.name, "")) \
                    else f"an op already registered ({clip(declared_in.get(other.name, ''), 80)})"
                field = "name" if other.name.lower() == spec.name.lower() else "key"
                raise Refused(field, f"{other.name} (key {other.key}) is {whose}: give this op another name and key")
        seen: set[str] = set()
        for name in spec.graph_ops:  # (two graph ops of this one op in one spelling: SiluGrad2, silu_grad2)
            if graphops.fold(name) in seen:
                raise Refused(f"graph_ops[{clip(name)}]", "another graph op of this op has this name in another spelling")
            seen.add(graphops.fold(name))
    except Refused as exc:
        field, message = exc.args
        raise UserError(f"op {label}: {field}: {message}", where=file) from None
    except Exception as exc:  # a hostile object (a Mapping whose items() raise...): still one line
        raise UserError(f"op {label}: the declaration cannot be read: {describe(exc, 120)}", where=file) from None


def describe(exc: BaseException, limit: int) -> str:
    """'Type: message' of an exception from user code, one line, clipped (even if its str() raises)."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:
        text = f"{type(exc).__name__} (its message cannot be printed)"
    return clip(text, limit)

