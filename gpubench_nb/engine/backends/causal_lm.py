"""A local causal LM prompted per text: ``loglik`` (likeliest verbalisation) or ``generate``
(greedy, normalised; else off-label, R1.5); left padded with ``position_ids`` (R2.1)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpubench_nb.engine.backends.base import (
    Batch,
    LoadSpec,
    Tokenized,
    padded_batches,
    positions,
    torch_dtype,
)
from gpubench_nb.engine.backends.hf import TransformersBackend, from_pretrained, max_context
from gpubench_nb.engine.backends.hf import model_files as model_files  # the same files (R1.1)
from gpubench_nb.engine.backends.prompts import PromptTokenizer
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.prompting import normalise_answer

if TYPE_CHECKING:
    import torch

AUTO_CLASSES = ("AutoModelForCausalLM", "GenerationConfig")  # imported before the load clock
MODEL_MAPPING = "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"  # (imports.py, R3.2; as hf.py)
OFF_LABEL = -1  # predict()'s index for an answer outside the declared classes


class CausalLmBackend(TransformersBackend):
    """AutoModelForCausalLM + a declared prompt (``model.prompt``, R1.3)."""

    name = "causal_lm"

    def __init__(self, spec: LoadSpec) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        prompt, device = spec.prompt, spec.device
        if prompt is None or len(prompt.verbalisations) != len(spec.classes):
            raise BackendError(
                "backend causal_lm needs model.prompt with one verbalisation per class",
                rule="R1.3",
            )
        self._open(spec)
        self.prompt = prompt
        self.prompts = PromptTokenizer(self.tokenizer, prompt)
        model = from_pretrained(AutoModelForCausalLM, self.model_path, torch_dtype(spec.precision))
        self.module = model.to(device).eval()
        # R2.5, R1.3: exactly the declared generation options, no folder default merged in
        self.generation_config, self.folder_overridden = declared_generation_config(
            model, self.tokenizer, prompt
        )
        self.module.generation_config = self.generation_config
        self._max_context = max_context(model.config, self.tokenizer)
        self.fast_path = self.prompts.fast_path
        first = [c[0] for c in self.prompts.continuations]
        self._first_tokens = torch.tensor(first, device=device) if self.fast_path else None
        self._answers: dict[int, str] = {}
        self._input_tokens = self._generated_tokens = 0

    def tokenize(self, texts: Sequence[str], context: int) -> Tokenized:
        """Prompt + text tokens, the prompt kept whole and the text cut (R2.3)."""
        self.prompts.check_context(context, self._max_context, self.prompts.tokens_after)
        tokenized = self.prompts.tokenize(texts, context)
        self._input_tokens = sum(len(ids) for ids in tokenized.input_ids)
        self._generated_tokens = 0  # one tokenisation per pass: the pass's count starts here
        return tokenized

    def batches(self, tokenized: Tokenized, batch: int, batching: str) -> list[Batch]:
        """Left-padded prompts with their position ids, on the device."""
        return padded_batches(tokenized, batch, batching, self.tokenizer.pad_id, self.device, True)

    def predict(self, batch: Batch) -> torch.Tensor:
        """Class indices in declared order; OFF_LABEL for an off-label generated answer."""
        import torch

        with torch.inference_mode():
            if self.prompt.decision == "generate":
                return self._generate(batch)
            return self.scores(batch).argmax(-1)

    def off_label_answer(self, position: int) -> str:
        """The answer, as generated, of the text at corpus ``position`` predicted OFF_LABEL."""
        return self._answers[position]

    def tokens_processed(self, tokenized: Tokenized) -> int:
        """Prompt + text tokens of the pass (padding excluded), plus the tokens generated."""
        return self._input_tokens + self._generated_tokens

    def describe(self) -> dict[str, Any]:
        config = self.generation_config  # the options generate() runs with (R2.5)
        effective = {k: v for k, v in config.to_diff_dict().items() if k != "transformers_version"}
        effective.update(
            do_sample=config.do_sample,
            num_beams=config.num_beams,
            max_new_tokens=config.max_new_tokens,
        )
        described = super().describe()
        described.update(
            generation=self.prompt.options(),
            generation_config_effective=effective,
            generation_config_folder_overridden=self.folder_overridden,
            prompt_tokens=self.prompts.prompt_tokens,
            verbalisation_tokens=[len(c) for c in self.prompts.continuations],
            loglik_path=None
            if self.prompt.decision != "loglik"
            else ("fast: one distinct token per class" if self.fast_path else "general"),
            padding="left, position_ids from the attention mask",
        )
        return described

    def scores(self, batch: Batch, *, general: bool = False) -> torch.Tensor:
        """``[rows, classes]`` length-normalised log-likelihood of each verbalisation after each
        prompt; ``general=True`` forces the general path."""
        import torch

        if self.fast_path and not general:
            logits = self.module(**batch.tensors, logits_to_keep=1).logits[:, -1, :]
            summed = torch.log_softmax(logits.float(), -1).index_select(1, self._first_tokens)
        else:
            summed = self._general_scores(batch.tensors)
        return summed / self._lengths(summed)

    def _general_scores(self, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """Every (row, class) sequence: [left pads][prompt][verbalisation][right pads], one
        forward; token j of a verbalisation is read at column width - 1 + j."""
        import torch

        ids, mask = tensors["input_ids"], tensors["attention_mask"]
        rows, width = ids.shape
        conts = self.prompts.continuations
        longest, pad = max(len(c) for c in conts), self.tokenizer.pad_id
        cont_ids = torch.tensor([[*c] + [pad] * (longest - len(c)) for c in conts])
        cont_mask = torch.tensor([[1] * len(c) + [0] * (longest - len(c)) for c in conts])
        cont_ids, cont_mask = cont_ids.to(ids.device), cont_mask.to(ids.device)
        classes = len(conts)
        full_ids = torch.cat(
            [ids.repeat_interleave(classes, 0), cont_ids.repeat(rows, 1)], dim=1
        )  # row r*classes + c = prompt r + verbalisation c
        full_mask = torch.cat([mask.repeat_interleave(classes, 0), cont_mask.repeat(rows, 1)], 1)
        logits = self.module(
            input_ids=full_ids,
            attention_mask=full_mask,
            position_ids=positions(full_mask),
            logits_to_keep=longest + 1,
        ).logits[:, :longest, :]  # columns width - 1 .. width + longest - 2
        logprobs = torch.log_softmax(logits.float(), -1)
        picked = logprobs.gather(-1, cont_ids.repeat(rows, 1).unsqueeze(-1)).squeeze(-1)
        return (picked * cont_mask.repeat(rows, 1)).sum(-1).view(rows, classes)

    def _lengths(self, like: torch.Tensor) -> torch.Tensor:
        import torch

        values = {
            "tokens": [len(c) for c in self.prompts.continuations],
            "chars": [len(v) for v in self.prompt.verbalisations],
        }.get(self.prompt.length_normalisation, [1] * len(self.classes))
        return torch.tensor(values, dtype=like.dtype, device=like.device)

    def _generate(self, batch: Batch) -> torch.Tensor:
        """Greedy answers mapped by exact match after normalisation; the rest OFF_LABEL."""
        import torch

        texts = self.generated_texts(batch)
        steps = self.prompt.normalise
        lookup = {normalise_answer(v, steps): i for i, v in enumerate(self.prompt.verbalisations)}
        out = []
        for position, text in zip(batch.indices, texts, strict=True):
            index = lookup.get(normalise_answer(text, steps), OFF_LABEL)
            if index == OFF_LABEL:
                self._answers[position] = text
            out.append(index)
        return torch.tensor(out, dtype=torch.long, device=self.device)

    def generated_texts(self, batch: Batch) -> list[str]:
        """Each row's greedy continuation, decoded and cut before the first stop string."""
        hf = self.tokenizer.hf
        config = self.generation_config  # the declared options only (set at load)
        eos = config.eos_token_id
        width = batch.tensors["input_ids"].shape[1]
        tensors = {k: v for k, v in batch.tensors.items() if k != "position_ids"}
        stops = [StopInAnswer(hf, width, self.prompt.stop)] if self.prompt.stop else None
        output = self.module.generate(**tensors, generation_config=config, stopping_criteria=stops)
        ends = set(eos if isinstance(eos, list) else [eos])
        texts = []
        for row in output[:, width:].tolist():
            kept = list(itertools.takewhile(lambda token: token not in ends, row))
            while kept and kept[-1] == self.tokenizer.pad_id:  # a finished row's filling
                kept.pop()
            self._generated_tokens += len(kept)
            text = hf.decode(kept, skip_special_tokens=True)
            for stop in self.prompt.stop:
                text = text.split(stop, 1)[0]
            texts.append(text)
        return texts


def declared_generation_config(model: Any, tokenizer: Any, prompt: Any) -> tuple[Any, list[str]]:
    """The generation config of the declared options only, token ids (eos, pad, bos) kept from
    the model's files, and the folder's generation options it overrides."""
    from transformers import GenerationConfig

    folder = getattr(model, "generation_config", None)
    eos = getattr(folder, "eos_token_id", None)
    if eos is None:
        eos = model.config.eos_token_id or tokenizer.hf.eos_token_id
    bos = getattr(folder, "bos_token_id", None) or model.config.bos_token_id
    config = GenerationConfig(
        do_sample=False,
        num_beams=1,
        max_new_tokens=prompt.max_new_tokens,
        repetition_penalty=1.0,
        pad_token_id=tokenizer.pad_id,
        eos_token_id=eos,
        bos_token_id=bos,
    )
    token_ids = {"eos_token_id", "bos_token_id", "pad_token_id", "decoder_start_token_id"}
    given = {} if folder is None else folder.to_diff_dict()
    overridden = sorted(
        key
        for key, value in given.items()
        if key not in token_ids
        and not key.startswith("_")
        and key != "transformers_version"
        and getattr(config, key, None) != value
    )
    return config, overridden


class StopInAnswer:
    """Stops a row once a declared stop string appears in its generated text, never the prompt
    (transformers' stop_strings matches the sequence's tail)."""

    def __init__(self, tokenizer: Any, width: int, stop: Sequence[str]) -> None:
        self.tokenizer, self.width, self.stop = tokenizer, width, tuple(stop)

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        import torch

        done = [
            any(s in self.tokenizer.decode(row, skip_special_tokens=True) for s in self.stop)
            for row in input_ids[:, self.width :].tolist()
        ]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


BACKEND = CausalLmBackend
