"""Input rules of the experiment's fields: identifiers, seeds, repeats, formats."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from gpubench_nb.protocol import schema

ATTENTION_BACKENDS = ("minilm", "hf", "causal_lm")  # the backends whose model is transformers'
CPU_QUANTIZATIONS = ("int8_dynamic",)  # torch.ao dynamic int8 of the Linear layers, CPU only
# Identifiers name folders and files: matched whole (re.fullmatch: `$` would let a trailing
# newline through), and short enough that "<id>" plus a prefix fits a 255-byte file name.
_ID_PATTERN = re.compile(schema.ID_PATTERN)  # with fullmatch: no trailing newline
MAX_ID_LENGTH = 100
# The seed feeds numpy, scikit-learn (random_state) and torch.manual_seed: numpy and
# scikit-learn take 0 <= seed < 2**32, the narrowest of the three (torch takes < 2**63).
MAX_SEED = 2**32 - 1
MIN_REPEATS = 5  # R3.4: each variant measured five times
_SUFFIX_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}


class Checker(Protocol):
    """What these rules use of ``experiment.Checker``: collect a problem, read a value."""

    def fail(self, where: str, message: str, fix: str, rule: str | None = None) -> None: ...
    def text(self, where: str, value: Any) -> str: ...
    def integer(self, where: str, value: Any, minimum: int) -> int: ...


def identifier(check: Checker, where: str, value: Any) -> str:
    """An experiment or variant ID: a safe file name, matched whole, of bounded length."""
    text = check.text(where, value)
    if text and not _ID_PATTERN.fullmatch(text):
        check.fail(
            where,
            f"{text!r} has characters unsafe in a folder name (or surrounding whitespace, or a "
            "line break)",
            "use letters, digits, '_', '.', '-', starting with a letter or digit",
        )
    elif len(text) > MAX_ID_LENGTH:
        check.fail(
            where,
            f"{len(text)} characters, longer than {MAX_ID_LENGTH} (it names folders and files)",
            f"shorten it to at most {MAX_ID_LENGTH} characters",
        )
    return text


def seed(check: Checker, where: str, value: Any) -> int:
    """R1.1: the published seed, in the range every generator it feeds accepts."""
    seed = check.integer(where, value, 0)
    if seed > MAX_SEED:
        check.fail(
            where,
            f"{seed} is too large for the generators it seeds (numpy and scikit-learn take "
            f"0 <= seed < 2**32)",
            f"use a whole number from 0 to {MAX_SEED}",
            rule="R1.1",
        )
    return seed


def repeats_reason(check: Checker, repeats: int, value: Any) -> str | None:
    """R3.4 asks for five repeats: fewer are allowed only with a stated reason (then reported)."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        check.fail("timing.repeats_reason", f"must be free text, got {value!r}", "write a reason")
        return None
    reason = value.strip() if isinstance(value, str) else None
    if repeats < MIN_REPEATS and reason is None:
        check.fail(
            "timing.repeats",
            f"{repeats} repeats, fewer than the {MIN_REPEATS} the protocol asks for",
            f"use repeats: {MIN_REPEATS}, or say why in timing.repeats_reason (it is frozen in "
            "the lock and printed in the report)",
            rule="R3.4",
        )
    return reason


def one_format(check: Checker, fmt: str, splits: Mapping[str, Path | None]) -> None:
    """One ``corpus.format`` reads every split (``path`` is the eval file, then ``train``,
    ``tune``). When every file's suffix names the same other format, the fix is the format
    itself, said first; otherwise each odd file is named with its own fix (R1.1)."""
    looks = {
        split: _SUFFIX_FORMATS.get(path.suffix.lower())
        for split, path in splits.items()
        if path is not None
    }
    odd = {split: kind for split, kind in looks.items() if kind is not None and kind != fmt}
    if not odd:
        return
    named = [split for split, kind in looks.items() if kind is not None]
    kinds = set(odd.values())
    if len(kinds) == 1 and set(odd) == set(named):
        kind = kinds.pop()
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


def optimisation_problems(settings: Any, backend: str) -> list[tuple[str, str, str]]:
    """``(setting, problem, fix)`` for each way of running the model that ``backend`` or the
    declared device cannot run (R2.1), decided from the declaration alone; what depends on
    this machine's packages and GPU is checked by ``engine.optimise.unrunnable``."""
    found = []
    device, scheme, attention = settings.device, settings.quantization, settings.attention
    if attention != "auto" and backend not in ATTENTION_BACKENDS:
        found.append(
            (
                "attention",
                f"backend {backend} has no transformers attention to choose",
                f"use attention: auto, or a backend among {', '.join(ATTENTION_BACKENDS)}",
            )
        )
    if attention == "flash_attention_2" and (device == "cpu" or settings.precision == "fp32"):
        found.append(
            ("attention", "flash_attention_2 runs on CUDA in fp16 or bf16 only", "use sdpa")
        )
    if scheme in CPU_QUANTIZATIONS and (device.startswith("cuda") or settings.precision != "fp32"):
        found.append(
            (
                "quantization",
                f"{scheme} (torch.ao dynamic quantisation) runs fp32 models on the CPU only",
                "declare device: cpu and precision: fp32, or a torchao scheme on CUDA",
            )
        )
    if scheme not in ("none", *CPU_QUANTIZATIONS) and device == "cpu":
        found.append(
            (
                "quantization",
                f"{scheme} (torchao) is run on CUDA devices here",
                "declare a CUDA device, or int8_dynamic on the CPU",
            )
        )
    if scheme == "int4_weight_only" and settings.precision != "bf16":
        found.append(("quantization", "int4_weight_only packs bf16 weights", "fix precision bf16"))
    return found
