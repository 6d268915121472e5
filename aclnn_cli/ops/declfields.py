"""The field-by-field checks a declaration is read with (declcheck.py's `_Check` builds on them), and the checks
of the graph ops an op declares: the TTK names that stand for it, whose tensors and attributes must be the op's."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..files.text import clip, show
from .base import OpSpec
from . import graphops

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")  # tensors and attributes: case-file keys


class Refused(Exception):
    """One field of a declaration is wrong: (field, message)."""


@dataclass(frozen=True)
class FieldChecks:
    """A declaration's fields checked one at a time; `fail` names the field."""

    spec: OpSpec

    @staticmethod
    def fail(field: str, message: str) -> None:
        raise Refused(field, message)

    def text(self, field: str, value: Any, pattern: re.Pattern | None = None, what: str = "") -> str:
        if not isinstance(value, str):
            self.fail(field, f"expected a string, got {show(value)}")
        if pattern is not None and not pattern.fullmatch(value):
            self.fail(field, f"expected {what}, got {show(value)}")
        return value

    def flag(self, field: str, value: Any) -> None:
        if not isinstance(value, bool):
            self.fail(field, f"expected True or False, got {show(value)}")

    def function(self, field: str, value: Any, required: bool = False) -> None:
        if (value is not None or required) and not callable(value):
            self.fail(field, f"expected a function{'' if required else ' or None'}, got {show(value)}")

    def items(self, field: str, value: Any, kind: type = tuple) -> tuple:
        if not isinstance(value, kind):
            self.fail(field, f"expected a {kind.__name__}, got {show(value)}")
        return tuple(value.items()) if kind is Mapping else value

    def choice(self, field: str, value: Any, allowed: tuple[str, ...]) -> None:
        if not isinstance(value, str) or value not in allowed:
            self.fail(field, f"expected one of {', '.join(allowed)}, got {show(value)}")

    def names(self, field: str, value: Any, allowed: tuple[str, ...]) -> None:
        for i, name in enumerate(self.items(field, value)):
            self.choice(f"{field}[{i}]", name, allowed)

    def graph_op(self, name: Any, g: Any) -> None:
        """A graph op of this API: a new name, and tensors and attributes that are the op's."""
        s, field = self.spec, f"graph_ops[{clip(name) if isinstance(name, str) else show(name)}]"
        self.text("graph_ops", name, IDENT, "a graph op name (letters, digits, _)")
        taken = graphops.holder(name)
        if taken is not None:
            from .registry import BUNDLED  # (registry imports this module: not at its top)

            bundled = taken in graphops.BUNDLED_GRAPH_OPS or graphops.GRAPH_OPS[taken].api in BUNDLED
            whose = "a bundled graph op" if bundled else "already a user op's graph op"
            self.fail(field, f"{taken} ({graphops.GRAPH_OPS[taken].api}) is {whose}: give this one another name")
        if not isinstance(g, graphops.GraphOp):
            self.fail(field, f"expected a GraphOp (from aclnn_cli.ops.graphops import GraphOp), got {show(g)}")
        if g.api != s.name:
            self.fail(f"{field}.api", f"expected this op's name {s.name}, got {show(g.api)}")
        ins, outs = [t.name for t in s.inputs], [t.name for t in s.outputs]
        attrs = {a.name: a.kind for a in s.attributes}
        for part in ("inputs", "outputs", "to_inputs", "to_outputs"):
            names = self.items(f"{field}.{part}", getattr(g, part))
            for i, n in enumerate(names):
                if not (n is None and part in ("to_inputs", "to_outputs")):
                    self.text(f"{field}.{part}[{i}]", n, IDENT, "a tensor name")
        if not g.inputs:
            self.fail(f"{field}.inputs", "expected the graph op's input names, in order")
        for part, mine, theirs in (("to_inputs", g.inputs, ins), ("to_outputs", g.outputs, outs)):
            mapped = getattr(g, part)
            for i, n in enumerate(mapped):
                if n is not None and n not in theirs:
                    self.fail(f"{field}.{part}[{i}]", f"{s.name} has no {part[3:-1]} '{n}' ({', '.join(theirs)})")
            if mapped and mine and len(mapped) != len(mine):
                self.fail(f"{field}.{part}", f"expected one name per graph {part[3:]} ({len(mine)}), got {len(mapped)}")
            if not mapped and len(mine) > len(theirs):
                self.fail(f"{field}.{part[3:]}", f"{len(mine)} graph {part[3:]}, {s.name} has {len(theirs)} "
                                                 f"({', '.join(theirs)}): map them with {part}")
        for graph_name, entry in self.items(f"{field}.attrs", g.attrs or {}, Mapping):
            if not (isinstance(entry, tuple) and len(entry) == 2 and callable(entry[1])):
                self.fail(f"{field}.attrs[{graph_name}]", f"expected (API attribute, converter), got {show(entry)}")
            if entry[0] is not None and entry[0] not in attrs:
                self.fail(f"{field}.attrs[{graph_name}]", f"{s.name} has no attribute '{entry[0]}' "
                                                          f"({', '.join(attrs) or 'none'})")
        for graph_name, entry in self.items(f"{field}.lists", g.lists or {}, Mapping):
            if not (isinstance(entry, tuple) and len(entry) == 3 and attrs.get(entry[0]) == "bool_list"):
                self.fail(f"{field}.lists[{graph_name}]", f"expected (a bool_list attribute of {s.name}, index, "
                                                          f"length), got {show(entry)}")
        for i, entry in enumerate(self.items(f"{field}.fixed_attrs", g.fixed_attrs)):
            if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)):
                self.fail(f"{field}.fixed_attrs[{i}]", f"expected (graph attribute, value), got {show(entry)}")
        self.items(f"{field}.ignored", g.ignored or {}, Mapping)
        for graph_name, _why in self.items(f"{field}.absent_only", g.absent_only or {}, Mapping):
            mapped = g.api_inputs(tuple(ins))
            if graph_name not in g.inputs or mapped[g.inputs.index(graph_name)] is not None:
                self.fail(f"{field}.absent_only[{show(graph_name)}]",
                          "expected a graph input mapped to None in to_inputs")
        for i, entry in enumerate(self.items(f"{field}.when", g.when)):
            if not (isinstance(entry, tuple) and len(entry) == 3 and isinstance(entry[0], str)
                    and isinstance(entry[2], tuple) and len(entry[2]) == len(g.inputs)):
                self.fail(f"{field}.when[{i}]", f"expected (graph attribute, value, one API input name or None per "
                                                f"graph input), got {show(entry)}")
            for j, n in enumerate(entry[2]):
                if n is not None and n not in ins:
                    self.fail(f"{field}.when[{i}][{j}]", f"{s.name} has no input '{n}' ({', '.join(ins)})")
        for api_input, attr in self.items(f"{field}.shaped", g.shaped or {}, Mapping):
            if api_input not in ins or api_input in g.api_inputs(tuple(ins)) or not isinstance(attr, str):
                self.fail(f"{field}.shaped[{show(api_input)}]",
                          "expected an input of the op no graph input maps to -> the graph attribute holding its shape")
        for api_input, attr in self.items(f"{field}.valued", g.valued or {}, Mapping):
            if api_input not in g.api_inputs(tuple(ins)) or not isinstance(attr, str):
                self.fail(f"{field}.valued[{show(api_input)}]",
                          "expected an input of the op a graph input maps to -> the graph attribute listing its values")
        self.function(f"{field}.derive", g.derive)
        self.function(f"{field}.reshape", g.reshape)
