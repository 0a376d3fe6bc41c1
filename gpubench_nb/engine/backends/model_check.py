"""What `validate` checks of a model folder the user brings (hf, causal_lm), weights unloaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench_nb.engine.backends.hf import WEIGHT_PATTERNS, max_context, pad_id_problem
from gpubench_nb.engine.backends.prompts import PromptTokenizer
from gpubench_nb.engine.backends.registry import backend_entry
from gpubench_nb.engine.backends.tokenization import TOKENIZER_FILES, TextTokenizer
from gpubench_nb.errors import BackendError


def _missing(model_dir: Path, tokenizer_dir: Path) -> list[str]:
    """Each thing the declared folders lack, as a sentence naming the field."""
    problems = []
    if not model_dir.is_dir():
        problems.append(f"model.path {model_dir} is not an existing folder")
    else:
        if not (model_dir / "config.json").is_file():
            problems.append(f"model.path {model_dir} holds no config.json")
        if not any(p for pattern in WEIGHT_PATTERNS for p in model_dir.glob(pattern)):
            problems.append(
                f"model.path {model_dir} holds no weights ({', '.join(WEIGHT_PATTERNS)})"
            )
    if not tokenizer_dir.is_dir():
        problems.append(f"tokenizer.path {tokenizer_dir} is not an existing folder")
    elif not any((tokenizer_dir / name).is_file() for name in TOKENIZER_FILES):
        problems.append(f"tokenizer.path {tokenizer_dir} holds no tokenizer file (tokenizer.json)")
    return problems


def check_declared_model(exp: Any) -> list[str]:
    """Lines for `validate` about the declared model folder, or a BackendError listing every
    missing file and how to provide it (R1.1: weights are never downloaded at run time)."""
    entry = backend_entry(exp.model.backend)  # the registry says what to check
    if entry.preset:
        return []
    model_dir, tokenizer_dir = Path(exp.model.path), Path(exp.tokenizer.path)
    problems = _missing(model_dir, tokenizer_dir)
    if problems:
        kind = "causal LM" if entry.prompt else "sequence classifier"
        raise BackendError(
            f"{exp.source}: the model folder is not ready: {'; '.join(problems)}. Fix: put a "
            f"local Hugging Face {kind} folder there (config.json, *.safetensors, "
            "tokenizer.json), downloaded once on a machine with network, e.g. "
            "`huggingface-cli download <repo> --local-dir <folder>`, and write its path in "
            "model.path and tokenizer.path (relative to the YAML or absolute)",
            rule="R1.1",
        )
    lines = [f"model files config.json + weights in {model_dir}; tokenizer in {tokenizer_dir}"]
    if entry.prompt:
        return lines + _prompt_lines(exp, model_dir, tokenizer_dir)
    # a sequence classifier: its pad id must be a token id of the model (R2.1)
    problem = pad_id_problem(_config(model_dir).get_text_config(), model_dir)
    if problem is not None:
        raise BackendError(problem, rule="R2.1")
    return lines


def _config(model_dir: Path) -> Any:
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise BackendError(f"cannot read {model_dir}/config.json: {exc}", rule="R1.1") from exc


def _prompt_lines(exp: Any, model_dir: Path, tokenizer_dir: Path) -> list[str]:
    """How the declared prompt tokenises with this tokenizer, and whether contexts fit."""
    prompt = exp.model.prompt
    tokenizer = TextTokenizer(tokenizer_dir)
    prompts = PromptTokenizer(tokenizer, prompt)
    limit = max_context(_config(model_dir), tokenizer)
    for context in sorted({v.settings.context for v in exp.variants}):
        prompts.check_context(context, limit, prompts.tokens_after)
    if prompt.decision == "loglik":
        path = (
            "fast path: every verbalisation is one distinct token, one forward per text"
            if prompts.fast_path
            else "general path: every (text, class) pair is scored"
        )
        sizes = ", ".join(
            f"{c}={len(t)}" for c, t in zip(exp.classes, prompts.continuations, strict=True)
        )
        rule = f"loglik ({path}); verbalisation tokens {sizes}"
    else:
        rule = f"generate (greedy, max_new_tokens {prompt.max_new_tokens}, stop {prompt.stop})"
    return [
        f"prompt      {prompts.prompt_tokens} tokens around each text, template sha256 "
        f"{prompt.template_sha256[:12]}, chat template {'on' if prompt.chat_template else 'off'}",
        f"decision    {rule}",
        f"context     fits the model's {limit} positions" if limit else "context     unbounded",
    ]
