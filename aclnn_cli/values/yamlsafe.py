"""Case files are untrusted input: finding and reading them, parsing YAML, and quoting what they hold.

PyYAML's safe loader only stops code execution. It still takes the last of two equal keys
(`op:` twice silently picks the second), expands a 1 KB "billion laughs" file into gigabytes
for whoever walks the result, recurses once per nesting level (a deep file segfaults the C
composer) and builds every node of a 50 MB file before anything can object. The loader here
composes in Python (on libyaml's event parser when present, for speed) and refuses each of
those with the line it happened at. `show` and `clip` put user values into error messages
without ever formatting more than a few dozen characters of them.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, MappingStartEvent
from yaml.nodes import ScalarNode, SequenceNode
from yaml.resolver import Resolver

from ..files.text import clip, show

MAX_NODES = 250_000  # YAML nodes, every alias counted at its expanded size (~2 s, ~200 MB at worst)
MAX_DEPTH = 64  # nesting levels; case files need about 6
MAX_INT_BITS = 256  # larger integers are never valid and cannot even be printed past 4300 digits
_MERGE = "tag:yaml.org,2002:merge"


class YamlRefused(yaml.YAMLError):
    """A well-formed YAML document this tool will not load (duplicate key, bomb, too deep)."""

    def __init__(self, problem: str, mark: Any = None) -> None:
        self.problem, self.problem_mark = problem, mark
        super().__init__(problem)


class _Built(ScalarNode):
    """A mapping that was constructed as soon as it was composed (see _Guards.compose_node): its value."""


class _Guards:
    """Composer and constructor overrides shared by both loaders.

    A mapping that is an item of a sequence (a case in `cases:`) and holds no anchor or alias is
    constructed as soon as it is composed, and its nodes dropped: a file of 10,000 cases otherwise
    held some 50,000 nodes (20 MB) until the end. What it constructs to does not depend on when.
    """

    def _start(self) -> None:
        self._total, self._depth, self._sizes = 0, 0, {}
        self._shared, self._items = 0, None  # anchors and aliases seen; ids of the current item's nodes

    def get_single_node(self):
        self._start()
        try:
            return super().get_single_node()
        finally:
            self._sizes = {}

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(parent, SequenceNode) and isinstance(event, MappingStartEvent) and self._items is None:
            return self._compose_item(parent, index, event)
        if isinstance(event, AliasEvent) or event.anchor is not None:
            self._shared += 1
        if isinstance(event, AliasEvent):
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:
                raise YamlRefused(f"alias *{clip(str(event.anchor), 30)} refers to a node that contains it "
                                  "(a recursive structure)", event.start_mark)
            self._total += size
            if self._total > MAX_NODES:
                raise YamlRefused(f"aliases expand the document to more than {MAX_NODES} nodes "
                                  "(an alias bomb?)", event.start_mark)
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise YamlRefused(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        self._total += 1
        if self._total > MAX_NODES:
            raise YamlRefused(f"more than {MAX_NODES} YAML nodes; a case file describes cases, "
                              "generators make the data", event.start_mark)
        before = self._total
        node = super().compose_node(parent, index)
        self._sizes[id(node)] = self._total - before + 1  # itself, its children, their aliases expanded
        if self._items is not None:
            self._items.append(id(node))
        self._depth -= 1
        return node

    def _compose_item(self, parent, index, event):
        """A mapping in a sequence; constructed right away (a _Built node) if nothing can refer to it."""
        shared, self._items = self._shared, []
        saved = self.constructed_objects, self.recursive_objects, self.state_generators
        self.constructed_objects = {}  # (what the duplicate-key check constructs: the item's keys)
        try:
            node = self.compose_node(parent, index)
            if self._shared != shared:  # an anchor or alias inside: composed as usual, constructed at the end
                saved[0].update(self.constructed_objects)
                return node
            self.recursive_objects, self.state_generators = {}, []
            data = self.construct_object(node, deep=True)
            while self.state_generators:  # (none with deep=True; as construct_document does)
                pending, self.state_generators = self.state_generators, []
                for generator in pending:
                    for _ in generator:
                        pass
            for i in self._items:  # its nodes go: their ids may come back on other nodes
                self._sizes.pop(i, None)
            return _Built(node.tag, data, node.start_mark, node.end_mark)
        finally:
            self.constructed_objects, self.recursive_objects, self.state_generators = saved
            self._items = None

    def compose_mapping_node(self, anchor):
        node = super().compose_mapping_node(anchor)
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE:
                continue
            key = self.construct_object(key_node)  # a scalar: no state, and cached for the real construction
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:
                continue
            if first is not key_node:
                raise YamlRefused(f"duplicate key {show(key)} (first at line {first.start_mark.line + 1})",
                                  key_node.start_mark)
        return node

    def construct_object(self, node, deep=False):
        if type(node) is _Built:
            return node.value
        try:
            return super().construct_object(node, deep)
        except (ValueError, KeyError, TypeError, OverflowError):  # `!!float abc`, `!!bool maybe`, 5000 digits
            what = node.tag.rsplit(":", 1)[-1] + (f" (at most {MAX_INT_BITS} bits)" if node.tag.endswith(":int") else "")
            raise YamlRefused(f"cannot read {clip(str(node.value), 30)} as a YAML {what}", node.start_mark) from None

    def construct_yaml_int(self, node):
        value = SafeConstructor.construct_yaml_int(self, node)
        if value.bit_length() > MAX_INT_BITS:
            raise YamlRefused(f"integer {clip(str(node.value), 30)} is too large", node.start_mark)
        return value

    def construct_refused(self, node):
        raise YamlRefused(f"YAML type {node.tag.rsplit(':', 1)[-1]} is not used in case files", node.start_mark)


class CaseLoader(_Guards, yaml.SafeLoader):
    """The pure-Python safe loader, guarded."""


_LOADERS: list[type] = [CaseLoader]
try:
    from yaml._yaml import CParser

    class FastCaseLoader(_Guards, Composer, CParser, SafeConstructor, Resolver):
        """libyaml's event parser (4x faster) under the same Python composer and guards."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    _LOADERS.insert(0, FastCaseLoader)
except ImportError:  # PyYAML built without libyaml
    pass

for _cls in _LOADERS:
    _cls.add_constructor("tag:yaml.org,2002:int", _Guards.construct_yaml_int)
    _cls.add_constructor("tag:yaml.org,2002:timestamp", SafeConstructor.construct_yaml_str)  # 2024-01-01 stays text
    for _tag in ("binary", "set", "omap", "pairs"):
        _cls.add_constructor(f"tag:yaml.org,2002:{_tag}", _Guards.construct_refused)


_FLOW_TOKENS = re.compile(r"""[\[\]{}]|(?:^|(?<=[\s\[{,:?-]))(?:#[^\n]*|'(?:[^']|'')*'?|"(?:[^"\\]|\\.)*"?)""",
                          re.DOTALL)


def flow_depth(text: str, end: int | None = None) -> int:
    """The deepest flow nesting (`[` and `{`) in text[:end], skipping quoted scalars and comments;
    stops counting once past MAX_DEPTH.

    Used only once a parser has already refused the text, to say why in this tool's words: libyaml
    0.2.6 (PyYAML 6.0.4) refuses deep flow nesting in its scanner, which reads ahead of the composer
    that enforces MAX_DEPTH, and its wording is its own. A bracket inside a block or plain scalar
    counts too, so this can only overstate, and only for text the parser did not accept anyway.
    """
    depth = deepest = 0
    for token in _FLOW_TOKENS.finditer(text, 0, len(text) if end is None else end):
        c = token.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                break
        elif c in "]}":
            depth = max(depth - 1, 0)
    return deepest


def _one_line(text: str, limit: int = 120) -> str:
    return clip(" ".join(str(text).split()), limit)


def parse(where: str, data: bytes) -> Any:
    """One YAML document, safely and boundedly loaded; CaseError says what and where."""
    from ..errors import CaseError

    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise CaseError(where, "UTF-16 text; save the case file as UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CaseError(where, f"not UTF-8 text (byte {exc.start}, line {line})") from None
    loader = _LOADERS[0](text.removeprefix("\ufeff"))
    try:
        return loader.get_single_data()
    except YamlRefused as exc:
        line = f"line {exc.problem_mark.line + 1}: " if exc.problem_mark is not None else ""
        raise CaseError(where, f"{line}{exc.problem}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        if flow_depth(text, mark.index + 1 if mark else None) > MAX_DEPTH:
            at = f"line {mark.line + 1}: " if mark else ""
            raise CaseError(where, f"{at}nested more than {MAX_DEPTH} levels deep") from None
        at = f" at line {mark.line + 1}" if mark else ""
        what = ", ".join(t for t in (exc.context, exc.problem) if t)
        raise CaseError(where, f"not valid YAML{at}: {_one_line(what)}") from None
    except yaml.YAMLError as exc:  # ReaderError: a control character or the like
        raise CaseError(where, f"not valid YAML: {_one_line(str(exc).splitlines()[0])}") from None
    except RecursionError:  # defensive: MAX_DEPTH keeps the composer far from the limit
        raise CaseError(where, f"nested more than {MAX_DEPTH} levels deep") from None
    finally:
        loader.dispose()
