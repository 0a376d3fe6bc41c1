"""A prompted causal LM's declaration (``model.prompt``): template, verbalisations, decision rule;
frozen in the lock (R1.3), its generation options in run.json and the rows' notes (R2.5)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpubench_nb.protocol import schema
from gpubench_nb.protocol.capabilities import BACKEND_SPECS

PROMPT_BACKENDS = tuple(b.name for b in BACKEND_SPECS if b.prompt)  # classify via model.prompt
PLACEHOLDER = "{text}"
DECISIONS = ("loglik", "generate")
LENGTH_NORMALISATIONS = ("none", "tokens", "chars")
NORMALISE_STEPS = ("strip", "casefold")
_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}
PROMPT = schema.section("causal_lm only: how a causal LM classifies (R1.3, R2.5)", {
    "template": schema.text("the prompt, holding {text} exactly once"),
    "chat_template": schema.flag("the template is the user turn of the chat template",
                                 default=False),
    "verbalisations": {"type": "object", "additionalProperties": schema.text("its answer"),
                       "description": 'class -> the answer meaning it, e.g. games: " games"'},
    "decision": schema.enum("score every class, or generate greedily", DECISIONS,
                            default="loglik"),
    "length_normalisation": schema.enum("loglik: divide by the answer's length",
                                        LENGTH_NORMALISATIONS, default="none"),
    "max_new_tokens": schema.integer("generate: the answer's longest length (required)"),
    "stop": {**_STRINGS, "default": [], "description": "generate: strings ending an answer"},
    "normalise": {"type": "array", "items": {"enum": list(NORMALISE_STEPS)},
                  "default": ["strip"], "description": "generate: steps before matching"},
})  # fmt: skip
GENERATE_ONLY = ("max_new_tokens", "stop", "normalise")
LOGLIK_ONLY = ("length_normalisation",)


@dataclass(frozen=True)
class PromptSpec:
    """``model.prompt`` of a ``causal_lm`` model, validated; verbalisations in class order."""

    template: str
    chat_template: bool
    verbalisations: tuple[str, ...]  # one per declared class, same order
    decision: str  # "loglik" | "generate"
    length_normalisation: str  # loglik: "none" | "tokens" | "chars"
    max_new_tokens: int | None  # generate only
    stop: tuple[str, ...]  # generate only
    normalise: tuple[str, ...]  # generate only: steps applied to answers and verbalisations

    @property
    def template_sha256(self) -> str:
        return hashlib.sha256(self.template.encode("utf-8")).hexdigest()

    def options(self) -> dict[str, Any]:
        """The generation options (R2.5), JSON-able: for the lock, run.json and the notes."""
        options: dict[str, Any] = {
            "decision": self.decision,
            "template_sha256": self.template_sha256,
            "chat_template": self.chat_template,
        }
        if self.decision == "loglik":
            options["length_normalisation"] = self.length_normalisation
        else:
            options.update(
                max_new_tokens=self.max_new_tokens,
                stop=list(self.stop),
                normalise=list(self.normalise),
                greedy=True,
            )
        return options

    def normalised(self) -> dict[str, Any]:
        """The full declaration with defaults filled in, as frozen in the lock (R1.3)."""
        return {
            "template": self.template,
            "verbalisations": list(self.verbalisations),
            **self.options(),
        }

    def note(self) -> str:
        """One line for run.json and the rows' notes (R2.5)."""
        parts = [f"{k}={v}" for k, v in self.options().items()]
        return "R2.5 generation options: " + ", ".join(parts)


def normalise_answer(text: str, steps: tuple[str, ...]) -> str:
    """An answer (or a verbalisation) after the declared normalisation steps, in order."""
    for step in steps:
        text = text.strip() if step == "strip" else text.casefold()
    return text


def parse_prompt(check: Any, value: Any, backend: str, classes: tuple[str, ...]) -> Any:
    """``model.prompt`` validated with ``check`` (``experiment.Checker``): a PromptSpec for
    ``causal_lm``, None for other backends (which must not declare one)."""
    if backend not in PROMPT_BACKENDS:
        if value is not None:
            check.fail(
                "model.prompt",
                f"only backend {' or '.join(PROMPT_BACKENDS)} takes a prompt, not {backend}",
                f"remove model.prompt or declare backend: {PROMPT_BACKENDS[0]}",
                rule="R1.3",
            )
        return None
    if value is None:
        check.fail(
            "model.prompt",
            "missing: a causal_lm classifies through a declared prompt",
            "declare template (with {text}), verbalisations (one per class) and decision",
            rule="R1.3",
        )
        return None
    prompt = check.section("model.prompt", value)
    template = check.text("model.prompt.template", prompt.get("template"))
    if template and template.count(PLACEHOLDER) != 1:
        check.fail(
            "model.prompt.template",
            f"must hold {PLACEHOLDER} exactly once, found {template.count(PLACEHOLDER)} times",
            "write the text's place as {text}; other braces are kept as written",
            rule="R1.3",
        )
    spec = check.fields("model.prompt", prompt, "chat_template", "decision", "length_normalisation")
    for key in GENERATE_ONLY if spec["decision"] == "loglik" else LOGLIK_ONLY:
        if key in prompt:
            fix = "remove it, or change the decision rule"
            check.fail(f"model.prompt.{key}", f"does not apply to decision {spec['decision']}", fix)
    generate = spec["decision"] == "generate"
    if generate and "max_new_tokens" not in prompt:
        check.fail(
            "model.prompt.max_new_tokens",
            "missing for decision generate",
            "declare how many tokens an answer may take, e.g. 8",
            rule="R1.3",
        )
        check.missing.add("model.prompt.max_new_tokens")
    options = (
        check.fields("model.prompt", prompt, "max_new_tokens", "normalise") if generate else {}
    )
    stop = prompt.get("stop", []) if generate else []
    if not isinstance(stop, list) or not all(isinstance(v, str) and v for v in stop):
        check.fail(
            "model.prompt.stop",
            f"must be a list of non-empty strings, got {stop!r}",
            'e.g. ["\\n"]',
        )
    steps = tuple(options.get("normalise", ()))
    return PromptSpec(
        template=template,
        verbalisations=_verbalisations(
            check, prompt.get("verbalisations"), classes, steps, generate
        ),
        **spec,
        max_new_tokens=options.get("max_new_tokens") if "max_new_tokens" in prompt else None,
        stop=tuple(stop) if isinstance(stop, list) else (),
        normalise=steps,
    )


def _verbalisations(
    check: Any, value: Any, classes: tuple[str, ...], steps: tuple[str, ...], generate: bool
) -> tuple[str, ...]:
    where = "model.prompt.verbalisations"
    if not isinstance(value, Mapping):
        check.fail(
            where,
            f"must map each class to its text, got {value!r}",
            'e.g. {admin: " admin", games: " games"}',
            rule="R1.3",
        )
        return ()
    missing = [c for c in classes if c not in value]
    extra = [str(k) for k in value if k not in classes]
    if missing or extra:
        check.fail(
            where,
            f"must name exactly the declared classes: missing {missing}, not declared {extra}",
            "give one verbalisation per class",
            rule="R1.3",
        )
    texts = [value.get(c) for c in classes]
    if not all(isinstance(t, str) and t.strip() for t in texts):
        check.fail(where, "each verbalisation must be a non-empty string", 'e.g. " admin"')
        return ()
    compared = [normalise_answer(t, steps) for t in texts]
    renamed = [c for c, t in zip(classes, compared, strict=True) if normalise_answer(c, steps) != t]
    if generate and renamed:
        # An off-label answer is written as-is: were it a class name that is not that class's
        # verbalisation, acceptance would count it as that class, a mapping nobody declared.
        check.fail(
            where,
            f"with decision generate, each verbalisation must be its class name after "
            f"normalisation {list(steps)}; not so for {renamed}",
            "use the class names as verbalisations (or rename the classes)",
            rule="R1.5",
        )
    same = sorted({t for t in compared if compared.count(t) > 1})
    if same:
        check.fail(
            where,
            f"two classes share the verbalisation(s) {same} (after normalisation {list(steps)})",
            "give each class its own text",
            rule="R1.3",
        )
    return tuple(texts)
