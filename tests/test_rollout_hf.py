"""HFEngine on a tiny random Llama: log-prob parity with a full forward pass, seeding, EOS,
stop strings, truncation, top-k/top-p, and the trainer's model mode."""

from __future__ import annotations

import pytest
import torch

from ablate.base.records import SamplingParams
from ablate.rollout.hf import HFEngine, filter_top_k_top_p, sample_next
from ablate.testing import char_tokenizer, tiny_llama


@pytest.fixture(scope="module")
def tokenizer():
    return char_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_llama(seed=0, tokenizer=tokenizer)


class ForcedLM(torch.nn.Module):
    """Wraps a model and adds +50 to the logit of `follow[t]` after input token t (a bigram
    automaton), so that what a test sampler emits is known in advance."""

    def __init__(self, inner, tokenizer, follow: dict[str, str]):
        super().__init__()
        self.inner, self.config = inner, inner.config
        self.table = torch.full((len(tokenizer),), -1, dtype=torch.long)
        ids = {t: tokenizer.convert_tokens_to_ids(t) for pair in follow.items() for t in pair}
        for before, after in follow.items():
            self.table[ids[before]] = ids[after]

    def forward(self, *, input_ids, **kwargs):
        out = self.inner(input_ids=input_ids, **kwargs)
        target = self.table[input_ids[:, -out.logits.shape[1] :]]
        bonus = torch.zeros_like(out.logits)
        bonus.scatter_(-1, target.clamp(min=0)[..., None], 50.0)
        out.logits = out.logits + bonus * (target >= 0)[..., None]
        return out


def full_forward_logprobs(model, rollouts, temperature):
    """What the trainer computes: one forward pass over prompt + completion."""
    ids = torch.cat([rollouts.prompt_ids, rollouts.completion_ids], 1)
    mask = torch.cat([rollouts.prompt_mask, rollouts.completion_mask.long()], 1)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
    width = rollouts.prompt_ids.shape[1]
    scaled = logits[:, width - 1 : -1].float() / temperature
    log_probs = torch.log_softmax(scaled, -1)
    chosen = log_probs.gather(-1, rollouts.completion_ids[..., None]).squeeze(-1)
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    return chosen * rollouts.completion_mask, entropy * rollouts.completion_mask


def test_logprobs_match_a_full_forward_pass_with_left_padding(model, tokenizer):
    prompts = ["1+2=", "a much longer prompt: 12+7=", "x", "(3*4)-5="]
    sampling = SamplingParams(max_new_tokens=24, temperature=0.7, seed=3)
    rollouts = HFEngine(model, tokenizer).generate(prompts, 3, sampling)
    assert rollouts.logprobs_exact
    assert rollouts.prompt_mask.sum(1).unique().numel() == 4  # mixed prompt lengths
    assert rollouts.prompt_mask[:, 0].min() == 0 and rollouts.prompt_mask[:, -1].min() == 1
    expected, entropy = full_forward_logprobs(model, rollouts, 0.7)
    torch.testing.assert_close(rollouts.logprobs, expected, atol=1e-4, rtol=0)
    torch.testing.assert_close(rollouts.entropy, entropy, atol=1e-4, rtol=0)
    assert (rollouts.logprobs[rollouts.completion_mask > 0] < 0).all()


def test_layout_of_groups_and_prompt_tokens(model, tokenizer):
    prompts = ["1+1=", "2+2="]
    rollouts = HFEngine(model, tokenizer).generate(
        prompts, 3, SamplingParams(max_new_tokens=4), problem_ids=["p", "q"]
    )
    assert rollouts.num_samples == 6 and rollouts.group_size == 3
    assert rollouts.group_ids.tolist() == [0, 0, 0, 1, 1, 1]
    assert rollouts.problem_ids == ["p"] * 3 + ["q"] * 3
    assert rollouts.prompts == ["1+1="] * 3 + ["2+2="] * 3
    # The tokenizer prepends BOS; the engine keeps the tokenizer's choice.
    assert rollouts.prompt_ids[0].tolist() == tokenizer("1+1=")["input_ids"]
    assert rollouts.prompt_ids[0, 0] == tokenizer.bos_token_id


def test_same_seed_same_completions_and_global_rng_untouched(model, tokenizer):
    engine = HFEngine(model, tokenizer)
    sampling = SamplingParams(max_new_tokens=16, seed=11)
    rng_before = torch.get_rng_state()
    first = engine.generate(["1+2=", "7*8="], 4, sampling)
    assert torch.equal(torch.get_rng_state(), rng_before)
    again = engine.generate(["1+2=", "7*8="], 4, sampling)
    other = engine.generate(["1+2=", "7*8="], 4, SamplingParams(max_new_tokens=16, seed=12))
    assert torch.equal(first.completion_ids, again.completion_ids)
    assert first.texts == again.texts
    assert first.texts != other.texts
    assert len(set(first.texts)) > 1  # samples of one group differ from each other


def test_eos_ends_a_completion_and_is_masked_in(model, tokenizer):
    eos = tokenizer.eos_token
    engine = HFEngine(ForcedLM(model, tokenizer, {"=": "a", "a": "b", "b": eos}), tokenizer)
    rollouts = engine.generate(["1+2="], 2, SamplingParams(max_new_tokens=10))
    a, b = tokenizer.convert_tokens_to_ids(["a", "b"])
    assert rollouts.texts == ["ab", "ab"]
    assert rollouts.lengths.tolist() == [3, 3]
    assert rollouts.completion_ids[0].tolist() == [a, b, tokenizer.eos_token_id]
    assert rollouts.completion_mask[0].tolist() == [1.0, 1.0, 1.0]
    assert not rollouts.truncated.any()


def test_stop_string_is_kept_and_rows_finish_independently(model, tokenizer):
    follow = {"=": "x", "x": "7", "7": "\n", "?": "q", "q": "q"}
    engine = HFEngine(ForcedLM(model, tokenizer, follow), tokenizer)
    sampling = SamplingParams(max_new_tokens=6, stop=("\n",))
    rollouts = engine.generate(["1+2=", "what is 11+22?"], 1, sampling)
    assert rollouts.texts == ["x7\n", "qqqqqq"]
    assert rollouts.lengths.tolist() == [3, 6]
    assert rollouts.truncated.tolist() == [False, True]
    assert rollouts.completion_mask.tolist() == [[1, 1, 1, 0, 0, 0], [1] * 6]
    assert rollouts.completion_ids[0, 3:].tolist() == [tokenizer.pad_token_id] * 3
    assert rollouts.logprobs[0, 3:].tolist() == [0.0] * 3
    assert rollouts.entropy[0, 3:].tolist() == [0.0] * 3


def test_multichar_stop_string_spanning_tokens(model, tokenizer):
    follow = {"=": "a", "a": "b", "b": "<", "<": ">", ">": "c", "c": "d"}
    engine = HFEngine(ForcedLM(model, tokenizer, follow), tokenizer)
    rollouts = engine.generate(["1="], 1, SamplingParams(max_new_tokens=8, stop=("<>", "zz")))
    assert rollouts.texts == ["ab<>"] and rollouts.lengths.tolist() == [4]
    assert not rollouts.truncated.any()


def test_top_k_1_and_tiny_top_p_equal_greedy_argmax(model, tokenizer):
    engine = HFEngine(model, tokenizer)
    prompts = ["1+2=", "abc"]
    greedy = engine.generate(prompts, 1, SamplingParams(max_new_tokens=8, temperature=0))
    top1 = engine.generate(prompts, 2, SamplingParams(max_new_tokens=8, top_k=1, seed=5))
    nucleus = engine.generate(prompts, 2, SamplingParams(max_new_tokens=8, top_p=1e-6, seed=6))
    assert not top1.logprobs_exact and not greedy.logprobs_exact
    assert torch.equal(top1.completion_ids[::2], greedy.completion_ids)
    assert torch.equal(nucleus.completion_ids[1::2], greedy.completion_ids)
    # Greedy tokens are the argmax of the full forward pass at every position.
    ids = torch.cat([greedy.prompt_ids, greedy.completion_ids], 1)
    mask = torch.cat([greedy.prompt_mask, greedy.completion_mask.long()], 1)
    with torch.no_grad():
        logits = model(
            input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)
        ).logits
    width = greedy.prompt_ids.shape[1]
    argmax = logits[:, width - 1 : -1].argmax(-1)
    valid = greedy.completion_mask > 0
    assert torch.equal(argmax[valid], greedy.completion_ids[valid])


def test_sampler_follows_the_temperature_scaled_distribution():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(40000, 1)
    generator = torch.Generator().manual_seed(0)
    sampling = SamplingParams(max_new_tokens=1, temperature=2.0)
    token, logprob, entropy = sample_next(logits, sampling, generator)
    expected = torch.softmax(logits[0] / 2.0, -1)
    frequencies = torch.bincount(token, minlength=4).float() / token.numel()
    torch.testing.assert_close(frequencies, expected, atol=0.01, rtol=0)
    torch.testing.assert_close(logprob, expected.log()[token])
    assert entropy[0] == pytest.approx(float(-(expected * expected.log()).sum()), abs=1e-6)


def test_top_k_top_p_filter():
    probs = torch.tensor([[0.05, 0.5, 0.15, 0.3]])
    expected = {
        (0, 0.7): [[0.0, 0.5, 0.0, 0.3]],
        (3, 1.0): [[0.0, 0.5, 0.15, 0.3]],
        # top-p applies to the renormalised top-k mass: 0.5 / 0.8 >= 0.6 keeps one token.
        (2, 0.6): [[0.0, 0.5, 0.0, 0.0]],
    }
    for (top_k, top_p), kept in expected.items():
        torch.testing.assert_close(filter_top_k_top_p(probs, top_k, top_p), torch.tensor(kept))


@pytest.mark.parametrize("training", [True, False])
def test_model_mode_is_restored(model, tokenizer, training):
    model.train(training)
    try:
        HFEngine(model, tokenizer).generate(["1="], 1, SamplingParams(max_new_tokens=2))
        assert model.training is training
    finally:
        model.eval()


def test_ignore_eos_samples_the_full_budget(model, tokenizer):
    eos = tokenizer.eos_token
    engine = HFEngine(ForcedLM(model, tokenizer, {"=": eos, eos: eos}), tokenizer)
    stopped = engine.generate(["1="], 1, SamplingParams(max_new_tokens=5))
    full = engine.generate(["1="], 1, SamplingParams(max_new_tokens=5, ignore_eos=True))
    assert stopped.lengths.tolist() == [1] and stopped.texts == [""]
    assert full.lengths.tolist() == [5] and full.truncated.tolist() == [True]


def test_logprob_parity_holds_with_eager_attention(tokenizer):
    model = tiny_llama(seed=4, tokenizer=tokenizer)
    model.config._attn_implementation = "eager"  # the 4D additive-mask path of the other kernel
    sampling = SamplingParams(max_new_tokens=8, seed=2)
    rollouts = HFEngine(model, tokenizer).generate(["1+2=", "a longer one: 9*9="], 2, sampling)
    expected, _ = full_forward_logprobs(model, rollouts, 1.0)
    torch.testing.assert_close(rollouts.logprobs, expected, atol=1e-4, rtol=0)
