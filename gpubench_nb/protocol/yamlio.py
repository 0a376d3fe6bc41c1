"""The one YAML reader: YAML 1.2's core schema (what editors and the JSON Schema read), safe,
bounded (size, alias expansion, depth), duplicate keys refused (an error, not "last one wins");
a small file cannot expand into gigabytes ("billion laughs")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from gpubench_nb.errors import GpubenchError, ProtocolError
from gpubench_nb.protocol.outputs import regular_input

MAX_YAML_BYTES = 1_000_000  # an experiment or offers file is a few KB; 1 MB is far above any
# The values of a file counted as if every alias were copied out; the demo experiment has ~150.
MAX_EXPANDED_NODES = 100_000
MAX_DEPTH = 64  # nesting levels; the experiment schema needs 4
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _LimitError(Exception):
    """Raised inside the loader; turned into the caller's GpubenchError with the file's name."""


# YAML 1.2's core schema (yaml.org/spec/1.2.2, 10.3.2), not PyYAML's YAML 1.1: `yes`, `on`
# and `2026-12-01` stay text, `7e-1` is a number, as an editor reading the JSON Schema shows.
_CORE = {
    "null": r"~|null|Null|NULL|",
    "bool": r"true|True|TRUE|false|False|FALSE",
    "int": r"[-+]?\d+",  # decimal only: 012 is 12 (1.2), never octal 10 (1.1)
    "float": r"[-+]?(\.\d+|\d+(\.\d*)?)([eE][-+]?\d+)?|[-+]?\.(inf|Inf|INF|nan|NaN|NAN)",
    "merge": r"<<",  # `<<: *base`: YAML 1.1's merge key, which 1.2 readers keep
}


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader of YAML 1.2's core schema that refuses a mapping key given twice."""

    yaml_implicit_resolvers: dict = {}  # noqa: RUF012 (PyYAML's class-level table)
    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise _LimitError(
                    f"line {mark.line + 1}: nested more than {MAX_DEPTH} levels deep; "
                    "flatten the structure"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue  # `<<: *base` merges, and keys written after it override: allowed
            line = key_node.start_mark.line + 1
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: SafeLoader reports it below
            if first is not None:
                raise _LimitError(
                    f"line {line}: key {key!r} is given twice in the same mapping (first on "
                    f"line {first}); keep one (a plain YAML reader silently keeps the last)"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


for _name, _pattern in _CORE.items():  # tried in this order: 12 is an int, 1.5 a float
    _whole = re.compile(f"^(?:{_pattern})$", re.ASCII)  # \d: 0-9 only
    _StrictLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_name}", _whole, None)
_StrictLoader.add_constructor(
    "tag:yaml.org,2002:int", lambda self, n: int(self.construct_scalar(n))
)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a document whose aliases expand past MAX_EXPANDED_NODES, or that refers to itself
    (sizes memoised per node: linear in the file, not in its expansion)."""
    sizes: dict[int, int] = {}
    inside: set[int] = set()

    def size(node: yaml.Node) -> int:
        if id(node) in inside:
            raise _LimitError(
                f"line {node.start_mark.line + 1}: an alias refers to a node that contains it "
                "(a recursive structure); write the values out"
            )
        if id(node) not in sizes:
            inside.add(id(node))
            children = sum(map(size, _children(node)))
            sizes[id(node)] = min(MAX_EXPANDED_NODES + 1, 1 + children)
            inside.discard(id(node))
        return sizes[id(node)]

    if size(root) > MAX_EXPANDED_NODES:
        raise _LimitError(
            f"its aliases expand to more than {MAX_EXPANDED_NODES:,} values (an alias bomb?); "
            "write the values out instead of nesting aliases"
        )


def parse_yaml(
    text: str, *, where: str, error: type[GpubenchError] = ProtocolError, rule: str | None = None
) -> Any:
    """Parse YAML ``text`` (named ``where`` in messages) under every rule above, or raise."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_YAML_BYTES:
        raise error(
            f"{where}: larger than {MAX_YAML_BYTES:,} bytes; an experiment or offers file is a "
            "few KB. Fix: give the right file",
            rule=rule,
        )
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return loader.construct_document(node)
    except _LimitError as exc:
        raise error(f"{where}: {exc}", rule=rule) from None
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise error(
            f"{where}: not valid YAML: {detail}. Fix: correct the syntax", rule=rule
        ) from None
    except RecursionError:
        raise error(
            f"{where}: nested too deeply to read; flatten the structure", rule=rule
        ) from None
    finally:
        loader.dispose()


def read_yaml(
    path: str | Path,
    *,
    what: str,
    error: type[GpubenchError] = ProtocolError,
    rule: str | None = None,
) -> Any:
    """Read and parse the YAML file at ``path`` (``what`` names it in messages: 'experiment')."""
    path = Path(path)
    try:
        regular_input(path, f"{what} file", error, rule)  # a FIFO would block the read
        size = path.stat().st_size
        if size > MAX_YAML_BYTES:
            raise error(
                f"{path}: {size:,} bytes, larger than {MAX_YAML_BYTES:,}; a {what} file is a few "
                "KB. Fix: give the right file",
                rule=rule,
            )
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(
            f"{path}: cannot read the {what} file: not found. Fix: check the path", rule=rule
        ) from None
    except UnicodeDecodeError as exc:
        raise error(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}). Fix: save it as UTF-8",
            rule=rule,
        ) from None
    except OSError as exc:
        raise error(
            f"{path}: cannot read the {what} file ({exc.strerror or exc}). Fix: check the path "
            "and its permissions",
            rule=rule,
        ) from None
    return parse_yaml(text, where=str(path), error=error, rule=rule)
