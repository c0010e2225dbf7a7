"""The fused Llama forward against transformers' own: values and gradients of the training
forward (shared prompts), the decoder's logits, prompt de-duplication, and what it refuses."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from ablate.base.records import Rollouts
from ablate.factors.estimators import value_head
from ablate.models import fast_llama
from ablate.stages.forward import completion_forward, forward_tokens
from ablate.testing import char_tokenizer, tiny_llama


@pytest.fixture(scope="module")
def tokenizer():
    return char_tokenizer()


def llama(tokenizer, **overrides) -> LlamaForCausalLM:
    """A tiny Llama with the options the fused forward must reproduce (GQA, biases)."""
    options = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
    )
    config = LlamaConfig(**{**options, **overrides})
    torch.manual_seed(5)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # non-trivial norm weights and biases, so a dropped term shows
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.3)
    return model


def group_batch(tokenizer, prompts=4, group=3, width=9, steps=6, seed=0):
    """Left-padded prompts (each repeated `group` times) + right-padded completions."""
    gen = torch.Generator().manual_seed(seed)
    pad = tokenizer.pad_token_id
    ids = torch.randint(3, 50, (prompts, width), generator=gen)
    mask = torch.ones(prompts, width, dtype=torch.long)
    for row in range(prompts):  # mixed prompt lengths
        ids[row, :row], mask[row, :row] = pad, 0
    ids, mask = ids.repeat_interleave(group, 0), mask.repeat_interleave(group, 0)
    comp = torch.randint(3, 50, (prompts * group, steps), generator=gen)
    comp_mask = torch.ones_like(comp)
    comp[0, 3:], comp_mask[0, 3:] = pad, 0  # one completion ended early
    return torch.cat([ids, comp], 1), torch.cat([mask, comp_mask], 1), width


def reference(model, ids, attn, width):
    """transformers' forward over prompt + completion: logits and final hidden states."""
    out = model(
        input_ids=ids,
        attention_mask=attn,
        position_ids=(attn.cumsum(-1) - 1).clamp(min=0),
        output_hidden_states=True,
    )
    return out.logits[:, width - 1 : -1], out.hidden_states[-1][:, width - 1 : -1]


def grads(model, loss) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize(
    "overrides",
    [{}, {"num_key_value_heads": 2}, {"attention_bias": True, "mlp_bias": True}],
    ids=["mha", "gqa", "biases"],
)
def test_training_forward_matches_transformers_in_value_and_gradient(tokenizer, overrides):
    model = llama(tokenizer, **overrides).train()
    assert fast_llama.supports(model)
    ids, attn, width = group_batch(tokenizer)
    valid = attn[:, width:].bool()
    want_logits, want_hidden = reference(model, ids, attn, width)
    hidden = fast_llama.completion_hidden(model, ids, attn, width)
    logits = fast_llama.logits_from_hidden(model, hidden)
    torch.testing.assert_close(logits[valid], want_logits[valid], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(hidden[valid], want_hidden[valid], atol=1e-5, rtol=1e-5)
    # rows of a group apart (shuffled minibatches): the same values, row for row
    shuffled = torch.randperm(ids.shape[0], generator=torch.Generator().manual_seed(2))
    apart = fast_llama.completion_hidden(model, ids[shuffled], attn[shuffled], width)
    torch.testing.assert_close(
        apart[valid[shuffled]], hidden[shuffled][valid[shuffled]], atol=1e-5, rtol=1e-5
    )
    weight = torch.randn(want_logits.shape, generator=torch.Generator().manual_seed(1))
    weight = weight * valid[..., None]  # the loss never reads padded positions
    want = grads(model, (want_logits * weight).sum())
    got = grads(model, (logits * weight).sum())
    assert want.keys() == got.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], atol=1e-5, rtol=1e-4, msg=name)


def test_decoder_logits_match_a_full_forward(tokenizer):
    model = llama(tokenizer, num_key_value_heads=2).eval()
    ids, attn, width = group_batch(tokenizer, prompts=3, group=2, steps=5)
    attn[:, width:] = 1  # the decoder feeds every sampled token
    prompts, prompt_mask = ids[::2, :width], attn[::2, :width]
    with torch.no_grad():
        want, _ = reference(model, ids, attn, width)
        decoder = fast_llama.Decoder(model, prompts, prompt_mask, n=2, steps=5)
        got = [decoder.first_logits]
        for generated in range(1, 5):
            got.append(decoder.step(ids[:, width + generated - 1], generated))
    torch.testing.assert_close(torch.stack(got, 1), want, atol=1e-5, rtol=1e-5)
    decoder.step(ids[:, -1], 5)  # the cache holds prompt + `steps` tokens
    with pytest.raises(RuntimeError, match="capacity"):
        decoder.step(ids[:, -1], 6)


def test_distinct_prompts_groups_rows_by_ids_and_mask():
    ids = torch.tensor([[0, 5, 6], [0, 5, 6], [7, 5, 6], [0, 5, 6]])
    mask = torch.tensor([[0, 1, 1], [0, 1, 1], [1, 1, 1], [1, 1, 1]])  # row 3: 0 is a token
    u_ids, u_mask, inverse = fast_llama.distinct_prompts(ids, mask)
    assert u_ids.shape[0] == 3
    assert inverse[0] == inverse[1] and len(set(inverse.tolist())) == 3
    torch.testing.assert_close(u_ids[inverse], ids)
    torch.testing.assert_close(u_mask[inverse], mask)


def test_completion_forward_same_on_both_paths_with_a_critic(tokenizer, monkeypatch):
    model = tiny_llama(seed=2, tokenizer=tokenizer)
    critic = value_head(model.config.hidden_size)
    torch.nn.init.normal_(critic.weight)
    ids, attn, width = group_batch(tokenizer)
    valid = attn[:, width:].bool()
    fast = completion_forward(model, ids, attn, width, 0.7, critic)
    monkeypatch.setattr(fast_llama, "ENABLED", False)
    assert not fast_llama.supports(model)
    slow = completion_forward(model, ids, attn, width, 0.7, critic)
    for got, want in zip(fast, slow, strict=True):
        torch.testing.assert_close(got[valid], want[valid], atol=1e-5, rtol=1e-5)


def test_forward_tokens_counts_each_shared_prompt_once(tokenizer, monkeypatch):
    model = tiny_llama(seed=0, tokenizer=tokenizer)
    ids, attn, width = group_batch(tokenizer, prompts=4, group=3, width=9, steps=6)
    rollouts = Rollouts(
        prompt_ids=ids[:, :width],
        prompt_mask=attn[:, :width],
        completion_ids=ids[:, width:],
        completion_mask=attn[:, width:].float(),
        logprobs=torch.zeros(12, 6),
        entropy=torch.zeros(12, 6),
        lengths=attn[:, width:].sum(1),
        truncated=torch.zeros(12, dtype=torch.bool),
        group_ids=torch.arange(4).repeat_interleave(3),
        problem_ids=[str(i // 3) for i in range(12)],
        prompts=[""] * 12,
        texts=[""] * 12,
        logprobs_exact=True,
    )
    completion = 12 * 6 - 3  # row 0 ended after 3 tokens
    prompt_each = 9 + 8 + 7 + 6  # prompt rows 0..3 have 0..3 padding tokens
    assert forward_tokens(model, rollouts) == prompt_each + completion
    monkeypatch.setattr(fast_llama, "ENABLED", False)
    assert forward_tokens(model, rollouts) == 3 * prompt_each + completion


def test_supports_refuses_what_it_does_not_reproduce(tokenizer, monkeypatch):
    assert fast_llama.supports(tiny_llama(seed=0, tokenizer=tokenizer))
    scaled = llama(tokenizer, rope_parameters={"rope_type": "linear", "factor": 2.0})
    assert not fast_llama.supports(scaled)
    gelu = llama(tokenizer, hidden_act="gelu")
    assert not fast_llama.supports(gelu)
    checkpointed = llama(tokenizer)
    checkpointed.model.gradient_checkpointing = True
    assert not fast_llama.supports(checkpointed)
    dropout = llama(tokenizer, attention_dropout=0.1)
    assert not fast_llama.supports(dropout.train()) and fast_llama.supports(dropout.eval())
    assert not fast_llama.supports(torch.nn.Linear(2, 2))
    assert not fast_llama.supports(llama(tokenizer).to(torch.bfloat16))


def test_engine_samples_the_same_on_both_paths(tokenizer):
    """The fused decoder draws the same completions as transformers' forward for a seed (its
    logits agree to ~1e-6, far below any gap the sampler's race resolves)."""
    from ablate.base.records import SamplingParams
    from ablate.rollout.hf import HFEngine

    model = tiny_llama(seed=3, tokenizer=tokenizer)
    prompts = ["1+2=", "a longer prompt: 12+7=", "x"]
    sampling = SamplingParams(max_new_tokens=12, temperature=0.9, seed=11)
    fused = HFEngine(model, tokenizer).generate(prompts, 4, sampling)
    plain = HFEngine(model, tokenizer, fused=False).generate(prompts, 4, sampling)
    assert fused.texts == plain.texts
    torch.testing.assert_close(fused.logprobs, plain.logprobs, atol=1e-5, rtol=0)
    torch.testing.assert_close(fused.entropy, plain.entropy, atol=1e-5, rtol=0)


def test_training_with_the_fused_forward_follows_the_transformers_trajectory(monkeypatch):
    """A few real updates (shuffled minibatches that split groups, dynamic sampling's
    concatenated batches, a reference model) move the weights the same on both paths."""
    import re

    from ablate.factors.algorithms import Algorithm
    from ablate.factors.eval_spec import EvalSpec
    from ablate.factors.spec import Budget, TrialSpec
    from ablate.tasks.base import CHARSET
    from ablate.tasks.templates import get_template
    from ablate.testing import ScriptedEngine
    from ablate.trial import train

    tok, plain = char_tokenizer(CHARSET), get_template("plain")

    def mixed(prompt: str, j: int, call: int) -> str:
        """Half right, half off by one; on even calls, groups of even sums are all right
        (uniform), so dynamic sampling has to concatenate generation batches."""
        total = sum(int(x) for x in re.search(r"Question: ([\d+]+)", prompt).group(1).split("+"))
        uniform = call % 2 == 0 and total % 2 == 0
        return " 1+2=3;" + plain.write_answer(str(total + (0 if uniform else j % 2)))

    spec = TrialSpec(
        algorithm=Algorithm(minibatches=3, dynamic_sampling=True, kl_coef=0.04),
        model="tiny",
        task_options=(("n_train", 64), ("n_eval", 8)),
        budget=Budget(max_steps=3, prompts_per_step=3, group_size=4, max_new_tokens=24),
        eval=EvalSpec(max_problems=4, n_samples=2, ks=(1, 2), at_start=False),
    )

    def trained(enabled: bool) -> dict[str, torch.Tensor]:
        monkeypatch.setattr(fast_llama, "ENABLED", enabled)
        model = tiny_llama(seed=0, tokenizer=tok)
        engine = lambda m, t: ScriptedEngine(mixed, tokenizer=t)  # noqa: E731
        result = train(spec, loaded=(model, tok), engine=engine)
        assert result.outcome == "finished" and result.steps == 3
        assert result.budget["budget/extra_gen_batches"] > 0  # batches were concatenated
        return {n: p.detach().clone() for n, p in model.named_parameters()}

    fused, plain_path = trained(True), trained(False)
    start = {n: p for n, p in tiny_llama(seed=0, tokenizer=tok).named_parameters()}
    moved = max((fused[n] - start[n]).abs().max().item() for n in fused)
    assert moved > 1e-5  # the updates did something
    for name in fused:
        torch.testing.assert_close(fused[name], plain_path[name], atol=1e-6, rtol=1e-4, msg=name)
