"""case.json: the contract between aclnn-cli and a device harness (see docs/harness.md, "The manifest").

Written by gen; read back by emulate and verify, which trust nothing in it
without checking.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING
from pathlib import Path

from .. import __version__
from ..files import jsonsafe
from ..tensor import dtypes as D
from ..cases.attributes import Combo, from_manifest, to_manifest, values as attribute_values, with_case_values
from ..tensor.status import NAMES as STATUS_NAMES
from ..values.fill import MAX_SEED
from ..files.text import clip
from ..errors import UserError
from .manifest_text import canonical_json, sealed_json
from ..files.lazy import cached_attribute
from .dirs import MANIFEST, join
from ..files.jsonsafe import JsonRefused
from ..tensor.layout import Layout
from ..files.regular import TooLarge, read_regular
from ..ops import OpSpec, find_op
from ..ops.base import ACL_FORMATS
from ..ops.contract import TensorDesc, check

if TYPE_CHECKING:  # (gen's type only: verify need not import the case-file loader)
    from ..cases.case import Case

SCHEMA = "aclnn-cli/case/1"
STATUS_FILE = "status.txt"


def input_file(name: str) -> str:
    return f"{name}.bin"


def golden_file(name: str) -> str:
    return f"{name}.golden.bin"


def dump_file(name: str) -> str:
    return f"{name}.dump.bin"


def allowance_file(name: str) -> str:
    """An across-rows output's allowance (float64 per element, ops/accumulation.py), written by gen for verify."""
    return f"{name}.allowance.bin"


# The manifest keys that decide how files are read and judged; `digest` covers them, so a manifest
# edited after gen (a shape, a stride, a checksum) is refused instead of misjudging its files.
DIGEST_KEYS = ("case_id", "op", "product", "seed", "expect_status", "standard", "tolerance", "tensors")


def digest(raw: dict) -> str:
    covered = {k: raw.get(k) for k in DIGEST_KEYS}
    if "attributes" in raw:  # an op's attribute values decide its results too
        covered["attributes"] = raw["attributes"]
    return hashlib.sha256(canonical_json(covered).encode()).hexdigest()


def build(case: Case, digests: dict[str, str], exact_fallbacks: int, fp: str, extra: dict | None = None,
          uncertified: int = 0) -> dict:
    """The manifest of a generated case; extra: more keys for a tensor's entry, by tensor name. exact_fallbacks:
    the golden elements that took the exact path; uncertified: those left the float64 value rounded once."""
    tensors = []
    formats = {spec.name: spec.formats for spec in case.op.tensors}
    for t in case.tensors:
        if t.null:  # the harness passes nullptr; dtype and shape say what the tensor would have been
            tensors.append({"name": t.name, "role": t.role, "null": True, "dtype": t.dtype.name,
                            "shape": list(t.layout.shape)})
            continue
        fmt = formats.get(t.name, {}).get(len(t.layout.shape), "ND")
        entry = {
            "name": t.name, "role": t.role, "dtype": t.dtype.name, "acl_dtype": t.dtype.acl_id,
            "acl_dtype_name": t.dtype.acl_name, "format": fmt, "acl_format": ACL_FORMATS[fmt],
            **t.layout.to_json(), "file": input_file(t.name), "sha256": digests[input_file(t.name)],
        }
        if t.role == "input":
            entry["fill"] = t.fill.describe()
        elif case.expect_status == 0:
            entry.update(golden=golden_file(t.name), golden_sha256=digests[golden_file(t.name)],
                         dump=dump_file(t.name))
            if allowance_file(t.name) in digests:
                entry.update(allowance=allowance_file(t.name), allowance_sha256=digests[allowance_file(t.name)])
            entry.update((extra or {}).get(t.name, {}))
        tensors.append(entry)
    data = {
        "schema": SCHEMA, "tool_version": __version__, "fingerprint": fp,
        "case_id": case.case_id, "name": case.name,
        "source": case.source, "op": case.op.name, "product": case.product, "seed": case.seed,
        "expect_status": case.expect_status, "expect_status_name": STATUS_NAMES[case.expect_status],
        "expect_rule": case.expect_rule,
        "status_file": STATUS_FILE, "standard": case.standard, "tolerance": dict(case.tolerance),
        **({"attributes": to_manifest(case.op, case.attributes)} if case.op.attributes else {}), "tensors": tensors,
        "golden": _golden_method(case.op.certified, exact_fallbacks, uncertified),
        **({"shard": case.shard} if getattr(case, "shard", "") else {}),
    }
    data["digest"] = digest(data)
    return data


def _golden_method(certified: bool, fallbacks: int, uncertified: int = 0) -> dict:
    """How the goldens were made. An op without `exact` had its uncertain elements computed through its
    reference on Fractions (golden/rational.py); where it was not rational they are the float64 value rounded
    once, and `uncertified_elements` says how many (verify shows it) beside those that took the exact path."""
    if certified and not uncertified:
        return {"method": "float64, certified rounding to the output dtype, exact fallback",
                "exact_fallback_elements": fallbacks}
    if uncertified:
        return {"method": "float64, rounded once, not certified", "exact_fallback_elements": fallbacks,
                "uncertified_elements": uncertified}
    return {"method": "float64, certified rounding to the output dtype, exact through the reference on Fractions",
            "exact_fallback_elements": fallbacks}


@dataclass(frozen=True, init=False)  # (its own __init__, below: the dataclass's is not even compiled)
class TensorEntry:
    """One tensor of a generated case as case.json records it: its files, dtype, view and checksums."""

    name: str
    role: str
    dtype: D.DType
    layout: Layout
    file_path: str | None  # the storage file's path as text; None: a null tensor
    golden_path: str | None
    dump_path: str | None
    allowance_path: str | None = None  # an across-rows output's allowance (allowance_file), else None

    def __init__(self, name: str, role: str, dtype: D.DType, layout: Layout, file_path: str | None,
                 golden_path: str | None, dump_path: str | None, allowance_path: str | None = None) -> None:
        # (the dataclass's own __init__ sets a frozen field at a time through object.__setattr__: thousands of
        # small cases make three entries each)
        self.__dict__.update(name=name, role=role, dtype=dtype, layout=layout, file_path=file_path,
                             golden_path=golden_path, dump_path=dump_path, allowance_path=allowance_path)

    # The same paths as Path objects, made on first use (thousands of small cases need only the text).
    @cached_attribute
    def file(self) -> Path | None:
        return None if self.file_path is None else Path(self.file_path)

    @cached_attribute
    def golden(self) -> Path | None:
        return None if self.golden_path is None else Path(self.golden_path)

    @cached_attribute
    def dump(self) -> Path | None:
        return None if self.dump_path is None else Path(self.dump_path)

    @property
    def null(self) -> bool:
        return self.file_path is None


@dataclass(frozen=True, init=False)  # (its own __init__, as TensorEntry's)
class CaseManifest:
    """A generated case as case.json records it, checked when loaded: what run, emulate and verify read."""

    dir: Path
    case_id: str
    op: OpSpec
    product: str
    seed: int
    expect_status: int
    standard: str | None
    tensors: tuple[TensorEntry, ...]
    raw: dict
    attributes: Combo = ()  # (name, value) per attribute of the op; None: a null pointer

    def __init__(self, dir: Path, case_id: str, op: OpSpec, product: str, seed: int, expect_status: int,
                 standard: str | None, tensors: tuple[TensorEntry, ...], raw: dict, attributes: Combo = ()) -> None:
        self.__dict__.update(dir=dir, case_id=case_id, op=op, product=product, seed=seed, expect_status=expect_status,
                             standard=standard, tensors=tensors, raw=raw, attributes=attributes)  # (as TensorEntry's)

    def __getstate__(self) -> dict:
        """Pickled without the memos others keep on it (keys "_memo_...": process-local, not always picklable)."""
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_memo_")}

    @property
    def attribute_values(self) -> dict:
        """What the op's functions receive: the attributes, defaults where a null pointer was passed, and the
        op's case_values (from the shapes)."""
        return with_case_values(self.op, attribute_values(self.op, self.attributes), self.tensors)

    @property
    def uncertified_elements(self) -> int:
        """How many golden elements gen could not certify (golden.uncertified_elements; 0 if none)."""
        golden = self.raw.get("golden")
        n = golden.get("uncertified_elements", 0) if isinstance(golden, dict) else 0
        return n if type(n) is int and n > 0 else 0

    @cached_attribute
    def geometry(self):
        """The family's blocks of this case (ops/families/), None for an elementwise op; made once, on first read.
        KeyError, ValueError, TypeError or IndexError where its shapes and attributes cannot be cut (not cached)."""
        family = self.op.family
        if family.element_local:
            return None
        return family.geometry({t.name: tuple(t.layout.shape) for t in self.tensors}, self.attribute_values)

    @cached_attribute
    def inputs(self) -> tuple[TensorEntry, ...]:
        return tuple(t for t in self.tensors if t.role == "input")

    @cached_attribute
    def output(self) -> TensorEntry:
        """The first output (the only one of most ops)."""
        return next(t for t in self.tensors if t.role == "output")

    @cached_attribute
    def judged(self) -> tuple[TensorEntry, ...]:
        """The outputs verify judges: every non-null output (an output switched off is not written)."""
        return tuple(t for t in self.tensors if t.role == "output" and not t.null)

    @cached_attribute
    def _raw_tensors(self) -> dict[str, dict]:
        return {t.get("name"): t for t in reversed(self.raw["tensors"])}  # (reversed: the first of a name wins)

    def recorded_sha256(self, name: str, key: str = "sha256") -> str:
        """The checksum gen recorded for a tensor's storage ("sha256") or golden ("golden_sha256")."""
        value = self._raw_tensors[name].get(key)
        if not isinstance(value, str):
            raise UserError(f"malformed manifest: tensor {name} has no '{key}'", where=str(self.dir / MANIFEST))
        return value

    def phase_one(self):
        """The status the API's phase one returns for these tensors (the contract's verdict)."""
        descs = {t.name: TensorDesc(t.dtype, t.layout.shape, t.null) for t in self.tensors}
        return check(self.op, self.product, descs, dict(self.attributes))


def load(case_dir: Path) -> CaseManifest:
    """Read and check one case directory's manifest; UserError names the file, the field and the problem.

    Only a regular file of at most MAX_MANIFEST_BYTES is read (a FIFO there would block the run), as
    strict JSON under jsonsafe's limits; every field the tool uses is checked for its type, so a
    manifest re-signed by hand (its digest recomputed) is one line, never a traceback.
    """
    text_dir = str(case_dir)

    def where() -> str:  # the Path is made only for an error message
        return str(case_dir / MANIFEST)

    try:
        data = read_regular(join(text_dir, MANIFEST), MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        raise UserError("no case.json here (run 'aclnn-cli gen' first)", where=text_dir) from None
    except TooLarge as exc:
        raise UserError(f"manifest is {exc.size} bytes; gen writes a few KB", where=where()) from None
    except OSError as exc:
        raise UserError(f"unreadable manifest: {exc.strerror}", where=where()) from None
    raw = sealed_json(data)  # (gen's own text, byte for byte: its digest holds)
    sealed = raw is not None
    try:
        if not sealed:
            raw = jsonsafe.loads(jsonsafe.decode_utf8(data), number_tokens=False)  # (_checked checks each number used)
    except JsonRefused as exc:
        raise UserError(f"unreadable manifest: {exc}", where=where()) from None
    try:
        return _checked(case_dir, text_dir, raw, sealed)
    except KeyError as exc:
        raise UserError(f"malformed manifest: missing {_brief(exc.args[0])}", where=where()) from None
    except (TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
        raise UserError(f"malformed manifest: {_brief(exc, 240)}", where=where()) from None


def _checked(case_dir: Path, text_dir: str, raw, sealed: bool = False) -> CaseManifest:
    """The manifest's fields, each checked for its type (ValueError/KeyError name the field).

    Keys the tool does not use are let through: a newer gen may add optional ones.
    sealed: the text is gen's, byte for byte (its seal holds), so the digest gen recorded in it holds too.
    """
    if not isinstance(raw, dict):
        raise ValueError("a manifest is a JSON object")
    if raw.get("schema") != SCHEMA:
        raise ValueError(f"schema is {_brief(raw.get('schema'))}, this tool reads {SCHEMA!r}")
    if not isinstance(raw.get("tensors"), list) or not all(isinstance(t, dict) for t in raw["tensors"]):
        raise ValueError("'tensors' must be a list of objects")
    if not sealed and raw.get("digest") != digest(raw):
        raise ValueError("it was edited after gen (its tensors, op or case no longer match the digest gen "
                         "recorded); run 'aclnn-cli gen' again")
    if raw.get("case_id") != case_dir.name:
        raise ValueError(f"its case_id {_brief(raw.get('case_id'))} is not this directory's name "
                         f"(a copied or renamed case directory?)")
    product, seed, expect = raw["product"], raw["seed"], raw["expect_status"]
    if type(seed) is not int or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"'seed' must be an integer from 0 to 2**63-1, got {_brief(seed)}")
    if type(product) is not str:
        raise ValueError(f"'product' must be a string, got {_brief(product)}")
    if type(expect) is not int or expect not in STATUS_NAMES:
        raise ValueError(f"'expect_status' must be one of aclnn's statuses, got {_brief(expect)}")
    if raw.get("standard") is not None and not isinstance(raw["standard"], str):
        raise ValueError(f"'standard' must be a name, got {_brief(raw['standard'])}")
    tolerance = raw.get("tolerance") or {}
    if not isinstance(tolerance, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                  for v in tolerance.values()):
        raise ValueError(f"'tolerance' must map names to numbers, got {_brief(tolerance)}")
    op = _known(find_op, raw["op"])
    tensors = tuple(_tensor(text_dir, t, i, expect == 0) for i, t in enumerate(raw["tensors"], 1))
    if [t.name for t in tensors] != [t.name for t in op.tensors]:
        raise ValueError(f"tensors {_brief([t.name for t in tensors])} do not match {op.name}")
    for t, spec in zip(tensors, op.tensors):
        if t.role != spec.role:
            raise ValueError(f"tensor {t.name}: 'role' must be {spec.role!r}, got {_brief(t.role)}")
    attrs = from_manifest(op, raw.get("attributes")) if op.attributes or "attributes" in raw else ()
    return CaseManifest(case_dir, raw["case_id"], op, product, seed, expect, raw.get("standard"), tensors, raw,
                        attrs)


MAX_MANIFEST_BYTES = 1 << 20


def _brief(value, limit: int = 120) -> str:
    """A value or an exception's message for the one error line: control characters escaped (a dtype of "\\n"
    read from a manifest is named, not printed), at most `limit` characters."""
    return clip(str(value) if isinstance(value, Exception) else repr(value), limit)


def _local(case_dir: str, name, what: str) -> str:
    if not isinstance(name, str) or "/" in name or "\\" in name or "\0" in name or name in ("", ".", ".."):
        raise ValueError(f"{what} must be a file name, got {_brief(name)} (a plain name in the case directory)")
    return join(case_dir, name)


def _known(lookup, name):
    """A registry lookup whose KeyError (unknown name) is a malformed value, not a missing key."""
    if not isinstance(name, str):
        raise ValueError(f"expected a name, got {_brief(name)}")
    try:
        return lookup(name)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None


def _int(v, what: str) -> int:
    if type(v) is not int or abs(v) > 2**62:
        raise ValueError(f"{what} must be an integer, got {_brief(v)}")
    return v


_INTS_ONLY = {int}


def _ints(v, what: str) -> tuple[int, ...]:
    if type(v) is list and len(v) <= 64 and (not v or set(map(type, v)) == _INTS_ONLY and -2**62 <= min(v)
                                             and max(v) <= 2**62):  # (the common case at once; else each for its message)
        return tuple(v)
    if not isinstance(v, list) or len(v) > 64:
        raise ValueError(f"{what} must be a list of at most 64 integers, got {_brief(v)}")
    return tuple(_int(x, f"{what} item") for x in v)


@lru_cache(maxsize=4096)
def _layout(shape: tuple, strides: tuple, offset: int, storage: int) -> tuple[Layout, str | None]:
    """A checked Layout; thousands of small cases share a handful, so each is built and checked once."""
    layout = Layout(shape, strides, offset, storage)
    return layout, layout.check()


def _tensor(case_dir: str, t: dict, index: int, precision: bool) -> TensorEntry:
    """One entry of 'tensors' (the index-th), its fields checked; a problem is prefixed with its name.
    precision: its case compares a dump, so a non-null output names its golden and dump."""
    name = t["name"]
    if not isinstance(name, str):
        raise ValueError(f"tensor #{index}: 'name' must be a string, got {_brief(name)}")
    try:
        return _tensor_fields(case_dir, t, name, precision)
    except KeyError as exc:
        raise ValueError(f"tensor {clip(name, 40)}: missing {_brief(exc.args[0])}") from None
    except ValueError as exc:
        raise ValueError(f"tensor {clip(name, 40)}: {exc}") from None


def _tensor_fields(case_dir: str, t: dict, name: str, precision: bool) -> TensorEntry:
    role, dtype, null = t["role"], _known(D.lookup, t["dtype"]), t.get("null", False)
    if type(role) is not str:
        raise ValueError(f"'role' must be a string, got {_brief(role)}")
    if type(null) is not bool:
        raise ValueError(f"'null' must be true or false, got {_brief(null)}")
    fill = t.get("fill", {})  # (mistrust reads an input's constant or values)
    if type(fill) is not dict or type(fill.get("values", [])) is not list:
        raise ValueError(f"'fill' must be an object as gen writes it, got {_brief(fill)}")
    if null:
        return TensorEntry(name, role, dtype, Layout.contiguous(_ints(t["shape"], "'shape'")), None, None, None)
    storage = t["storage_shape"]
    if type(storage) is not list or len(storage) != 1:
        raise ValueError(f"'storage_shape' must be [elements], got {_brief(storage)}")
    layout, problem = _layout(_ints(t["shape"], "'shape'"), _ints(t["strides"], "'strides'"),
                              _int(t["offset"], "'offset'"), _int(storage[0], "'storage_shape'"))
    if problem:
        raise ValueError(problem)
    judged = precision and role == "output"  # (its golden and dump must be named)
    golden = _local(case_dir, t["golden"], "'golden'") if judged or "golden" in t else None
    dump = _local(case_dir, t["dump"], "'dump'") if judged or "dump" in t else None
    allowance = _local(case_dir, t["allowance"], "'allowance'") if "allowance" in t else None
    return TensorEntry(name, role, dtype, layout, _local(case_dir, t["file"], "'file'"), golden, dump, allowance)


def load_all(case_dirs: list[Path]) -> tuple[list[CaseManifest], list[tuple[Path, UserError]]]:
    """Every manifest that loads, and (directory, error) for each that does not: one bad case
    must not stop the others from being judged."""
    good, bad = [], []
    for d in case_dirs:
        try:
            good.append(load(d))
        except UserError as exc:
            bad.append((d, exc))
    return good, bad
