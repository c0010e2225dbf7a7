"""`HFEngine`: a batched KV-cache sampler over the trainer's own transformers causal LM.

Prompts are encoded with `tokenizer(prompts, add_special_tokens=True)`: whether a BOS token is
prepended is the tokenizer's decision (its post-processor), so the engine, the trainer and
`model.generate` on `tokenizer(prompt)` all see the same prompt tokens. Prompts are left padded
with explicit position ids (each prompt starts at position 0). Llama models decode through
`ablate.models.fast_llama` (one prefill per prompt shared by its G samples, fused projections); any
other model through its own forward over a preallocated `DynamicCache`. Sampling draws from a
`torch.Generator` seeded by `SamplingParams.seed`, so the global RNG is never touched and the
same seed gives the same completions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ablate.base.records import Rollouts, SamplingParams
from ablate.models import fast_llama
from ablate.models.decode_cache import rows_to_keep
from ablate.rollout.base import checked_request


@dataclass
class _Decoded:
    """Raw output of the decode loop, before masks and texts are derived."""

    tokens: Tensor  # [B, T] long
    logprobs: Tensor  # [B, T]
    entropy: Tensor  # [B, T]
    lengths: Tensor  # [B] long
    finished: Tensor  # [B] bool, ended by EOS or a stop string
    ended_by_eos: Tensor  # [B] bool

    @classmethod
    def empty(cls, batch: int, steps: int, pad_id: int, device) -> _Decoded:
        """Padding everywhere, every row running to `steps` tokens until it ends."""
        return cls(
            tokens=torch.full((batch, steps), pad_id, dtype=torch.long, device=device),
            logprobs=torch.zeros((batch, steps), device=device),
            entropy=torch.zeros((batch, steps), device=device),
            lengths=torch.full((batch,), steps, dtype=torch.long, device=device),
            finished=torch.zeros(batch, dtype=torch.bool, device=device),
            ended_by_eos=torch.zeros(batch, dtype=torch.bool, device=device),
        )

    def write(self, at, step: int, token: Tensor, logprob: Tensor, entropy: Tensor) -> None:
        """Record the `step`-th sampled token of batch rows `at` (a slice or row indices)."""
        self.tokens[at, step], self.logprobs[at, step] = token, logprob
        self.entropy[at, step] = entropy

    def end(self, at, step: int, done: Tensor, eos: Tensor, stop: Tensor) -> Tensor:
        """Mark rows `at` (`done` before this step) that ended by EOS or a stop string at
        `step`; returns which ended now."""
        ended = (eos | stop) & ~done
        self.ended_by_eos[at] |= eos & ended
        self.lengths[at] = torch.where(ended, step + 1, self.lengths[at])
        self.finished[at] = done | ended
        return ended


class HFEngine:
    """Samples from `model` (a transformers causal LM, usually the one being trained)."""

    def __init__(
        self,
        model,
        tokenizer,
        *,
        device: str | torch.device = "cpu",
        fused: bool = True,
        ragged: bool = True,
    ) -> None:
        """`fused=False` keeps transformers' forward even for Llama models (the zoo's recorded
        measurements were taken on it and are reproduced bit for bit). `ragged=False` decodes
        finished rows to the end (same samples; benchmarks and tests compare both)."""
        self.model = model
        self.fused, self.ragged = fused, ragged
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        if tokenizer.eos_token_id is None:
            raise ValueError("HFEngine needs a tokenizer with an eos_token_id")
        self.eos_id = int(tokenizer.eos_token_id)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else self.eos_id
        self._stop_candidates: dict[tuple[str, ...], Tensor] = {}
        self._token_texts: list[str] | None = None

    def sync_weights(self, model: Any) -> None:
        """Nothing to copy: this engine samples from the training model itself."""

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingParams,
        *,
        problem_ids: Sequence[str] | None = None,
    ) -> Rollouts:
        prompts, ids_per_prompt = checked_request(prompts, n, problem_ids)
        prompt_ids, prompt_mask = self._encode(prompts)
        with torch.inference_mode(), _eval_mode(self.model):
            decoded = self._decode(prompt_ids, prompt_mask, n, sampling)
        prompt_ids = prompt_ids.repeat_interleave(n, dim=0)
        prompt_mask = prompt_mask.repeat_interleave(n, dim=0)
        return self._assemble(
            decoded, prompt_ids, prompt_mask, prompts, ids_per_prompt, n, sampling
        )

    # -- encoding -------------------------------------------------------------------------------

    def _encode(self, prompts: list[str]) -> tuple[Tensor, Tensor]:
        """Left-padded prompt ids and mask, [num_prompts, P]."""
        encoded = self.tokenizer(prompts, add_special_tokens=True)["input_ids"]
        width = max((len(ids) for ids in encoded), default=0)
        if width == 0:
            raise ValueError("every prompt encodes to zero tokens; the model needs a context")
        ids = torch.full((len(encoded), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, tokens in enumerate(encoded):
            if tokens:
                ids[row, width - len(tokens) :] = torch.tensor(tokens, dtype=torch.long)
                mask[row, width - len(tokens) :] = 1
        return ids, mask

    # -- the decode loop ------------------------------------------------------------------------

    def _decode(
        self, prompt_ids: Tensor, prompt_mask: Tensor, n: int, sampling: SamplingParams
    ) -> _Decoded:
        """Sample `n` completions of each prompt row ([P, W] ids and mask, left padded). With
        `ragged`, rows that have finished leave the decode batch (`rows_to_keep`); the noise
        is still drawn for the whole batch, so every row samples what it would have."""

        device, steps = self.device, sampling.max_new_tokens
        batch = prompt_ids.shape[0] * n
        generator = torch.Generator(device=device).manual_seed(sampling.seed)
        stop_candidates = self._stop_candidate_mask(sampling.stop)
        out = _Decoded.empty(batch, steps, self.pad_id, device)
        decoder = self._start(prompt_ids.to(device), prompt_mask.to(device), n, steps)
        ragged = self.ragged and decoder.can_select
        rows, logits = None, decoder.first_logits  # rows: the batch rows decoding (None: all)
        for step in range(steps):
            token, logprob, ent = sample_next(logits, sampling, generator, rows, batch)
            done = out.finished if rows is None else out.finished[rows]
            token = token.masked_fill(done, self.pad_id)
            at = slice(None) if rows is None else rows
            out.write(at, step, token, logprob, ent)
            eos = (token == self.eos_id) & (not sampling.ignore_eos)
            stops = sampling.stop
            hit = self._hit_stop(out.tokens, step, token, done, stops, stop_candidates, rows)
            ended = out.end(at, step, done, eos, hit)
            if step + 1 == steps or bool(out.finished.all()):
                break
            keep = rows_to_keep(done | ended) if ragged else None
            if keep is not None:
                decoder.select(keep)
                token = token[keep]
                rows = keep if rows is None else rows[keep]
            logits = decoder.step(token, step + 1)
        return out

    def _start(self, prompt_ids: Tensor, prompt_mask: Tensor, n: int, steps: int):
        """A decoder (first_logits [B, V], step(token, generated) -> logits, select(keep)).
        Llama models take the fused path (one prefill per distinct prompt); any other model
        runs transformers' forward over a preallocated cache."""
        from ablate.rollout.kv import TransformersDecoder

        if self.fused and fast_llama.supports(self.model):
            return fast_llama.Decoder(self.model, prompt_ids, prompt_mask, n, steps)
        return TransformersDecoder(
            self.model,
            prompt_ids.repeat_interleave(n, 0),
            prompt_mask.repeat_interleave(n, 0),
            steps,
        )

    def _stop_candidate_mask(self, stops: tuple[str, ...]) -> Tensor | None:
        """Vocabulary mask of tokens that can complete a stop string (their text contains the
        last character of one), so the decoded text is checked only on those rare steps."""
        if not stops:
            return None
        if stops not in self._stop_candidates:
            if self._token_texts is None:
                size = len(self.tokenizer)
                self._token_texts = [self.tokenizer.decode([i]) for i in range(size)]
            last_chars = {s[-1] for s in stops}
            # "\ufffd": a partial multi-byte character whose completion is not visible alone.
            flags = [
                "\ufffd" in text or any(c in text for c in last_chars) for text in self._token_texts
            ]
            self._stop_candidates[stops] = torch.tensor(flags, dtype=torch.bool, device=self.device)
        return self._stop_candidates[stops]

    def _hit_stop(
        self,
        tokens: Tensor,
        step: int,
        token: Tensor,
        done: Tensor,
        stops: tuple[str, ...],
        candidates: Tensor | None,
        rows: Tensor | None = None,
    ) -> Tensor:
        """Which of the decoding rows (batch rows `rows`; None: all) now contain a stop string
        in their decoded completion."""
        hit = torch.zeros_like(done)
        if candidates is None:
            return hit
        # Token ids beyond the tokenizer's vocabulary (padded embedding rows) are never stops.
        in_vocab = token < candidates.numel()
        flagged = candidates[token.clamp(max=candidates.numel() - 1)] & in_vocab & ~done
        for at in flagged.nonzero().flatten().tolist():
            row = at if rows is None else int(rows[at])
            text = self.tokenizer.decode(tokens[row, : step + 1], skip_special_tokens=True)
            hit[at] = any(stop in text for stop in stops)
        return hit

    # -- assembling Rollouts --------------------------------------------------------------------

    def _assemble(
        self,
        decoded: _Decoded,
        prompt_ids: Tensor,
        prompt_mask: Tensor,
        prompts: list[str],
        problem_ids: list[str],
        n: int,
        sampling: SamplingParams,
    ) -> Rollouts:
        width = int(decoded.lengths.max()) if decoded.lengths.numel() else 0
        positions = torch.arange(width, device=decoded.tokens.device)
        mask = (positions[None, :] < decoded.lengths[:, None]).float()
        tokens = decoded.tokens[:, :width].masked_fill(mask == 0, self.pad_id)
        texts = self._texts(tokens, decoded, sampling.stop)
        return Rollouts(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            completion_ids=tokens.cpu(),
            completion_mask=mask.cpu(),
            logprobs=(decoded.logprobs[:, :width] * mask).cpu(),
            entropy=(decoded.entropy[:, :width] * mask).cpu(),
            lengths=decoded.lengths.cpu(),
            truncated=(~decoded.finished).cpu(),
            group_ids=torch.arange(len(prompts)).repeat_interleave(n),
            problem_ids=[pid for pid in problem_ids for _ in range(n)],
            prompts=[p for p in prompts for _ in range(n)],
            texts=texts,
            logprobs_exact=not sampling.greedy and not sampling.filters_distribution,
            pad_id=self.pad_id,
        )

    def _texts(self, tokens: Tensor, decoded: _Decoded, stops: tuple[str, ...]) -> list[str]:
        """Completion texts without EOS or padding; a stop string ends the text (a multi-char
        token that straddles it keeps its tokens, but the text is cut after the stop string)."""
        lengths = (decoded.lengths - decoded.ended_by_eos.long()).tolist()
        rows = [ids[:length] for ids, length in zip(tokens.tolist(), lengths, strict=True)]
        texts = self.tokenizer.batch_decode(rows, skip_special_tokens=True)
        return [cut_at_stop(text, stops) for text in texts] if stops else texts


def sample_next(
    logits: Tensor,
    sampling: SamplingParams,
    generator: torch.Generator,
    rows: Tensor | None = None,
    batch: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Sample one token per row; return (token, its log-prob, entropy). The log-prob is that of
    the distribution the token was drawn from (`Rollouts.logprobs`): log_softmax(logits / T)
    (temperature 1 when greedy), renormalised over the top-k/top-p set when those filter; the
    entropy is always the full temperature-scaled distribution's. `logits` may hold only the
    rows `rows` of a batch of `batch`: the noise is drawn for the whole batch and those rows
    taken, so a row's sample does not depend on which others are still decoding."""
    scaled = logits.float()
    if not sampling.greedy and sampling.temperature != 1.0:
        scaled = scaled / sampling.temperature
    log_probs = torch.log_softmax(scaled, dim=-1)
    probs = log_probs.exp()
    entropy = -(probs * log_probs).sum(-1)
    filtered = not sampling.greedy and sampling.filters_distribution
    if sampling.greedy:
        token = scaled.argmax(-1)
    else:
        if filtered:
            probs = filter_top_k_top_p(probs, sampling.top_k, sampling.top_p)
        # Exponential race (Gumbel-max in another guise): argmax p_i / E_i ~ Categorical(p).
        shape = probs.shape if rows is None else (batch, probs.shape[-1])
        noise = probs.new_empty(shape).exponential_(1.0, generator=generator)
        noise = (noise if rows is None else noise[rows]).clamp_(min=1e-20)
        token = (probs / noise).argmax(-1)
    logprob = log_probs.gather(-1, token[:, None]).squeeze(-1)
    if filtered:  # the truncated distribution's: minus the log of the mass it kept
        logprob = logprob - probs.sum(-1).log()
    return token, logprob, entropy


def filter_top_k_top_p(probs: Tensor, top_k: int, top_p: float) -> Tensor:
    """Zero the probabilities outside the top-k tokens, then outside the top-p nucleus of what
    remains (same order as transformers' logits processors); the top token always survives."""
    if top_k > 0 and top_k < probs.shape[-1]:
        kth = probs.topk(top_k, dim=-1).values[:, -1:]
        probs = probs.masked_fill(probs < kth, 0.0)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        mass_before = sorted_probs.cumsum(-1) - sorted_probs
        total = sorted_probs.sum(-1, keepdim=True)
        sorted_probs = sorted_probs.masked_fill(mass_before > top_p * total, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
    return probs


def cut_at_stop(text: str, stops: tuple[str, ...]) -> str:
    """`text` up to and including the earliest-ending stop string (unchanged if none)."""
    ends = [text.find(stop) + len(stop) for stop in stops if stop in text]
    return text[: min(ends)] if ends else text


@contextlib.contextmanager
def _eval_mode(model) -> Iterator[None]:
    """Sample in eval mode (no dropout), then restore whatever mode the trainer had set."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
