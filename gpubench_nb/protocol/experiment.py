"""The declared experiment (R1.1, R1.3, R2.1, R2.2, R3.1, R3.4): one YAML, checked by
``experiment_rules.Checker`` against ``experiment_spec``'s declarations, then frozen."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpubench_nb.errors import ProtocolError, where_relative
from gpubench_nb.protocol.capabilities import refusals
from gpubench_nb.protocol.experiment_rules import Checker
from gpubench_nb.protocol.experiment_rules import one_format as _one_format
from gpubench_nb.protocol.experiment_rules import repeats_reason as _repeats_reason
from gpubench_nb.protocol.experiment_spec import (
    BUILD_OPTIONS,
    EXPERIMENT,
    SEED,
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
    plain_data,
)
from gpubench_nb.protocol.outputs import regular_input
from gpubench_nb.protocol.prompting import parse_prompt
from gpubench_nb.protocol.yamlio import read_yaml


def load_experiment(path: str | Path) -> Experiment:
    """Load, validate and normalise an experiment YAML; one ProtocolError lists every fault."""
    source = regular_input(path, "experiment file", ProtocolError, "R1.3").resolve()
    if not source.exists():
        found = f"cannot read the experiment file: not found{where_relative(path)}"
        raise ProtocolError(f"{source}: {found}", rule="R1.3")
    # Bounded, duplicate keys refused: the one YAML reader.
    raw = read_yaml(source, what="experiment", error=ProtocolError, rule="R1.3")
    kinds = {"offers": "an offers table (pricing.offers names it)", "targets": "a campaign file"}
    if isinstance(raw, dict) and "experiment_id" not in raw and (kind := set(raw) & set(kinds)):
        fix = "give an experiment YAML (e.g. parameters/demo.yaml)"
        raise ProtocolError(f"{source}: this is {kinds[kind.pop()]}, not an experiment; fix: {fix}")
    check = Checker(source, EXPERIMENT)
    top = check.section("", raw)
    if not check.problems:
        experiment = _build(check, top)
        if not check.problems:
            return experiment
    raise ProtocolError("\n".join(check.problems))


def _build(check: Checker, top: dict[str, Any]) -> Experiment:
    experiment_id = check.field("experiment_id", top)
    classes = tuple(check.field("classes", top))
    knob = str(check.field("knob", top))  # a refused list reads as text: said, no crash
    fixed = _fixed(check, top["fixed"], knob)
    variants = _variants(check, top["variants"], knob, fixed)
    quality = _quality(check, top["quality"], [v.id for v in variants])
    model = _model(check, top["model"], classes)
    refused = {  # what this backend and device cannot run, said once per field (R2.1)
        (f"fixed.{key}" if key in fixed else f"variants[{v.id}].{key}", problem, fix): None
        for v in variants
        for key, problem, fix in refusals(v.settings, model.backend)
    }
    for where, problem, fix in refused:
        check.fail(where, problem, fix, rule="R2.1")
    notes = check.field("notes", {"notes": top.get("notes") or ""})  # null: no notes
    tokenizer = check.section("tokenizer", top["tokenizer"])
    return Experiment(
        source=check.source,
        experiment_id=experiment_id,
        notes=notes.strip(),
        seed=check.field("seed", top),
        corpus=_corpus(check, top["corpus"]),
        classes=classes,
        output_format=check.field("output_format", top),
        quality=quality,
        model=model,
        tokenizer=TokenizerSpec(path=check.path("tokenizer.path", tokenizer.get("path"))),
        knob=knob,
        fixed=MappingProxyType(fixed),
        variants=tuple(variants),
        timing=_timing(check, top["timing"], top["seed"]),
        pricing=_pricing(check, top.get("pricing")),
        raw=plain_data(top),
    )


def _corpus(check: Checker, value: Any) -> CorpusSpec:
    corpus = check.section("corpus", value)
    path = check.path("corpus.path", corpus.get("path"))
    splits = {
        split: check.path(f"corpus.{split}", corpus[split]) if corpus.get(split) else None
        for split in ("train", "tune")
    }
    default_format = "csv" if path.suffix.lower() == ".csv" else "jsonl"
    fmt = check.field("corpus.format", {"format": default_format, **corpus})
    _one_format(check, fmt, {"path": path, **splits})
    fields = check.fields("corpus", corpus, "id_field", "text_field", "label_field")
    return CorpusSpec(path=path, format=fmt, **fields, **splits)


def _quality(check: Checker, value: Any, variant_ids: list[str]) -> QualitySpec:
    quality = check.fields("quality", check.section("quality", value))
    if variant_ids and quality["reference_variant"] not in variant_ids:
        check.fail(
            "quality.reference_variant",
            f"{quality['reference_variant']!r} is not a declared variant",
            f"use one of {', '.join(variant_ids)}",
            rule="R1.3",
        )
    return QualitySpec(**quality)


def _model(check: Checker, value: Any, classes: tuple[str, ...]) -> ModelSpec:
    model = check.section("model", value)
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
    if backend in BUILD_OPTIONS and build and not BUILD_OPTIONS[backend]["properties"]:
        check.fail("model.build", f"{backend} takes no build options", "remove model.build")
    elif backend in BUILD_OPTIONS:
        check.value("model.build", build, BUILD_OPTIONS[backend])
    return dict(build) if isinstance(build, Mapping) else {}


def build_options(backend: str, options: Any) -> dict[str, Any]:
    """model.build of the preset ``backend`` checked as validate checks it, its declared
    defaults filled in (R1.3)."""
    check = Checker(Path(f"the {backend} preset"), EXPERIMENT)
    _build_options(check, backend, options or {})
    if check.problems:
        raise ProtocolError("\n".join(check.problems), rule="R1.3")
    declared = BUILD_OPTIONS[backend]["properties"]
    return {**{k: v.get("default") for k, v in declared.items()}, **(options or {})}


def _fixed(check: Checker, value: Any, knob: str) -> dict[str, Any]:
    given = check.section("fixed", value)
    if knob in given:
        check.fail(
            f"fixed.{knob}",
            f"'{knob}' is the declared knob and cannot also be fixed",
            "remove it from fixed; each variant sets it",
            rule="R2.1",
        )
    fixed = {**SETTING_DEFAULTS, **given}
    fixed.pop(knob, None)
    for key in SETTING_KEYS:
        if key != knob and key not in fixed:
            fix = "declare it so every variant applies the same value"
            check.fail(f"fixed.{key}", "missing", fix, rule="R2.1")
    return {k: check.value(f"fixed.{k}", fixed[k], SETTINGS[k]) for k in SETTING_KEYS if k in fixed}


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
                message = f"a variant may set only the declared knob '{knob}'"
                check.fail(f"{where}.{key}", message, hint, rule="R2.1")
        variant_id = check.field(f"{where}.id", entry)
        if knob not in entry:
            fix = f"give this variant its value of '{knob}'"
            check.fail(f"{where}.{knob}", "missing", fix, rule="R2.1")
            continue
        failures = len(check.found)
        knob_value = check.value(f"{where}.{knob}", entry[knob], SETTINGS[knob])
        if all(k in fixed for k in SETTING_KEYS if k != knob):
            if len(check.found) != failures:  # its stand-in value (batch 1) is nobody's value
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
        fix = "each variant needs its own value"
        check.fail("variants", f"two variants set {knob} = {knob_value}", fix, rule="R2.1")
    return variants


def _timing(check: Checker, value: Any, seed: Any) -> TimingSpec:
    timing = check.section("timing", value)
    spec = check.fields("timing", timing, "scope", "warmup_iterations", "repeats", "order")
    order_seed = timing.get("order_seed")
    if spec["order"] == "drawn" and order_seed is None:
        order_seed = seed  # drawn in advance from the published seed (R3.4)
    if order_seed is not None:
        order_seed = check.value("timing.order_seed", order_seed, SEED)
    reason = _repeats_reason(check, spec["repeats"], timing.get("repeats_reason"))
    return TimingSpec(**spec, order_seed=order_seed, repeats_reason=reason)


def _pricing(check: Checker, value: Any) -> PricingSpec | None:
    if not value:
        return None
    pricing = check.section("pricing", value)
    counts = {
        k: None if pricing.get(k) is None else check.field(f"pricing.{k}", pricing)
        for k in ("lots", "gpus")
    }
    if (counts["lots"] is None) == (counts["gpus"] is None):
        message = "give exactly one of 'lots' (billed lots) or 'gpus' (GPUs needed)"
        check.fail("pricing", message, "e.g. lots: 1", rule="R5.1")
    return PricingSpec(
        offers=check.path("pricing.offers", pricing.get("offers")),
        **check.fields("pricing", pricing, "offer", "days"),
        **counts,
    )
