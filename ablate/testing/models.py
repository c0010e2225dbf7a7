"""A character tokenizer, tiny random Llama models and `ScriptedEngine`: a `RolloutEngine` that
returns scripted completions, for tests that train without a zoo model or a sampler."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ablate.base.records import Rollouts, SamplingParams
from ablate.rollout.base import checked_request

#: Characters of the test tokenizer: digits, arithmetic, a little punctuation, lowercase letters.
DEFAULT_ALPHABET = "0123456789+-*/=()., ?:!#\n<>abcdefghijklmnopqrstuvwxyz"


def char_tokenizer(alphabet: str = DEFAULT_ALPHABET):
    """The zoo's character tokenizer (`ablate.models.tokenizer`) over a small vocabulary: the
    special tokens (ids 0-3), then `alphabet` in its own order, so a tiny model needs only
    4 + len(alphabet) embedding rows."""
    from ablate.models.tokenizer import SPECIAL_TOKENS, tokenizer_from_vocab

    chars = list(dict.fromkeys(alphabet))
    return tokenizer_from_vocab({t: i for i, t in enumerate([*SPECIAL_TOKENS, *chars])})


#: The two benchmark sizes of the tiny zoo (random weights here).
TINY_CONFIGS: dict[str, dict[str, int]] = {
    "0.53M": dict(hidden_size=128, intermediate_size=512, num_hidden_layers=2),
    "4.2M": dict(hidden_size=256, intermediate_size=1024, num_hidden_layers=4),
}


def tiny_llama(seed: int = 0, vocab: int = 64, *, size: str = "0.53M", tokenizer=None):
    """A randomly initialised `LlamaForCausalLM` (eval mode, fp32); `tokenizer` sets its vocab
    size and special-token ids."""
    from transformers import LlamaConfig, LlamaForCausalLM

    if tokenizer is not None:
        vocab = len(tokenizer)
    config = LlamaConfig(
        vocab_size=vocab,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        pad_token_id=getattr(tokenizer, "pad_token_id", 0),
        bos_token_id=getattr(tokenizer, "bos_token_id", 1),
        eos_token_id=getattr(tokenizer, "eos_token_id", 2),
        **TINY_CONFIGS[size],
    )
    with torch.random.fork_rng(devices=[]):  # leave the caller's global RNG untouched
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.eval()


# -- a rollout engine that returns scripted completions ------------------------------------------

Script = Mapping[str, Sequence[str]] | Callable[[str, int, int], str]


class ScriptedEngine:
    """A `RolloutEngine` whose completions are scripted, for tests that need no model.

    `script` is either a mapping prompt -> completions (sample j of a prompt takes the next
    completion of its list, cycling, continuing across calls) or a function
    `(prompt, sample_index, call_index) -> completion`. Completions are cut after the first
    stop string, or at `max_new_tokens` tokens (then `truncated`); otherwise an EOS token ends
    them. Without a tokenizer each character is one token (id `ord(c) + 3`; 0 pad, 1 BOS, 2 EOS).
    Log-probs are deterministic (-0.1 to -0.7, repeating) and entropies 1.0; `logprobs_exact` is
    False, so a trainer recomputes old log-probs from its model.
    """

    def __init__(self, script: Script, tokenizer=None) -> None:
        self.script = script
        self.tokenizer = tokenizer
        self.calls = 0
        self._next_index: dict[str, int] = {}
        if tokenizer is None:
            self.pad_id, self.bos_id, self.eos_id = 0, 1, 2
        else:
            self.eos_id = int(tokenizer.eos_token_id)
            pad = tokenizer.pad_token_id
            self.pad_id = int(pad) if pad is not None else self.eos_id
            self.bos_id = tokenizer.bos_token_id

    def encode(self, text: str, *, prompt: bool) -> list[int]:
        if self.tokenizer is not None:
            return list(self.tokenizer(text, add_special_tokens=prompt)["input_ids"])
        return ([self.bos_id] if prompt else []) + [ord(c) + 3 for c in text]

    def sync_weights(self, model: Any) -> None:
        """Scripted completions do not depend on the weights."""

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingParams,
        *,
        problem_ids: Sequence[str] | None = None,
    ) -> Rollouts:
        prompts, ids_per_prompt = checked_request(prompts, n, problem_ids)
        texts, completions, truncated = [], [], []
        for prompt in prompts:
            for j in range(n):
                text, ids, cut = self._complete(prompt, j, sampling)
                texts.append(text)
                completions.append(ids)
                truncated.append(cut)
        self.calls += 1
        prompt_rows = [self.encode(p, prompt=True) for p in prompts for _ in range(n)]
        return self._rollouts(
            prompt_rows, completions, texts, truncated, prompts, ids_per_prompt, n
        )

    def _scripted_text(self, prompt: str, sample_index: int) -> str:
        if callable(self.script):
            return self.script(prompt, sample_index, self.calls)
        options = self.script[prompt]
        if not options:
            raise ValueError(f"no scripted completions for prompt {prompt!r}")
        index = self._next_index.get(prompt, 0)
        self._next_index[prompt] = index + 1
        return options[index % len(options)]

    def _complete(
        self, prompt: str, j: int, sampling: SamplingParams
    ) -> tuple[str, list[int], bool]:
        """(text, token ids, truncated) for sample j of `prompt`."""
        text = self._scripted_text(prompt, j)
        ends = [text.find(s) + len(s) for s in sampling.stop if s in text]
        if ends:
            text = text[: min(ends)]
        ids = self.encode(text, prompt=False)
        stopped, limit = bool(ends), sampling.max_new_tokens
        # Without a stop string, the EOS token needs a slot within the budget as well.
        if len(ids) > limit or (not stopped and len(ids) >= limit):
            ids = ids[:limit]
            return self._decode(ids, text), ids, True
        return text, ids if stopped else [*ids, self.eos_id], False

    def _decode(self, ids: list[int], text: str) -> str:
        if self.tokenizer is not None:
            return self.tokenizer.decode(ids, skip_special_tokens=True)
        return text[: len(ids)]

    def _rollouts(self, prompt_rows, completions, texts, truncated, prompts, problem_ids, n):
        lengths = torch.tensor([len(c) for c in completions], dtype=torch.long)
        width_p = max(len(r) for r in prompt_rows) if prompt_rows else 0
        width_c = int(lengths.max()) if len(completions) else 0
        batch = len(completions)
        prompt_ids = torch.full((batch, width_p), self.pad_id, dtype=torch.long)
        prompt_mask = torch.zeros((batch, width_p), dtype=torch.long)
        completion_ids = torch.full((batch, width_c), self.pad_id, dtype=torch.long)
        for b, (row, ids) in enumerate(zip(prompt_rows, completions, strict=True)):
            prompt_ids[b, width_p - len(row) :] = torch.tensor(row, dtype=torch.long)
            prompt_mask[b, width_p - len(row) :] = 1
            completion_ids[b, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        mask = (torch.arange(width_c)[None, :] < lengths[:, None]).float()
        pattern = -0.1 * (1 + torch.arange(width_c) % 7).float()
        return Rollouts(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            completion_ids=completion_ids,
            completion_mask=mask,
            logprobs=pattern[None, :] * mask,
            entropy=mask.clone(),
            lengths=lengths,
            truncated=torch.tensor(truncated, dtype=torch.bool),
            group_ids=torch.arange(len(prompts)).repeat_interleave(n),
            problem_ids=[pid for pid in problem_ids for _ in range(n)],
            prompts=[p for p in prompts for _ in range(n)],
            texts=texts,
            logprobs_exact=False,
            pad_id=self.pad_id,
        )
