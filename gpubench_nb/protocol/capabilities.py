"""What can be declared, once (R2.1): every setting a variant may apply and every model.backend,
each one entry that validate, the schema, the run and the report read. A new knob or runtime is
one `Setting` here plus the engine function its `apply` names (this package never imports the
engine: it is named by ``module:function``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpubench_nb.protocol import schema

_ENGINE = "gpubench_nb.engine"
_ANY: tuple[str, ...] = ()  # every backend


@dataclass(frozen=True)
class Needs:
    """``values`` of a setting run only where the setting ``on`` is one of ``allowed``; for
    ``device`` its type (cpu, cuda), ``auto`` judged where it runs (engine.optimise)."""

    values: tuple[Any, ...]
    on: str
    allowed: tuple[Any, ...]
    problem: str  # "{value}" is the value refused
    fix: str


@dataclass(frozen=True)
class Setting:
    """One setting of a variant (R2.1): the declaration of its values (JSON Schema, with the
    default), the value a lock frozen before it existed implies (``old_default``: left out of
    the lock at that value, R1.3), whether it is how the model is run (``optimisation``: applied
    after the timed load, timed apart, R3.2), the backends where a value other than the default
    applies, the conditions of its values, the packages they import and the engine function
    that applies it (``module:function``, called with an ``engine.optimise.Step``)."""

    name: str
    values: Mapping[str, Any]
    old_default: Any = None  # None: every lock declares it
    optimisation: bool = False
    backends: tuple[str, ...] = _ANY
    backend_problem: str = "backend {backend} cannot apply it"
    needs: tuple[Needs, ...] = ()
    packages: Mapping[Any, tuple[str, str]] = field(default_factory=dict)  # value: (module, pip)
    apply: str | None = None
    check: str | None = None  # engine ``module:function(settings, device) -> [problems]``

    @property
    def default(self) -> Any:
        return self.values.get("default")

    @property
    def later(self) -> bool:
        """Added after locks were frozen: left out of the lock at ``old_default`` (R1.3)."""
        return self.old_default is not None


@dataclass(frozen=True)
class BackendSpec:
    """One model.backend (R2.1): built here from the seed (``preset``, its ``build`` options,
    R1.4) or a folder the user brings, classifying through model.prompt (R2.5) or not, a
    transformers model (attention applies) or not; its code is ``module_name`` (``BACKEND``,
    ``model_files``), imported only when asked (engine.backends.registry)."""

    name: str
    preset: bool
    build: Mapping[str, Any]
    prompt: bool = False
    transformers: bool = False

    @property
    def module_name(self) -> str:
        return f"{_ENGINE}.backends.{self.name}"

    def values(self, setting: str, device: str) -> tuple[Any, ...]:
        """The values of ``setting`` this backend can run on ``device`` (cpu, cuda) as declared
        (R2.1): e.g. its quantisations on the CPU."""
        s = SETTINGS_BY_NAME[setting]
        declared = tuple(s.values.get("enum", ()))
        if s.backends and self.name not in s.backends:
            return (s.default,)
        needs = [n for n in s.needs if n.on == "device" and device not in n.allowed]
        return tuple(v for v in declared if not any(v in n.values for n in needs))


_LIMIT = {"type": ["integer", "null"], "minimum": 1, "default": None}
_PRESET = {
    "train_limit": {**_LIMIT, "description": "train items used (null: all)"},
    "tune_limit": {**_LIMIT, "description": "tune items used (null: all)"},
    "subset": schema.enum("which items a limit keeps", ("stratified", "first"),
                          default="stratified"),
}  # fmt: skip
# model.build of each preset (R1.4: chosen on tune only); build-model fills in the defaults.
BACKEND_SPECS = (
    BackendSpec("bow", True, schema.section(
        "bow preset: EmbeddingBag + linear head, trained in seconds", {
            "dim": schema.integer("embedding size", default=64),
            "max_epochs": schema.integer("epochs tried; the best on tune is kept", default=8),
            "learning_rate": schema.positive("Adam's learning rate", default=0.05),
            "train_batch": schema.integer("texts per training step", default=256),
            **_PRESET})),
    BackendSpec("minilm", True, schema.section(
        "minilm preset: MiniLM mean pooling + logistic head", {
            "c_grid": {"type": "array", "minItems": 1, "items": schema.positive("a C"),
                       "default": [0.1, 1.0, 10.0, 100.0, 1000.0],
                       "description": "C values tried; the best on tune is kept"},
            "max_iter": schema.integer("logistic regression iterations", default=2000),
            "embed_batch": schema.integer("texts per embedding batch", default=32),
            "device": schema.text("where the build embeds: auto, cpu, cuda", default="auto"),
            **_PRESET}), transformers=True),
    BackendSpec("hf", False, schema.section("hf: a folder you bring; nothing to build", {}),
                transformers=True),
    BackendSpec("causal_lm", False,
                schema.section("causal_lm: a folder you bring; nothing to build", {}),
                prompt=True, transformers=True),
)  # fmt: skip
BACKENDS_BY_NAME = {b.name: b for b in BACKEND_SPECS}
TRANSFORMERS_BACKENDS = tuple(b.name for b in BACKEND_SPECS if b.transformers)
_TORCHAO = ("int8_weight_only", "int4_weight_only", "fp8")
_TORCHAO_PIP = ("torchao", "pip install torchao")
_OPTIMISE = f"{_ENGINE}.optimise"

# Every setting of a variant, in the order the engine applies the optimisations (R2.1).
SETTING_SPECS = (
    Setting("precision", schema.enum("weights and activations (a study of its own, R2.2)",
                                     ("fp32", "fp16", "bf16"))),
    Setting("context", schema.integer("tokens per text; longer texts are cut (R2.3)")),
    Setting("batch", schema.integer("texts per forward pass")),
    Setting("device", schema.text("auto, cpu, cuda or cuda:N", pattern=r"^(auto|cpu|cuda(:\d+)?)$",
                                  default="auto")),
    Setting("batching", schema.enum("corpus_order, or length_sorted (less padding)",
                                    ("corpus_order", "length_sorted"), default="corpus_order")),
    Setting(
        "attention",
        schema.enum("attention implementation of a transformers model (auto: its own)",
                    ("auto", "eager", "sdpa", "flash_attention_2"), default="auto"),
        old_default="auto", optimisation=True, backends=TRANSFORMERS_BACKENDS,
        backend_problem="backend {backend} has no transformers attention to choose",
        needs=(
            Needs(("flash_attention_2",), "device", ("cuda",),
                  "{value} runs on CUDA in fp16 or bf16 only", "use sdpa"),
            Needs(("flash_attention_2",), "precision", ("fp16", "bf16"),
                  "{value} runs on CUDA in fp16 or bf16 only", "use sdpa"),
        ),
        packages={"flash_attention_2": ("flash_attn", "pip install flash-attn")},
        apply=f"{_OPTIMISE}:apply_attention",
    ),
    Setting(
        "quantization",
        schema.enum("weight quantisation scheme", ("none", "int8_dynamic", *_TORCHAO),
                    default="none"),
        old_default="none", optimisation=True,
        needs=(
            Needs(("int8_dynamic",), "device", ("cpu",),
                  "{value} (torch.ao dynamic quantisation) runs fp32 models on the CPU only",
                  "declare device: cpu and precision: fp32, or a torchao scheme on CUDA"),
            Needs(("int8_dynamic",), "precision", ("fp32",),
                  "{value} (torch.ao dynamic quantisation) runs fp32 models on the CPU only",
                  "declare device: cpu and precision: fp32, or a torchao scheme on CUDA"),
            Needs(_TORCHAO, "device", ("cuda",), "{value} (torchao) is run on CUDA devices here",
                  "declare a CUDA device, or int8_dynamic on the CPU"),
            Needs(("int4_weight_only",), "precision", ("bf16",),
                  "{value} packs bf16 weights", "fix precision bf16"),
        ),
        packages=dict.fromkeys(_TORCHAO, _TORCHAO_PIP),
        apply=f"{_OPTIMISE}:apply_quantization", check=f"{_OPTIMISE}:fp8_capability",
    ),
    Setting(
        "compile",
        schema.enum("torch.compile mode, or none", ("none", "default", "reduce-overhead",
                    "max-autotune", "max-autotune-no-cudagraphs"), default="none"),
        old_default="none", optimisation=True,
        apply=f"{_OPTIMISE}:apply_compile", check=f"{_OPTIMISE}:compiler_present",
    ),
    Setting(
        "threads",
        {"anyOf": [{"const": "auto"}, {"type": "integer", "minimum": 1}], "default": "auto",
         "description": "CPU threads torch uses (auto: torch's own choice)"},
        old_default="auto", optimisation=True,  # applied at process start (engine.optimise)
    ),
)  # fmt: skip
SETTINGS_BY_NAME = {s.name: s for s in SETTING_SPECS}
OPTIMISATIONS = tuple(s.name for s in SETTING_SPECS if s.optimisation)


def declaration(s: Setting) -> dict[str, Any]:
    """The JSON Schema of ``s``'s values, its description saying where each value runs."""
    where = {", ".join(n.values): "/".join(n.allowed) for n in s.needs if n.on == "device"}
    said = "; ".join(f"{values}: {devices}" for values, devices in where.items())
    description = s.values["description"] + (f" ({said})" if said else "")
    return {**s.values, "description": description}


def _device_type(device: str) -> str:
    return "cuda" if device.startswith("cuda") else device


def refusals(
    settings: Any, backend: str, specs: tuple[Setting, ...] = SETTING_SPECS
) -> list[tuple[str, str, str]]:
    """``(setting, problem, fix)`` for each declared value that ``backend``, the device or
    another setting rules out (R2.1), read from the declarations; engine.optimise checks the
    machine (packages, compiler, GPU)."""
    found = []
    for s in specs:
        value = getattr(settings, s.name)
        if value == s.default:
            continue
        if s.backends and backend not in s.backends:
            fix = f"use {s.name}: {s.default}, or a backend among {', '.join(s.backends)}"
            found.append((s.name, s.backend_problem.format(backend=backend), fix))
        for n in s.needs:
            other = getattr(settings, n.on)
            other = _device_type(other) if n.on == "device" else other
            if value in n.values and other != "auto" and other not in n.allowed:
                found.append((s.name, n.problem.format(value=value), n.fix))
    return list(dict.fromkeys(found))
