"""The declared experiment as frozen dataclasses, and the vocabulary its YAML may use (R1.3)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpubench_nb.errors import ProtocolError

METRICS = ("macro_f1", "accuracy", "weighted_f1")  # acceptance.quality_score computes each
# The one list of model.backend names; engine.backends.registry maps each to its code (R2.1).
PRESET_BACKENDS = ("bow", "minilm")  # built by build-model from the seed
USER_BACKENDS = ("hf", "causal_lm")  # a folder the user brings (model.path)
BACKENDS = PRESET_BACKENDS + USER_BACKENDS
PROMPT_BACKENDS = ("causal_lm",)  # classify through the declared model.prompt (R2.5)
PRECISIONS = ("fp32", "fp16", "bf16")
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
BATCHINGS = ("corpus_order", "length_sorted")
PACKAGE_DAYS = (3, 7, 30)
OUTPUT_FORMATS = ("predictions_jsonl",)
# How the model is run (R2.1): a torch.compile mode, the attention implementation of a
# transformers model, a weight quantisation scheme, the CPU threads ("auto" = torch's own).
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
ATTENTIONS = ("auto", "eager", "sdpa", "flash_attention_2")
ATTENTION_BACKENDS = ("minilm", "hf", "causal_lm")  # the backends whose model is transformers'
QUANTIZATIONS = ("none", "int8_dynamic", "int8_weight_only", "int4_weight_only", "fp8")
CPU_QUANTIZATIONS = ("int8_dynamic",)  # torch.ao dynamic int8 of the Linear layers, CPU only
# The settings an experiment may vary; exactly one of them is the declared knob (R2.1).
SETTING_KEYS = ("precision", "context", "batch", "device", "batching")
SETTING_KEYS += ("compile", "attention", "quantization", "threads")
# Settings added after locks were frozen: left out of the lock at their default (R1.3).
LATER_DEFAULTS: Mapping[str, Any] = {
    "compile": "none",
    "attention": "auto",
    "quantization": "none",
    "threads": "auto",
}
SETTING_DEFAULTS: Mapping[str, Any] = {"device": "auto", "batching": "corpus_order"}
SETTING_DEFAULTS = {**SETTING_DEFAULTS, **LATER_DEFAULTS}


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


@dataclass(frozen=True)
class Settings:
    precision: str
    context: int
    batch: int
    device: str
    batching: str
    compile: str = "none"
    attention: str = "auto"
    quantization: str = "none"
    threads: int | str = "auto"

    def optimisations(self) -> dict[str, Any]:
        """The settings of how the model is run that differ from their defaults (R2.1)."""
        return {k: getattr(self, k) for k, v in LATER_DEFAULTS.items() if getattr(self, k) != v}


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
        """The declaration that is frozen (R1.3): everything measured depends on, as JSON data.

        Paths stay as declared (relative to the YAML), so a moved checkout keeps its lock.
        ``notes`` and ``pricing`` are left out: re-pricing a finished bundle is allowed.
        """
        declared = {k: v for k, v in self.raw.items() if k not in ("notes", "pricing")}
        corpus = self.raw.get("corpus", {})
        declared["corpus"] = {
            "path": corpus.get("path"),
            "format": self.corpus.format,
            "id_field": self.corpus.id_field,
            "text_field": self.corpus.text_field,
            "label_field": self.corpus.label_field,
            "train": corpus.get("train"),
            "tune": corpus.get("tune"),
        }
        declared["quality"] = {
            "metric": self.quality.metric,
            "threshold": self.quality.threshold,
            "tolerance": self.quality.tolerance,
            "reference_variant": self.quality.reference_variant,
        }
        declared["output_format"] = self.output_format
        declared["fixed"] = _declared(self.fixed)
        declared["timing"] = {
            "scope": self.timing.scope,
            "warmup_iterations": self.timing.warmup_iterations,
            "repeats": self.timing.repeats,
            "order": self.timing.order,
            "order_seed": self.timing.order_seed,
        }
        if self.timing.repeats_reason is not None:  # absent key: locks made before it match
            declared["timing"]["repeats_reason"] = self.timing.repeats_reason
        if self.model.prompt is not None:  # defaults filled in, template hash (R1.3, R2.5)
            declared["model"] = {**declared["model"], "prompt": self.model.prompt.normalised()}
        declared["variants"] = [
            {"id": v.id, **_settings_dict(v.settings), self.knob: v.knob_value}
            for v in self.variants
        ]
        return plain_data(declared)


def _declared(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` without the later settings at their default: a lock frozen before they
    existed stays the lock of the same experiment (R1.3)."""
    return {k: v for k, v in settings.items() if k not in LATER_DEFAULTS or LATER_DEFAULTS[k] != v}


def _settings_dict(settings: Settings) -> dict[str, Any]:
    return _declared({key: getattr(settings, key) for key in SETTING_KEYS})


def plain_data(value: Any) -> Any:
    """Mappings and sequences as plain dicts and lists, for JSON and the lock (R1.3)."""
    if isinstance(value, Mapping):
        return {str(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_data(v) for v in value]
    return value
