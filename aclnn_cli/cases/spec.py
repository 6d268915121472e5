"""One raw case of a case file (defaults merged), type-checked and parsed into the pieces that
loader.py expands into `Case` objects (case.py builds each). Every problem is a CaseError naming file, case and key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from ..tensor import dtypes as D
from ..tensor.status import BY_NAME
from .attributes import case_combos
from ..errors import CaseError
from ..values.fill import MAX_SEED, Fill, parse_fill, parse_number
from ..ops import OpSpec
from ..standards.rules import DEFAULT_STANDARD, find_standard
from ..standards.tolerances import ToleranceError
from ..files.text import as_list, clip, is_int, key_path, show, unknown_key

CASE_KEYS = ("name", "dtype", "shape", "product", "seed", "inputs", "tensors", "attributes", "expect_status",
             "standard", "tolerance", "contract", "fill")
EXACT_STANDARD = "bitwise"  # what `fill: exact` is judged by: its sums are exact in any order
TENSOR_KEYS = ("shape", "dtype", "layout", "nullptr")
TOP_KEYS = ("op", "defaults", "cases")
DEFAULT_PRODUCT = "A2"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
# A case id is a directory name, and gen also makes `.<id>.partial-<pid>` / `.<id>.old-<pid>` next to it:
# 200 bytes leaves room for those within the usual 255-byte limit on a file name.
MAX_ID_BYTES = 200
MAX_CASES = 20_000  # per file: far beyond any real suite, and it stops a few lists multiplying into millions


def is_single_shape(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(v, list) for v in value)


@dataclass(frozen=True)
class ByKind:
    """An op's default fill that depends on the case's dtype (TensorSpec.integer_fill): resolved per case, when the
    dtype is known (case.fill_for)."""

    floats: Fill
    integers: Fill

    @property
    def kind(self) -> str:
        return self.floats.kind

    def pick(self, dtype: D.DType | None) -> Fill:
        return self.integers if dtype is not None and dtype.is_integer else self.floats


class Spec:
    """One raw case (defaults merged), parsed into the pieces expansion combines.

    Everything a user wrote is type-checked here, before any expansion, so a wrong type is one
    clear error and never an exception from deeper code.
    """

    def __init__(self, where: str, op: OpSpec, defaults: dict, raw: Any, index: int) -> None:
        if not isinstance(raw, dict):
            raise CaseError(where, f"case #{index + 1} must be a mapping, got {show(raw)}")
        name = raw.get("name")
        label = clip(name) if isinstance(name, str) else f"#{index + 1}" if name is None else show(name)
        for key in raw:
            if key not in CASE_KEYS:
                raise CaseError(where, unknown_key(key, CASE_KEYS), case=label, key=key_path(key))
        if not isinstance(name, str) or not NAME_RE.fullmatch(name) or ".." in name:
            quote = f" (a number: quote it, name: '{name}')" if isinstance(name, (int, float)) else ""
            raise CaseError(where, "needs a name that starts with a letter or digit, then letters, digits, '_', '-' "
                                   f"or '.' (at most 100, no '..'){quote}", case=label, key="name")
        self.where, self.op, self.name = where, op, name
        self.raw = {**defaults, **raw}
        self.fills = self._fills()
        self.attribute_combos = case_combos(op, self._mapping("attributes", "attribute names to values"), self.err)
        self.overrides = self._overrides()
        self.products = self._products()
        self.shapes = self._shapes()
        self.dtypes = [self.dtype(d) for d in self._list("dtype", self.raw["dtype"])] if "dtype" in self.raw else None
        seed = self.raw.get("seed", 0)
        if not is_int(seed) or not 0 <= seed <= MAX_SEED:
            raise self.err(f"seed must be an integer in [0, 2^63), got {show(seed)}", "seed")
        self.seed = seed
        self.status = _status(self.raw.get("expect_status", 0), self.err)
        self.standard = self.raw.get("standard")
        if self.standard is not None and not isinstance(self.standard, str):
            raise self.err(f"'standard' is a name like {DEFAULT_STANDARD}, got {show(self.standard)}", "standard")
        self.exact = self._exact_fill()
        try:
            self.std = find_standard(DEFAULT_STANDARD if self.standard is None else clip(self.standard))
        except KeyError as exc:
            raise self.err(exc.args[0], "standard") from None
        self.tolerance = self._tolerance()
        self.contract = self.raw.get("contract", False)
        if not isinstance(self.contract, bool):
            raise self.err(f"'contract' is true or false, got {show(self.contract)}", "contract")
        if self.contract and "expect_status" in raw:
            raise self.err("'contract: true' makes its own statuses; drop expect_status", "expect_status")

    def err(self, msg: str, key: str) -> CaseError:
        return CaseError(self.where, msg, case=self.name, key=key)

    def _exact_fill(self) -> bool:
        """`fill: exact` (the family chooses the operands: ops/families/exact.py) is judged bit for bit; `random`,
        the default, leaves the inputs to their generators."""
        mode = self.raw.get("fill", "random")
        if mode not in ("random", "exact"):
            raise self.err(f"'fill' is exact or random, got {show(mode)}", "fill")
        if mode == "random":
            return False
        if self.standard not in (None, EXACT_STANDARD):
            raise self.err(f"'fill: exact' is judged bit for bit (standard {EXACT_STANDARD}); drop standard "
                           f"{show(self.standard)}", "standard")
        self.standard = EXACT_STANDARD
        return True

    def _mapping(self, key: str, what: str) -> dict:
        """A mapping-valued key; left out or null is empty, anything else (even [] or 0) is an error."""
        value = self.raw.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.err(f"'{key}' must map {what}, got {show(value)}", key)
        return value

    def _list(self, key: str, value: Any, is_single=lambda v: False) -> list:
        """The alternatives a key expands over; an empty list would silently make no cases."""
        values = as_list(value, is_single)
        if not values:
            raise self.err(f"'{key.rsplit('.', 1)[-1]}' is an empty list, which expands to no cases", key)
        return values

    def _fills(self) -> dict[str, Fill | Callable]:
        """Each input's fill; an op's callable default_fill stays a callable, resolved per case (case.fill_for)."""
        inputs = self._mapping("inputs", "input names to generators")
        self.given_inputs = frozenset(inputs)
        names = tuple(t.name for t in self.op.inputs)
        for key in inputs:
            if key not in names:
                raise self.err(unknown_key(key, names), f"inputs.{key_path(key)}")
        fills = {}
        for t in self.op.inputs:
            if t.name not in inputs and callable(t.default_fill):
                fills[t.name] = t.default_fill
                continue
            try:
                if t.name not in inputs and t.integer_fill is not None:
                    fills[t.name] = ByKind(parse_fill(t.default_fill), parse_fill(t.integer_fill))
                    continue
                fills[t.name] = parse_fill(inputs.get(t.name, t.default_fill))
            except ValueError as exc:
                raise self.err(str(exc), f"inputs.{t.name}") from None
        return fills

    def _overrides(self) -> dict[str, dict]:
        """Per-tensor keys, checked; shapes become tuples and dtypes lists of DType (new dicts: the raw
        ones may be shared with other cases through defaults or YAML aliases)."""
        tensors = self._mapping("tensors", "tensor names to {shape, dtype, layout, nullptr}")
        names = tuple(t.name for t in self.op.tensors)
        out = {}
        for n, spec in tensors.items():
            if n not in names:
                raise self.err(unknown_key(n, names), f"tensors.{key_path(n)}")
            if not isinstance(spec, dict):
                raise self.err(f"must be a mapping of shape, dtype, layout, nullptr, got {show(spec)}", f"tensors.{n}")
            for k in spec:
                if k is None:
                    raise self.err("YAML reads 'null:' as an empty key; write 'nullptr: true'", f"tensors.{n}")
                if k not in TENSOR_KEYS:
                    raise self.err(unknown_key(k, TENSOR_KEYS), f"tensors.{n}.{key_path(k)}")
            o = dict(spec)
            if "shape" in o:
                o["shape"] = self._one_shape(o["shape"], f"tensors.{n}.shape")
            if "dtype" in o:
                key = f"tensors.{n}.dtype"
                o["dtype"] = [self.dtype(d, key) for d in self._list(key, o["dtype"])]
            if not isinstance(o.get("nullptr", False), bool):
                raise self.err(f"'nullptr' is true or false, got {show(o['nullptr'])}", f"tensors.{n}.nullptr")
            out[n] = o
        return out

    def _products(self) -> list[str]:
        out = []
        for p in self._list("product", self.raw.get("product", DEFAULT_PRODUCT)):
            if not isinstance(p, str) and not (is_int(p) and 0 <= p < 10**6):
                raise self.err(f"a product is a name like A2 or \"950\", got {show(p)}", "product")
            p = clip(str(p))
            if p not in self.op.products:
                raise self.err(f"{self.op.name} is not supported on product '{p}' "
                               f"(supported: {', '.join(self.op.products)})", "product")
            out.append(p)
        return out

    def _one_shape(self, s: Any, key: str) -> tuple[int, ...]:
        if is_int(s):
            s = [s]
        if not isinstance(s, list) or not all(is_int(d) for d in s):
            raise self.err(f"a shape is a list of integers, got {show(s)}", key)
        if any(d < 0 for d in s):
            raise self.err(f"negative dimension in shape {show(s)}", key)
        if any(d > 2**64 for d in s):  # beyond any int64; larger ones are refused with their byte size later
            raise self.err(f"dimension over 2^64 in shape {show(s)}", key)
        return tuple(s)

    def _shapes(self) -> list[tuple[int, ...] | None]:
        if "shape" not in self.raw:
            if any(getattr(f, "kind", "") == "all_values" for f in self.fills.values()):
                return [None]  # every bit pattern: the shape follows from the dtype
            raise self.err("missing 'shape' (only an all_values input makes it optional)", "shape")
        return [self._one_shape(s, "shape") for s in self._list("shape", self.raw["shape"], is_single_shape)]

    def _tolerance(self) -> tuple[tuple[str, float], ...]:
        """Overrides, checked against float32 here (its keys and ranges include every dtype's); each
        positive case checks them again against its own tolerance dtype in `_check_tolerance`."""
        tol = self._mapping("tolerance", "parameter names to numbers, e.g. {rtol: 0.001}")
        items, canonical = [], {}
        for k, v in tol.items():
            if not isinstance(k, str):
                raise self.err(f"a tolerance name is text like rtol, got {show(k)}", "tolerance")
            key, name = f"tolerance.{key_path(k)}", clip(k)
            try:
                x = parse_number(v)
                self.std.check_key(name, x, D.FLOAT32)
            except (KeyError, ValueError) as exc:
                raise self.err(exc.args[0], key) from None
            first = canonical.setdefault((self.std.aliases or {}).get(name, name), name)
            if first != name:
                raise self.err(f"'{name}' and '{first}' set the same tolerance of standard '{self.std.name}'", key)
            items.append((name, x))
        try:
            self.std.params(D.FLOAT32, dict(items))  # the keys together (joint bounds, e.g. mere-mare's mare*T)
        except ToleranceError as exc:
            raise self.err(exc.args[0], f"tolerance.{key_path(exc.key)}") from None
        return tuple(items)

    def dtype(self, name: Any, key: str = "dtype") -> D.DType:
        if not isinstance(name, str):
            raise self.err(f"a dtype is a name like float16, got {show(name)}", key)
        try:
            return D.lookup(clip(name))
        except KeyError as exc:
            raise self.err(exc.args[0], key) from None


def _status(value: Any, err) -> int:
    if is_int(value) and value in BY_NAME.values():
        return value
    if isinstance(value, str):
        key = value.strip().upper()
        for name, code in BY_NAME.items():
            if key in (name, name.removeprefix("ACLNN_"), str(code)):
                return code
    raise err(f"unknown status {show(value)} (valid: {', '.join(f'{k} ({v})' for k, v in BY_NAME.items())})", "expect_status")
