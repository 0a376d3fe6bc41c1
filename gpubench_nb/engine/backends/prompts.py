"""A declared prompt around each text, tokenised whole; truncation cuts the text only (R2.3).

The prompt (optionally in the chat template) is split once around ``{text}``; a text too long
for the context is cut at a token boundary, the prompt kept whole and the dropped tokens counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpubench_nb.engine.backends.base import Tokenized
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.prompting import PLACEHOLDER

_SENTINEL = "\u2063GPUBENCH_TEXT\u2063"  # invisible separator: no chat template rewrites it


class PromptTokenizer:
    """Renders and tokenises prompts for one tokenizer (a TextTokenizer) and PromptSpec."""

    def __init__(self, tokenizer: Any, prompt: Any) -> None:
        self.tokenizer = tokenizer
        self.prompt = prompt
        if not getattr(tokenizer.hf, "is_fast", False):
            raise BackendError(
                f"tokenizer.path {tokenizer.path}: backend causal_lm needs a fast tokenizer "
                "(tokenizer.json) to keep the prompt whole when a text is cut (R2.3); save the "
                "tokenizer with transformers' fast class",
                rule="R2.3",
            )
        from tokenizers import Tokenizer

        # a private copy: the shared Rust tokenizer may carry padding/truncation state
        self.fast = Tokenizer.from_str(tokenizer.hf.backend_tokenizer.to_str())
        self.fast.no_padding()
        self.fast.no_truncation()
        self.prefix, self.suffix = self._split(prompt)
        # A chat template writes its special tokens itself; a plain prompt gets the tokenizer's.
        self.add_special_tokens = not prompt.chat_template
        self.prompt_tokens = len(self._encode([self.prefix + self.suffix])[0].ids)
        loglik = prompt.decision == "loglik"  # generated answers are compared as text
        self.continuations = [self._continuation(v) for v in prompt.verbalisations if loglik]
        self._check_distinct()
        conts = self.continuations  # loglik: one forward per text when each is one distinct token
        self.fast_path = bool(conts) and len({tuple(c) for c in conts if len(c) == 1}) == len(conts)
        # tokens scored or generated after the context
        self.tokens_after = max(map(len, conts)) if conts else prompt.max_new_tokens

    def _check_distinct(self) -> None:
        """Refuse verbalisations the model cannot tell apart (R1.5): the same tokens, an unknown
        token, or (generate) equal after normalisation."""
        verbalisations = self.prompt.verbalisations
        if self.prompt.decision == "loglik":
            keys = [tuple(c) for c in self.continuations]
            unk = self.tokenizer.hf.unk_token_id
            unknown = [
                f"{v!r} -> {self._shown(c)}"
                for v, c in zip(verbalisations, keys, strict=True)
                if unk is not None and unk in c
            ]
            if unknown:
                raise BackendError(
                    "model.prompt.verbalisations: the tokenizer reads "
                    f"{'; '.join(unknown)}: the unknown token "
                    f"{self.tokenizer.hf.unk_token!r} stands for any unseen text, so the class "
                    "is not what is scored. Fix: write the verbalisation with characters the "
                    "tokenizer knows",
                    rule="R1.5",
                )
        else:
            steps = self.prompt.normalise
            from gpubench_nb.protocol.prompting import normalise_answer

            keys = [(normalise_answer(v, steps),) for v in verbalisations]
        seen: dict[tuple[Any, ...], str] = {}
        for verbalisation, key in zip(verbalisations, keys, strict=True):
            if key in seen:
                shown = (
                    self._shown(key)
                    if self.prompt.decision == "loglik"
                    else f"{key[0]!r} after normalise {list(self.prompt.normalise)}"
                )
                raise BackendError(
                    f"model.prompt.verbalisations: {seen[key]!r} and {verbalisation!r} are the "
                    f"same to the model ({shown}), so one of the two classes can never be "
                    "predicted and acceptance would be meaningless. Fix: choose verbalisations "
                    "that tokenise differently (validate shows their tokens)",
                    rule="R1.5",
                )
            seen[key] = verbalisation

    def _shown(self, ids: Sequence[Any]) -> str:
        """Token ids with their text: ``[1234 'Ġadmin']``."""
        return "[" + ", ".join(f"{i} {self.fast.id_to_token(i)!r}" for i in ids) + "]"

    def _split(self, prompt: Any) -> tuple[str, str]:
        if not prompt.chat_template:
            prefix, suffix = prompt.template.split(PLACEHOLDER)
            return prefix, suffix
        hf = self.tokenizer.hf
        if not getattr(hf, "chat_template", None):
            raise BackendError(
                f"model.prompt.chat_template is true but the tokenizer at {self.tokenizer.path} "
                "has no chat template; declare chat_template: false or use the model's "
                "instruction-tuned tokenizer",
                rule="R1.3",
            )
        message = prompt.template.replace(PLACEHOLDER, _SENTINEL)
        rendered = hf.apply_chat_template(
            [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
        )
        if rendered.count(_SENTINEL) != 1:
            raise BackendError(
                f"the chat template of {self.tokenizer.path} does not keep the user message "
                "verbatim, so the text cannot be placed; declare chat_template: false and write "
                "the chat markup into model.prompt.template",
                rule="R1.3",
            )
        prefix, suffix = rendered.split(_SENTINEL)
        return prefix, suffix

    def _encode(self, strings: Sequence[str]) -> list[Any]:
        return self.fast.encode_batch(list(strings), add_special_tokens=self.add_special_tokens)

    def _continuation(self, verbalisation: str) -> list[int]:
        """Tokens of (end of prompt + verbalisation) past the end of the prompt's (as
        lm-evaluation-harness splits a continuation)."""
        before = self.fast.encode(self.suffix, add_special_tokens=False).ids
        whole = self.fast.encode(self.suffix + verbalisation, add_special_tokens=False).ids
        if whole[: len(before)] != before or len(whole) == len(before):
            raise BackendError(
                f"model.prompt.verbalisations: {verbalisation!r} merges with the end of the "
                f"prompt {self.suffix[-20:]!r} when tokenised, so its tokens are not defined; "
                "end the template with a separator (e.g. ':' or a newline) or start the "
                "verbalisation with a space",
                rule="R1.3",
            )
        return whole[len(before) :]

    def render(self, text: str) -> str:
        """The full prompt for one text."""
        return self.prefix + text + self.suffix

    def check_context(self, context: int, max_context: int | None, extra_tokens: int) -> None:
        """The context holds the prompt and a text token, and with what is scored or generated
        after it fits the model's positions (R2.3)."""
        if isinstance(context, bool) or not isinstance(context, int):
            raise BackendError(f"context must be an integer, got {context!r}", rule="R2.3")
        if context < self.prompt_tokens + 1:
            raise BackendError(
                f"context {context} cannot hold the prompt ({self.prompt_tokens} tokens, special "
                f"tokens included) and one text token; declare context >= "
                f"{self.prompt_tokens + 1} or shorten model.prompt.template",
                rule="R2.3",
            )
        room = None if max_context is None else max_context - self.prompt_tokens - 1
        if room is not None and extra_tokens > room:
            decision = self.prompt.decision
            what = "max_new_tokens" if decision == "generate" else "the longest verbalisation"
            raise BackendError(
                f"{what} ({extra_tokens} tokens) leaves no context for the text: the model has "
                f"{max_context} positions and the prompt takes {self.prompt_tokens} (+1 text "
                f"token). Fix: declare {what} <= {max(room, 0)}, or shorten the prompt",
                rule="R2.3",
            )
        if max_context is not None and context + extra_tokens > max_context:
            raise BackendError(
                f"context {context} + {extra_tokens} tokens scored or generated after it exceed "
                f"the model's {max_context} positions; declare context <= "
                f"{max_context - extra_tokens}",
                rule="R2.3",
            )

    def tokenize(self, texts: Sequence[str], context: int) -> Tokenized:
        """Prompt + text token IDs per text, at most ``context``, truncation counted (R2.3)."""
        encodings = self._encode([self.render(t) for t in texts])
        ids = [
            list(e.ids) if len(e.ids) <= context else self._cut(text, e, context)
            for text, e in zip(texts, encodings, strict=True)
        ]
        truncated = sum(len(e.ids) > context for e in encodings)
        dropped = sum(len(e.ids) - len(kept) for e, kept in zip(encodings, ids, strict=True))
        return Tokenized(input_ids=ids, truncated_texts=truncated, dropped_tokens=dropped)

    def _cut(self, text: str, encoding: Any, context: int) -> list[int]:
        """The prompt whole around the longest token-aligned start of ``text`` that fits."""
        start, end = len(self.prefix), len(self.prefix) + len(text)
        starts = [
            a - start
            for (a, b), special in zip(encoding.offsets, encoding.special_tokens_mask, strict=True)
            if not special and a >= start and b <= end
        ]
        keep = max(1, len(starts) - (len(encoding.ids) - context))
        while keep >= 1:
            cut = starts[keep] if keep < len(starts) else len(text)
            ids = self._encode([self.render(text[:cut])])[0].ids
            if len(ids) <= context:
                return list(ids)
            keep -= 1
        raise BackendError(  # check_context makes this unreachable for well-formed prompts
            f"a text cannot be cut to fit context {context} with the prompt kept whole",
            rule="R2.3",
        )
