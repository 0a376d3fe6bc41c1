"""The checker of a declared YAML (driven by its JSON Schema, R1.3) and the rules between the
experiment's fields: identifiers, seeds, repeats, formats (the settings' own: capabilities)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpubench_nb.protocol import schema
from gpubench_nb.protocol.problems import Problems, failure_kind
from gpubench_nb.protocol.records import declared_value

# Identifiers name folders and files: matched whole (re.fullmatch: `$` would let a trailing
# newline through), and short enough that "<id>" plus a prefix fits a 255-byte file name.
MAX_ID_LENGTH = 100
# The seed feeds numpy, scikit-learn (random_state) and torch.manual_seed: numpy and
# scikit-learn take 0 <= seed < 2**32, the narrowest of the three (torch takes < 2**63).
MAX_SEED = 2**32 - 1
MIN_REPEATS = 5  # R3.4: each variant measured five times
_SUFFIX_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
_RULE = re.compile(r"R\d\.\d+")  # the rule a declaration's description cites


def _rule(spec: Mapping[str, Any]) -> str | None:
    """The rule a declaration's description cites, if any."""
    found = _RULE.search(spec.get("description", ""))
    return found[0] if found else None


def _fix(spec: Mapping[str, Any]) -> str:
    """What to write instead, said from the declaration: its values, its bounds or its words."""
    kind = spec.get("type")
    if "enum" in spec:
        return f"use one of {', '.join(map(str, spec['enum']))}"
    if kind in ("integer", "number"):
        signs = (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="))
        bounds = " and ".join(f"{sign} {spec[k]}" for k, sign in signs if k in spec)
        return f"write {'a whole number' if kind == 'integer' else 'a number'} {bounds}".strip()
    if kind in ("boolean", "array"):
        return "write true or false" if kind == "boolean" else "write a list: [a, b, ...]"
    return f"write {spec.get('description', 'a value as docs/REFERENCE.md declares it')}"


class Checker:
    """Collects every problem in one file, so the user fixes them in one go; values are checked
    as the declaration (the file's JSON Schema, `gpubench-nb schema`) says, so both agree (R1.3)."""

    def __init__(self, source: Path, declaration: Mapping[str, Any]) -> None:
        self.source = source
        self.declaration = declaration
        self.found = Problems("field")  # one failure in many fields is said once
        self.missing: set[str] = set()  # a missing key is said once, not again as a bad value

    @property
    def problems(self) -> list[str]:
        """Every problem found so far, one sentence per kind."""
        return self.found.lines()

    def fail(self, where: str, message: str, fix: str, rule: str | None = None) -> None:
        if where in self.missing:
            return
        prefix = f"{rule}: " if rule else ""
        said = f"{where}: {message}. Fix: {fix}"
        self.found.add(failure_kind(f"{prefix}{said}"), where, f"{prefix}{self.source}: {said}")

    def section(self, where: str, data: Any) -> dict[str, Any]:
        """``data`` as the section ``where`` declares it: no unknown key, every required key
        present (the rule in the key's description, else R1.3); :meth:`field` checks values."""
        node = schema.at(self.declaration, where)
        fix = "declare it before any measurement"
        keys = {k: {"rule": _rule(s) or "R1.3", "fix": fix} for k, s in node["properties"].items()}
        self.value(where, data, {**node, "properties": keys})
        given = dict(data) if isinstance(data, Mapping) else {}
        for key in [k for k, v in given.items() if v is None and k not in node["required"]]:
            if "null" not in node["properties"].get(key, {}).get("type", "null"):  # as the schema
                fix = "write a value or remove the key (absent: its default)"
                self.fail(f"{where}.{key}".lstrip("."), "must not be empty", fix)
        return given

    def field(self, where: str, data: Mapping[str, Any]) -> Any:
        """``data``'s value of the declared key ``where``, its declared default filled in,
        checked as the declaration says (R1.3)."""
        spec = schema.at(self.declaration, where)
        return self.value(where, data.get(where.rsplit(".", 1)[-1], spec.get("default")), spec)

    def fields(self, where: str, data: Mapping[str, Any], *names: str) -> dict[str, Any]:
        """:meth:`field` of each of ``names`` (default: every key the section declares)."""
        names = names or tuple(schema.at(self.declaration, where)["properties"])
        return {name: self.field(f"{where}.{name}", data) for name in names}

    def value(self, where: str, value: Any, spec: Mapping[str, Any]) -> Any:
        """``value`` checked against its declaration ``spec`` as records check theirs (R1.3), a
        problem citing the rule its description names; a refused value reads as a stand-in of
        its kind (0, "", []), so the rules between fields still run."""
        if "anyOf" in spec:  # a word ("auto") or a value of the other declaration
            if value in [s["const"] for s in spec["anyOf"] if "const" in s]:
                return value
            spec = next(s for s in spec["anyOf"] if "const" not in s)
        if isinstance(spec.get("type"), list):  # a value of one type, or null
            if value is None and "null" in spec["type"]:
                return None
            spec = {**spec, "type": next(t for t in spec["type"] if t != "null")}
        if spec.get("pattern") == schema.ID_PATTERN:  # names folders: said as such
            spec = {"why": schema.ID_WHY, "fix": schema.ID_FIX, **spec}
        fix = spec.get("fix") or _fix(spec)
        got, found = declared_value(spec, value, where)
        for rule, path, problem, said in found:
            self.fail(path, problem, said or fix, rule or _rule(spec))
            if problem in ("missing", "must not be empty"):  # said once, not again as a value
                self.missing.add(path)
        kind = spec.get("type")
        if got is not None or "enum" in spec or kind == "string" and isinstance(value, str):
            return value if got is None else got
        stand_in = {"integer": spec.get("minimum", 0), "number": 0.0, "boolean": False, "array": []}
        return stand_in.get(kind, "")

    def text(self, where: str, value: Any) -> str:
        return self.value(where, value, schema.at(self.declaration, where))

    def path(self, where: str, value: Any) -> Path:
        return (self.source.parent / self.text(where, value)).resolve()


def repeats_reason(check: Checker, repeats: int, value: Any) -> str | None:
    """R3.4 asks for five repeats: fewer are allowed only with a stated reason (then reported)."""
    if value is not None:
        return check.text("timing.repeats_reason", value).strip() or None
    if repeats < MIN_REPEATS:
        check.fail(
            "timing.repeats",
            f"{repeats} repeats, fewer than the {MIN_REPEATS} the protocol asks for",
            f"use repeats: {MIN_REPEATS}, or say why in timing.repeats_reason (it is frozen in "
            "the lock and printed in the report)",
            rule="R3.4",
        )
    return None


def one_format(check: Checker, fmt: str, splits: Mapping[str, Path | None]) -> None:
    """One ``corpus.format`` reads every split; when all suffixes name the same other format, that
    format is the fix, else each odd file is named (R1.1)."""
    looks = {s: _SUFFIX_FORMATS.get(p.suffix.lower()) for s, p in splits.items() if p is not None}
    odd = {split: kind for split, kind in looks.items() if kind not in (None, fmt)}
    if len(set(odd.values())) == 1 and set(odd) == {s for s, kind in looks.items() if kind}:
        kind = next(iter(odd.values()))
        files = ", ".join(splits[split].name for split in odd)  # type: ignore[union-attr]
        check.fail(
            "corpus.format",
            f"{fmt!r} is declared but every corpus file is {kind.upper()} ({files})",
            f"write corpus.format: {kind}",
            rule="R1.1",
        )
        return
    for split, kind in odd.items():
        key = "corpus.path" if split == "path" else f"corpus.{split}"
        what = "eval" if split == "path" else split
        check.fail(
            key,
            f"{splits[split].name} looks like {kind.upper()} but corpus.format is {fmt!r}, and "  # type: ignore[union-attr]
            "one format reads every file (eval, train, tune)",
            f"save the {what} split as {fmt.upper()} with the same field names (id_field, "
            f"text_field, label_field), or, if every file is {kind.upper()}, write "
            f"corpus.format: {kind}",
            rule="R1.1",
        )
