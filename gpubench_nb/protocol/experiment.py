"""The declared experiment (R1.1, R1.3, R2.1, R2.2, R3.1, R3.4): one YAML, validated and frozen.

Validation lives here; the frozen objects it returns and the allowed values are in
:mod:`gpubench_nb.protocol.experiment_spec`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpubench_nb.errors import ProtocolError, where_relative
from gpubench_nb.protocol import schema
from gpubench_nb.protocol.experiment_rules import identifier as _identifier
from gpubench_nb.protocol.experiment_rules import one_format as _one_format
from gpubench_nb.protocol.experiment_rules import optimisation_problems
from gpubench_nb.protocol.experiment_rules import repeats_reason as _repeats_reason
from gpubench_nb.protocol.experiment_rules import seed as _seed
from gpubench_nb.protocol.experiment_spec import (
    BUILD_OPTIONS,
    EXPERIMENT,
    SETTING_DEFAULTS,
    SETTING_KEYS,
    SETTINGS,
    CorpusSpec,
    Experiment,
    ModelSpec,
    PricingSpec,
    QualitySpec,
    Settings,
    TimingSpec,
    TokenizerSpec,
    Variant,
    build_defaults,
    plain_data,
)
from gpubench_nb.protocol.problems import Problems, failure_kind
from gpubench_nb.protocol.prompting import parse_prompt
from gpubench_nb.protocol.yamlio import read_yaml

TOP_KEYS = schema.keys(EXPERIMENT)
REQUIRED_TOP = tuple(EXPERIMENT["required"])
SECTION_KEYS: Mapping[str, tuple[str, ...]] = {
    name: schema.keys(node)
    for name, node in EXPERIMENT["properties"].items()
    if "properties" in node
}


class Checker:
    """Collects every problem in one file, so the user fixes them in one go."""

    def __init__(self, source: Path, declaration: Mapping[str, Any] = EXPERIMENT) -> None:
        self.source = source
        self.declaration = declaration  # the JSON Schema of the file (`gpubench-nb schema`)
        # one failure in many fields (every variant's batch) is said once
        self.found = Problems("field")
        self.failures = 0  # how many fail() calls so far, for checks that follow another

    @property
    def problems(self) -> list[str]:
        """Every problem found so far, one sentence per kind."""
        return self.found.lines()

    def fail(self, where: str, message: str, fix: str, rule: str | None = None) -> None:
        self.failures += 1
        prefix = f"{rule}: " if rule else ""
        said = f"{where}: {message}. Fix: {fix}"
        self.found.add(failure_kind(f"{prefix}{said}"), where, f"{prefix}{self.source}: {said}")

    def keys(self, where: str, data: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(data, Mapping):
            self.fail(
                where, f"must be a mapping, got {type(data).__name__}", "write key: value pairs"
            )
            return {}
        for key in data:
            if key not in allowed:
                near = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f"did you mean '{near[0]}'?" if near else f"valid keys: {', '.join(allowed)}"
                self.fail(f"{where}.{key}" if where else str(key), "unknown key", hint)
        return dict(data)

    def field(self, where: str, data: Mapping[str, Any]) -> Any:
        """``data``'s value of the declared key ``where``, its declared default filled in,
        checked as the declaration says (so the schema and this checker agree, R1.3)."""
        spec = schema.at(self.declaration, where)
        return self.value(where, data.get(where.rsplit(".", 1)[-1], spec.get("default")), spec)

    def value(self, where: str, value: Any, spec: Mapping[str, Any]) -> Any:
        """``value`` checked against its declaration ``spec``: the JSON Schema kinds the
        declarations use (enum, integer, number, list, text, one of them or null)."""
        if "anyOf" in spec:  # a word ("auto") or a value of the other declaration
            if value in [s["const"] for s in spec["anyOf"] if "const" in s]:
                return value
            spec = next(s for s in spec["anyOf"] if "const" not in s)
        if isinstance(spec.get("type"), list):  # a value of one type, or null
            if value is None and "null" in spec["type"]:
                return None
            spec = {**spec, "type": next(t for t in spec["type"] if t != "null")}
        if "enum" in spec:
            return self.choice(where, value, tuple(spec["enum"]))
        kind = spec.get("type")
        if kind == "integer":
            return self.integer(where, value, spec["minimum"])
        if kind == "number" and "maximum" in spec:
            return self.fraction(where, value)
        if kind == "number":
            low = spec["exclusiveMinimum"]
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= low:
                self.fail(where, f"must be a number > {low}, got {value!r}", "write one")
        if kind == "array":
            if not isinstance(value, list) or len(value) < spec.get("minItems", 0):
                self.fail(where, f"must be a non-empty list, got {value!r}", "e.g. [1.0, 10.0]")
                return []
            return [self.value(f"{where}[{i}]", v, spec["items"]) for i, v in enumerate(value)]
        if kind == "string":
            value = self.text(where, value)
            if value and not re.search(spec.get("pattern", ""), value):
                self.fail(where, f"{value!r} is not allowed", f"use {spec['description']}")
        return value

    def choice(self, where: str, value: Any, allowed: tuple[Any, ...]) -> Any:
        if value not in allowed:
            self.fail(
                where, f"{value!r} is not allowed", f"use one of {', '.join(map(str, allowed))}"
            )
        return value

    def integer(self, where: str, value: Any, minimum: int, fix: str | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(
                where,
                f"must be an integer >= {minimum}, got {value!r}",
                fix or f"write a whole number >= {minimum}",
            )
            return minimum
        return value

    def fraction(self, where: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            self.fail(where, f"must be a number between 0 and 1, got {value!r}", "e.g. 0.70")
            return 0.0
        return float(value)

    def text(self, where: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(where, f"must be a non-empty string, got {value!r}", "write a value")
            return ""
        return value

    def path(self, where: str, value: Any) -> Path:
        return (self.source.parent / self.text(where, value)).resolve()


def load_experiment(path: str | Path) -> Experiment:
    """Load, validate and normalise an experiment YAML; one ProtocolError lists every fault."""
    source = Path(path).resolve()
    if not source.exists():
        found = f"cannot read the experiment file: not found{where_relative(path)}"
        raise ProtocolError(f"{source}: {found}", rule="R1.3")
    # Bounded, duplicate keys refused: the one YAML reader.
    raw = read_yaml(source, what="experiment", error=ProtocolError, rule="R1.3")
    check = Checker(source)
    top = check.keys("", raw, TOP_KEYS)
    for key in REQUIRED_TOP:
        if key not in top:
            check.fail(key, "missing", f"declare '{key}' before any measurement", rule="R1.3")
    if check.problems:
        raise ProtocolError("\n".join(check.problems))
    experiment = _build(check, top)
    if check.problems:
        raise ProtocolError("\n".join(check.problems))
    return experiment


def _build(check: Checker, top: dict[str, Any]) -> Experiment:
    experiment_id = _identifier(check, "experiment_id", top["experiment_id"])
    classes = _classes(check, top["classes"])
    knob = check.choice("knob", top["knob"], SETTING_KEYS)
    fixed = _fixed(check, top["fixed"], knob)
    variants = _variants(check, top["variants"], knob, fixed)
    quality = _quality(check, top["quality"], [v.id for v in variants])
    model = _model(check, top["model"], classes)
    refused = {  # what this backend and device cannot run, said once per field (R2.1)
        (f"fixed.{key}" if key in fixed else f"variants[{v.id}].{key}", problem, fix): None
        for v in variants
        for key, problem, fix in optimisation_problems(v.settings, model.backend)
    }
    for where, problem, fix in refused:
        check.fail(where, problem, fix, rule="R2.1")
    notes = top.get("notes") or ""
    if not isinstance(notes, str):
        check.fail("notes", "must be free text", "write a string")
        notes = str(notes)
    return Experiment(
        source=check.source,
        experiment_id=experiment_id,
        notes=notes.strip(),
        seed=_seed(check, "seed", top["seed"]),
        corpus=_corpus(check, top["corpus"]),
        classes=classes,
        output_format=check.field("output_format", top),
        quality=quality,
        model=model,
        tokenizer=TokenizerSpec(
            path=check.path("tokenizer.path", _section(check, top, "tokenizer").get("path"))
        ),
        knob=knob,
        fixed=MappingProxyType(fixed),
        variants=tuple(variants),
        timing=_timing(check, top["timing"], top["seed"]),
        pricing=_pricing(check, top.get("pricing")),
        raw=plain_data(top),
    )


def _section(check: Checker, top: Mapping[str, Any], name: str) -> dict[str, Any]:
    return check.keys(name, top.get(name), SECTION_KEYS[name])


def _classes(check: Checker, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) < 2:
        check.fail(
            "classes", f"must be a list of at least 2 labels, got {value!r}", "list the classes"
        )
        return ()
    labels = [check.text(f"classes[{i}]", label) for i, label in enumerate(value)]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        check.fail("classes", f"duplicated labels {duplicates}", "list each class once")
    return tuple(labels)


def _corpus(check: Checker, value: Any) -> CorpusSpec:
    corpus = check.keys("corpus", value, SECTION_KEYS["corpus"])
    path = check.path("corpus.path", corpus.get("path"))
    default_format = "csv" if path.suffix.lower() == ".csv" else "jsonl"
    optional = {
        split: check.path(f"corpus.{split}", corpus[split]) if corpus.get(split) else None
        for split in ("train", "tune")
    }
    fmt = check.choice("corpus.format", corpus.get("format", default_format), ("jsonl", "csv"))
    _one_format(check, fmt, {"path": path, **optional})
    return CorpusSpec(
        path=path,
        format=fmt,
        id_field=check.field("corpus.id_field", corpus),
        text_field=check.field("corpus.text_field", corpus),
        label_field=check.field("corpus.label_field", corpus),
        train=optional["train"],
        tune=optional["tune"],
    )


def _quality(check: Checker, value: Any, variant_ids: list[str]) -> QualitySpec:
    quality = check.keys("quality", value, SECTION_KEYS["quality"])
    for key in SECTION_KEYS["quality"]:
        if key not in quality:
            check.fail(f"quality.{key}", "missing", "declare it before measuring", rule="R1.3")
    reference = quality.get("reference_variant")
    if variant_ids and reference not in variant_ids:
        check.fail(
            "quality.reference_variant",
            f"{reference!r} is not a declared variant",
            f"use one of {', '.join(variant_ids)}",
            rule="R1.3",
        )
    return QualitySpec(
        metric=check.field("quality.metric", quality),
        threshold=check.field("quality.threshold", quality),
        tolerance=check.field("quality.tolerance", quality),
        reference_variant=str(reference),
    )


def _model(check: Checker, value: Any, classes: tuple[str, ...]) -> ModelSpec:
    model = check.keys("model", value, SECTION_KEYS["model"])
    backend = check.field("model.backend", model)
    build = _build_options(check, backend, model.get("build") or {})
    return ModelSpec(
        backend=backend,
        path=check.path("model.path", model.get("path")),
        build=MappingProxyType(dict(build)),
        prompt=parse_prompt(check, model.get("prompt"), backend, classes),
    )


def _build_options(check: Checker, backend: Any, build: Any) -> dict[str, Any]:
    """model.build against the declared options of ``backend`` (BUILD_OPTIONS): an unknown
    option or a wrong value is refused here, not at build time (R1.3)."""
    if backend not in BUILD_OPTIONS:
        return dict(build) if isinstance(build, Mapping) else {}
    declared = BUILD_OPTIONS[backend]["properties"]
    if not declared:
        if build:
            check.fail("model.build", f"{backend} takes no build options", "remove model.build")
        return {}
    build = check.keys("model.build", build, tuple(declared))
    for key, value in build.items():
        if key in declared:
            check.value(f"model.build.{key}", value, declared[key])
    return build


def build_options(backend: str, options: Any) -> dict[str, Any]:
    """model.build of the preset ``backend`` checked against its declaration (BUILD_OPTIONS,
    what validate checks), its declared defaults filled in (R1.3)."""
    check = Checker(Path(f"the {backend} preset"))
    _build_options(check, backend, options or {})
    if check.problems:
        raise ProtocolError("\n".join(check.problems), rule="R1.3")
    return {**build_defaults(backend), **(options or {})}


def _setting(check: Checker, where: str, key: str, value: Any) -> Any:
    return check.value(where, value, SETTINGS[key])


def _fixed(check: Checker, value: Any, knob: str) -> dict[str, Any]:
    fixed = {**SETTING_DEFAULTS, **check.keys("fixed", value, SETTING_KEYS)}
    if knob in fixed and knob in (value or {}):
        check.fail(
            f"fixed.{knob}",
            f"'{knob}' is the declared knob and cannot also be fixed",
            "remove it from fixed; each variant sets it",
            rule="R2.1",
        )
    fixed.pop(knob, None)
    for key in SETTING_KEYS:
        if key != knob and key not in fixed:
            check.fail(
                f"fixed.{key}",
                "missing",
                "declare it so every variant applies the same value",
                rule="R2.1",
            )
    return {
        key: _setting(check, f"fixed.{key}", key, fixed[key])
        for key in SETTING_KEYS
        if key in fixed
    }


def _variants(check: Checker, value: Any, knob: str, fixed: dict[str, Any]) -> list[Variant]:
    if not isinstance(value, list) or not value:
        check.fail("variants", "must be a non-empty list", f"e.g. - {{id: b1, {knob}: 1}}")
        return []
    variants: list[Variant] = []
    refused: set[int] = set()  # variants whose knob value was refused: no duplicate check
    for i, entry in enumerate(value):
        where = f"variants[{i}]"
        if not isinstance(entry, Mapping):
            check.fail(
                where, "must be a mapping with 'id' and the knob", f"e.g. {{id: v{i}, {knob}: ...}}"
            )
            continue
        for key in entry:
            if key not in ("id", knob):
                hint = (
                    "precision is studied in its own experiment file (R2.2)"
                    if key == "precision"
                    else f"move '{key}' to fixed, or make a separate experiment"
                )
                check.fail(
                    f"{where}.{key}",
                    f"a variant may set only the declared knob '{knob}'",
                    hint,
                    rule="R2.1",
                )
        variant_id = _identifier(check, f"{where}.id", entry.get("id"))
        if knob not in entry:
            check.fail(
                f"{where}.{knob}",
                "missing",
                f"give this variant its value of '{knob}'",
                rule="R2.1",
            )
            continue
        failures = check.failures
        knob_value = _setting(check, f"{where}.{knob}", knob, entry[knob])
        if all(k in fixed for k in SETTING_KEYS if k != knob):
            if check.failures != failures:  # its stand-in value (batch 1) is nobody's value
                refused.add(len(variants))
            settings = Settings(**{**fixed, knob: knob_value})
            variants.append(Variant(id=variant_id, settings=settings, knob_value=knob_value))
    ids = [v.id.casefold() for v in variants]  # runs/<id>/ folders: b1 and B1 are one on macOS
    for variant_id in sorted({v for v in ids if ids.count(v) > 1}):
        check.fail(
            "variants",
            f"variant id {variant_id!r} is used twice (ids differing only in case count as one)",
            "give each variant its own id",
        )
    values = [repr(v.knob_value) for i, v in enumerate(variants) if i not in refused]
    for knob_value in sorted({v for v in values if values.count(v) > 1}):
        check.fail(
            "variants",
            f"two variants set {knob} = {knob_value}",
            "each variant needs its own value",
            rule="R2.1",
        )
    return variants


def _timing(check: Checker, value: Any, seed: Any) -> TimingSpec:
    timing = check.keys("timing", value, SECTION_KEYS["timing"])
    for key in ("scope", "warmup_iterations"):
        if key not in timing:
            check.fail(
                f"timing.{key}",
                "missing",
                "declare what the timer covers and the warm-up",
                rule="R3.1" if key == "scope" else "R3.4",
            )
    order = check.field("timing.order", timing)
    order_seed = timing.get("order_seed")
    if order == "drawn" and order_seed is None:
        order_seed = seed  # drawn in advance from the published seed (R3.4)
    if order_seed is not None:
        order_seed = _seed(check, "timing.order_seed", order_seed)
    repeats = check.field("timing.repeats", timing)
    reason = _repeats_reason(check, repeats, timing.get("repeats_reason"))
    return TimingSpec(
        scope=check.field("timing.scope", timing),
        warmup_iterations=check.field("timing.warmup_iterations", timing),
        repeats=repeats,
        order=order,
        order_seed=order_seed,
        repeats_reason=reason,
    )


def _pricing(check: Checker, value: Any) -> PricingSpec | None:
    if not value:
        return None
    pricing = check.keys("pricing", value, SECTION_KEYS["pricing"])
    lots, gpus = pricing.get("lots"), pricing.get("gpus")
    if (lots is None) == (gpus is None):
        check.fail(
            "pricing",
            "give exactly one of 'lots' (billed lots) or 'gpus' (GPUs needed)",
            "e.g. lots: 1",
            rule="R5.1",
        )
    return PricingSpec(
        offers=check.path("pricing.offers", pricing.get("offers")),
        offer=check.field("pricing.offer", pricing),
        days=check.field("pricing.days", pricing),
        lots=None if lots is None else check.integer("pricing.lots", lots, 1),
        gpus=None if gpus is None else check.integer("pricing.gpus", gpus, 1),
    )
