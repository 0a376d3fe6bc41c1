"""The declared experiment as frozen dataclasses, and the vocabulary its YAML may use (R1.3)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, make_dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpubench_nb.errors import ProtocolError
from gpubench_nb.protocol import schema
from gpubench_nb.protocol.capabilities import (
    BACKEND_SPECS,
    BACKENDS_BY_NAME,
    OPTIMISATIONS,
    SETTING_SPECS,
    declaration,
)
from gpubench_nb.protocol.experiment_rules import MAX_ID_LENGTH, MAX_SEED, MIN_REPEATS
from gpubench_nb.protocol.prompting import PROMPT

METRICS = ("macro_f1", "accuracy", "weighted_f1")  # acceptance.quality_score computes each
# A quality value equal to its bound must not fail by float rounding (F1 values are ratios of
# counts); 1e-12 is far below any difference one item can make on 10^6 items (R1.5).
QUALITY_SLACK = 1e-12
BACKENDS = tuple(BACKENDS_BY_NAME)  # model.backend; engine.backends.registry: its code (R2.1)
PRESET_BACKENDS = tuple(b.name for b in BACKEND_SPECS if b.preset)  # built by build-model
# R3.1: what the timer covers, stated once; the text goes to the `notes` column.
SCOPES: Mapping[str, str] = {
    "processing": (
        "timer covers forward passes + argmax over pre-tokenised batches in corpus order, "
        "device synchronised before start and after end; reading, tokenisation, batch "
        "building with the host-to-device copy of the whole corpus's batches, and writing "
        "predictions excluded; attention in transformers may synchronise the device once per "
        "forward, which the timer includes"
    ),
    "end_to_end": (
        "timer covers reading the corpus file, tokenisation, batch building, forward passes "
        "+ argmax and writing predictions.jsonl, device synchronised before start and after end"
    ),
}
ORDERS = ("alternating", "drawn")
PACKAGE_DAYS = (3, 7, 30)
OUTPUT_FORMATS = ("predictions_jsonl",)
SEED = schema.integer("0 <= seed < 2**32 (numpy, scikit-learn, torch)", 0, maximum=MAX_SEED)
IDENTIFIER = schema.text("letters, digits, _ . - (names folders)", pattern=schema.ID_PATTERN,
                         maxLength=MAX_ID_LENGTH)  # fmt: skip
# The settings an experiment may vary; exactly one of them is the declared knob (R2.1).
SETTINGS: Mapping[str, Any] = {s.name: declaration(s) for s in SETTING_SPECS}
SETTING_KEYS = tuple(SETTINGS)
SETTING_DEFAULTS = {s.name: s.default for s in SETTING_SPECS if "default" in s.values}
# model.build of each backend (R1.4: chosen on tune only); build-model fills in the defaults.
BUILD_OPTIONS: Mapping[str, Any] = {b.name: b.build for b in BACKEND_SPECS}


_MODEL = schema.section("the model measured and how build-model makes a preset", {
    "backend": schema.enum("bow and minilm are built here; hf, causal_lm brought", BACKENDS),
    "path": schema.text("the model folder (build-model writes presets there)"),
    "build": {"type": "object", "description": "options of the preset, per backend below"},
    "prompt": PROMPT,
}, required=("backend", "path"))  # fmt: skip
_MODEL["allOf"] = [
    {"if": {"properties": {"backend": {"const": b}}}, "then": {"properties": {"build": s}}}
    for b, s in BUILD_OPTIONS.items()
]
_TIMING = {
    "scope": schema.enum("what the timer covers (R3.1): " + "; ".join(SCOPES), SCOPES),
    "warmup_iterations": schema.integer("untimed passes before a warm run's timed one (R3.4)"),
    "repeats": schema.integer("cold and warm runs per variant (R3.4)", default=MIN_REPEATS),
    "repeats_reason": schema.text("why fewer than five repeats (R3.4); in the report"),
    "order": schema.enum("runs interleaved, or blocks drawn from the seed", ORDERS,
                         default="alternating"),
    "order_seed": {**SEED, "description": "seed of a drawn order (default: seed)"},
}  # fmt: skip
# The experiment YAML (R1.3): every key, its kind and default. experiment.Checker reads it.
EXPERIMENT = schema.section(
    "The experiment YAML (`parameters/demo.yaml`): declared and frozen before any run (R1.3).",
    {
        "experiment_id": {**IDENTIFIER, "description": "names the bundle, outputs/<id>/"},
        "notes": {"type": "string", "description": "free text for the report (not frozen)"},
        "seed": {**SEED, "description": "the published seed of builds and drawn orders (R1.1)"},
        "corpus": schema.section("the evaluation corpus and the splits presets build on", {
            "path": schema.text("the evaluation corpus, JSONL or CSV"),
            "format": schema.enum("jsonl or csv (default: from the suffix)", ("jsonl", "csv")),
            "id_field": schema.text("the column or key of item ids (R1.2)", default="id"),
            "text_field": schema.text("the column or key of texts", default="text"),
            "label_field": schema.text("the column or key of gold labels", default="label"),
            "train": schema.text("build-model trains on it; disjoint from eval (R1.4)"),
            "tune": schema.text("build-model chooses on it; disjoint from eval (R1.4)"),
        }, required=("path",)),  # fmt: skip
        "classes": {"type": "array", "items": schema.text("a label"), "minItems": 2,
                    "uniqueItems": True, "description": "every label, each once"},
        "output_format": schema.enum("what a run writes (R1.5)", OUTPUT_FORMATS,
                                     default=OUTPUT_FORMATS[0]),
        "quality": schema.section("when a run is accepted (R1.3, R1.6)", {
            "metric": schema.enum("the quality measure", METRICS),
            "threshold": schema.fraction("the least value accepted"),
            "tolerance": schema.fraction("the largest drop below the reference variant"),
            "reference_variant": schema.text("a variant id: the tolerance's reference"),
        }, required=("metric", "threshold", "tolerance", "reference_variant")),
        "model": _MODEL,
        "tokenizer": schema.section("the tokenizer folder", {
            "path": schema.text("usually model.path")}, required=("path",)),
        "fixed": schema.section("settings every variant shares; all but the knob", SETTINGS),
        "knob": schema.enum("the one setting the variants change (R2.1)", SETTING_KEYS),
        "variants": {"type": "array", "minItems": 1, "description": "one entry per variant",
                     "items": schema.section("an id and the knob's value (R2.1)", {
                         "id": {**IDENTIFIER, "description": "names runs/<id>/"}, **SETTINGS},
                         required=("id",))},
        "timing": schema.section("how runs are timed (R3)", _TIMING,
                                 required=("scope", "warmup_iterations")),
        "pricing": schema.section("the package priced (R5.1); not frozen: re-price freely", {
            "offers": schema.text("the offers table (parameters/offers.yaml)"),
            "offer": schema.text("an offer id, or its prefix (h100)"),
            "days": schema.enum("whole package length", PACKAGE_DAYS),
            "lots": schema.integer("billed lots (give lots or gpus)"),
            "gpus": schema.integer("GPUs needed; lots = ceil(gpus / gpus_per_lot)"),
        }, required=("offers", "offer", "days")),
    },  # fmt: skip
    required=("experiment_id", "seed", "corpus", "classes", "quality", "model", "tokenizer",
              "fixed", "knob", "variants", "timing"),
)  # fmt: skip


@dataclass(frozen=True)
class CorpusSpec:
    path: Path
    format: str
    id_field: str
    text_field: str
    label_field: str
    train: Path | None
    tune: Path | None


@dataclass(frozen=True)
class QualitySpec:
    metric: str
    threshold: float
    tolerance: float  # the largest allowed drop below the reference variant's value (R1.3)
    reference_variant: str


@dataclass(frozen=True)
class ModelSpec:
    backend: str
    path: Path
    build: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    prompt: Any = None  # causal_lm: a prompting.PromptSpec (template, verbalisations, decision)


@dataclass(frozen=True)
class TokenizerSpec:
    path: Path


def _optimisations(self: Any) -> dict[str, Any]:
    """The settings of how the model is run that differ from their defaults (R2.1)."""
    return {k: getattr(self, k) for k in OPTIMISATIONS if getattr(self, k) != SETTING_DEFAULTS[k]}


# One variant's settings, a field per declared setting: those added after locks were frozen
# default to the value old locks imply (R1.3).
Settings = make_dataclass(
    "Settings",
    [(s.name, Any) for s in SETTING_SPECS if not s.later]
    + [(s.name, Any, field(default=s.old_default)) for s in SETTING_SPECS if s.later],
    frozen=True,
    namespace={"optimisations": _optimisations, "__module__": __name__},
)


@dataclass(frozen=True)
class Variant:
    id: str
    settings: Settings
    knob_value: Any


@dataclass(frozen=True)
class TimingSpec:
    scope: str
    warmup_iterations: int
    repeats: int
    order: str
    order_seed: int | None
    repeats_reason: str | None = None  # why fewer than five repeats (R3.4); reported


@dataclass(frozen=True)
class PricingSpec:
    offers: Path
    offer: str
    days: int
    lots: int | None
    gpus: int | None


@dataclass(frozen=True)
class Experiment:
    source: Path
    experiment_id: str
    notes: str
    seed: int
    corpus: CorpusSpec
    classes: tuple[str, ...]
    output_format: str
    quality: QualitySpec
    model: ModelSpec
    tokenizer: TokenizerSpec
    knob: str
    fixed: Mapping[str, Any]
    variants: tuple[Variant, ...]
    timing: TimingSpec
    pricing: PricingSpec | None
    raw: Mapping[str, Any] = field(repr=False, compare=False, default_factory=dict)

    def variant(self, variant_id: str) -> Variant:
        """The variant called ``variant_id``; a ProtocolError lists the declared ones."""
        for variant in self.variants:
            if variant.id == variant_id:
                return variant
        known = ", ".join(v.id for v in self.variants)
        raise ProtocolError(
            f"{self.source}: no variant '{variant_id}' is declared (declared: {known})",
            rule="R2.1",
        )

    def normalised(self) -> dict[str, Any]:
        """The declaration frozen in the lock (R1.3), as JSON data: paths as declared (a moved
        checkout keeps its lock), without ``notes`` and ``pricing`` (re-pricing is allowed)."""
        declared = {k: v for k, v in self.raw.items() if k not in ("notes", "pricing")}
        corpus = self.raw.get("corpus", {})
        paths = {split: corpus.get(split) for split in ("path", "train", "tune")}
        declared["corpus"] = {**asdict(self.corpus), **paths}
        declared["quality"] = asdict(self.quality)
        declared["output_format"] = self.output_format
        declared["fixed"] = _declared(self.fixed)
        declared["timing"] = asdict(self.timing)
        if self.timing.repeats_reason is None:  # absent key: locks made before it match
            del declared["timing"]["repeats_reason"]
        if self.model.prompt is not None:  # defaults filled in, template hash (R1.3, R2.5)
            declared["model"] = {**declared["model"], "prompt": self.model.prompt.normalised()}
        declared["variants"] = [
            {"id": v.id, **_declared(asdict(v.settings)), self.knob: v.knob_value}
            for v in self.variants
        ]
        return plain_data(declared)


def _declared(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` without the later settings at the value old locks imply: a lock frozen before
    they existed stays the lock of the same experiment (R1.3)."""
    later = {s.name: s.old_default for s in SETTING_SPECS if s.later}
    return {k: v for k, v in settings.items() if k not in later or later[k] != v}


def plain_data(value: Any) -> Any:
    """Mappings and sequences as plain dicts and lists, for JSON and the lock (R1.3)."""
    if isinstance(value, Mapping):
        return {str(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_data(v) for v in value]
    return value
