"""Ragged decoding: rows that finished leave the decode batch, and every row's samples,
log-probs and entropies stay bit for bit what decoding the full batch to the end gives (today's
engine, `ragged=False`), on the fused path and on transformers' forward."""

from __future__ import annotations

import pytest
import torch

from ablate.base.records import SamplingParams
from ablate.models import fast_llama
from ablate.models.decode_cache import MIN_ROWS, grouped_attention, rows_to_keep
from ablate.rollout.hf import HFEngine, sample_next
from ablate.testing import zoo_model_built

zoo = pytest.mark.skipif(not zoo_model_built("rl_ready"), reason="zoo not available")


@pytest.fixture(scope="module")
def rl_ready():
    from ablate.models import load_model

    return load_model("rl_ready")


def prompts(count: int, template: str = "plain") -> tuple[list[str], tuple[str, ...]]:
    from ablate.tasks import get_task
    from ablate.tasks.templates import get_template

    tpl = get_template(template)
    problems = get_task("arithmetic").problems("eval")[:count]
    return [tpl.render(p.question) for p in problems], tuple(tpl.stop)


def assert_same(a, b) -> None:
    assert a.texts == b.texts
    for name in ("completion_ids", "completion_mask", "logprobs", "entropy", "lengths"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert torch.equal(a.truncated, b.truncated)


@zoo
@pytest.mark.parametrize(
    ("count", "n", "template", "temperature", "top_p"),
    [
        (8, 8, "plain", 1.0, 1.0),  # the training batch
        (8, 8, "plain", 0.7, 0.9),  # truncated sampling
        (8, 8, "plain", 0.0, 1.0),  # greedy
        (8, 8, "r1", 1.0, 1.0),  # stop strings end rows
        (40, 2, "plain", 1.0, 1.0),  # an evaluation batch: many prompts, small groups
    ],
)
def test_ragged_decoding_equals_the_full_batch_bit_for_bit(
    rl_ready, count, n, template, temperature, top_p
):
    model, tokenizer = rl_ready
    texts, stop = prompts(count, template)
    for seed in (0, 1):
        sampling = SamplingParams(
            max_new_tokens=80, temperature=temperature, top_p=top_p, stop=stop, seed=seed
        )
        full = HFEngine(model, tokenizer, ragged=False).generate(texts, n, sampling)
        ragged = HFEngine(model, tokenizer).generate(texts, n, sampling)
        assert_same(ragged, full)
        assert full.lengths.min() < full.lengths.max()  # rows did end at different steps


@zoo
def test_ragged_decoding_on_transformers_forward(rl_ready):
    model, tokenizer = rl_ready
    texts, _ = prompts(8)
    sampling = SamplingParams(max_new_tokens=80, seed=4)
    full = HFEngine(model, tokenizer, fused=False, ragged=False).generate(texts, 8, sampling)
    ragged = HFEngine(model, tokenizer, fused=False).generate(texts, 8, sampling)
    assert_same(ragged, full)


@zoo
def test_finished_rows_leave_the_batch(rl_ready, monkeypatch):
    """The decoder is fed fewer rows as completions end, never fewer than MIN_ROWS."""
    model, tokenizer = rl_ready
    fed: list[int] = []
    step = fast_llama.Decoder.step

    def spy(self, token, generated):
        fed.append(token.shape[0])
        return step(self, token, generated)

    monkeypatch.setattr(fast_llama.Decoder, "step", spy)
    texts, _ = prompts(8)
    rollouts = HFEngine(model, tokenizer).generate(texts, 8, SamplingParams(max_new_tokens=80))
    assert fed[0] == 64 and min(fed) == MIN_ROWS
    assert fed == sorted(fed, reverse=True)
    # the decode runs until the longest completion ends, with far fewer row-steps than 64 each
    assert len(fed) + 1 == int(rollouts.lengths.max())
    assert sum(fed) < 0.8 * 64 * len(fed)


def test_rows_to_keep_keeps_unfinished_rows_topped_up_to_the_minimum():
    done = torch.zeros(64, dtype=torch.bool)
    assert rows_to_keep(done) is None  # nothing finished: nothing to gain
    done[:15] = True
    assert rows_to_keep(done) is None  # fewer than a quarter would go
    done[:16] = True
    assert rows_to_keep(done).tolist() == list(range(16, 64))
    done[:40] = True
    assert rows_to_keep(done).tolist() == list(range(40, 64))
    done[:60] = True  # 4 alive: topped up with the first finished rows to MIN_ROWS
    keep = rows_to_keep(done, min_rows=16)
    assert keep.tolist() == [*range(12), *range(60, 64)]
    assert rows_to_keep(torch.ones(8, dtype=torch.bool)) is None  # a batch under the minimum


def test_sample_next_on_some_rows_draws_what_the_full_batch_draws():
    logits = torch.randn(12, 30, generator=torch.Generator().manual_seed(0))
    rows = torch.tensor([1, 4, 5, 11])
    for sampling in (SamplingParams(max_new_tokens=1), SamplingParams(max_new_tokens=1, top_k=5)):
        full = sample_next(logits, sampling, torch.Generator().manual_seed(3))
        part = sample_next(logits[rows], sampling, torch.Generator().manual_seed(3), rows, 12)
        for a, b in zip(part, full, strict=True):
            assert torch.equal(a, b[rows])


def test_grouped_attention_on_some_rows_equals_the_full_layout():
    """Rows placed in their groups' slots (others empty) attend exactly as in the full batch,
    and as SDPA over their prompt's and their own keys."""
    gen = torch.Generator().manual_seed(0)
    prompts_, n, heads, kv_heads, width, length, dim = 3, 4, 4, 2, 5, 6, 8
    q = torch.randn(prompts_ * n, heads, 1, dim, generator=gen)
    prefix_k = torch.randn(prompts_, kv_heads, width, dim, generator=gen)
    prefix_v = torch.randn(prompts_, kv_heads, width, dim, generator=gen)
    bias = torch.zeros(prompts_, 1, 1, width)
    bias[1, ..., :2] = torch.finfo(torch.float32).min  # a left-padded prompt
    own_k = torch.randn(prompts_ * n, kv_heads, length, dim, generator=gen)
    own_v = torch.randn(prompts_ * n, kv_heads, length, dim, generator=gen)
    scale = dim**-0.5
    full = grouped_attention(q, (prefix_k, prefix_v, bias), (own_k, own_v), n, scale)
    rows = torch.tensor([0, 2, 3, 9])  # groups 0 and 2
    slots = torch.tensor([0, 2, 3, 5])  # their places in [2 groups * n]
    groups = torch.tensor([0, 2])
    part = grouped_attention(
        q[rows],
        (prefix_k[groups], prefix_v[groups], bias[groups]),
        (own_k[rows], own_v[rows]),
        n,
        scale,
        slots,
    )
    assert torch.equal(part, full[rows])
    keys = torch.cat([prefix_k.repeat_interleave(n, 0), own_k], 2)
    values = torch.cat([prefix_v.repeat_interleave(n, 0), own_v], 2)
    mask = torch.cat([bias.repeat_interleave(n, 0), torch.zeros(prompts_ * n, 1, 1, length)], -1)
    want = torch.nn.functional.scaled_dot_product_attention(
        q, keys, values, attn_mask=mask, scale=scale, enable_gqa=True
    )
    torch.testing.assert_close(full, want, atol=1e-5, rtol=1e-5)
