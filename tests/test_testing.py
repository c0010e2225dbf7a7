"""The helpers shipped in ablate.testing behave as documented."""

from __future__ import annotations

import pytest
import torch

from ablate.base.errors import ConfigError
from ablate.base.records import SamplingParams
from ablate.testing import (
    ScriptedEngine,
    ToyTask,
    ToyTemplate,
    char_tokenizer,
    cycle_script,
    tiny_llama,
)


def test_char_tokenizer_round_trips_spaces_and_newlines():
    tokenizer = char_tokenizer()
    text = "12 + 3 =\n 15"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)
    assert tokenizer.decode(ids) == text
    with_bos = tokenizer(text)["input_ids"]
    assert with_bos[0] == tokenizer.bos_token_id and with_bos[1:] == ids
    assert len({tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id}) == 3


def test_tiny_llama_is_seeded_and_leaves_global_rng_alone():
    state = torch.get_rng_state()
    a, b, c = tiny_llama(seed=1), tiny_llama(seed=1), tiny_llama(seed=2)
    assert torch.equal(torch.get_rng_state(), state)
    weight = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(a.state_dict()[weight], b.state_dict()[weight])
    assert not torch.equal(a.state_dict()[weight], c.state_dict()[weight])
    assert 0.4e6 < sum(p.numel() for p in a.parameters()) < 0.7e6
    assert a.config.vocab_size == 64 and not a.training


def test_mapping_script_cycles_per_prompt_across_calls():
    engine = ScriptedEngine({"p": ["x", "y", "z"], "q": ["w"]})
    sampling = SamplingParams(max_new_tokens=8)
    first = engine.generate(["p", "q"], 2, sampling, problem_ids=["P", "Q"])
    assert first.texts == ["x", "y", "w", "w"]
    assert first.problem_ids == ["P", "P", "Q", "Q"]
    assert engine.generate(["p"], 2, sampling).texts == ["z", "x"]


def test_callable_script_sees_sample_and_call_index():
    engine = ScriptedEngine(lambda prompt, j, call: f"{prompt}{j}{call}")
    sampling = SamplingParams(max_new_tokens=8)
    assert engine.generate(["a"], 2, sampling).texts == ["a00", "a10"]
    assert engine.generate(["b"], 1, sampling).texts == ["b01"]


def test_stop_strings_truncation_and_eos():
    engine = ScriptedEngine(cycle_script(["ab\ncd", "abcdefgh", "abc"]))
    rollouts = engine.generate(["p"], 3, SamplingParams(max_new_tokens=4, stop=("\n",)))
    assert rollouts.texts == ["ab\n", "abcd", "abc"]
    assert rollouts.truncated.tolist() == [False, True, False]
    assert rollouts.lengths.tolist() == [3, 4, 4]  # stop kept, no EOS / cut / text + EOS
    assert rollouts.completion_ids[2, 3] == engine.eos_id
    assert rollouts.completion_ids[0, 0] == ord("a") + 3
    assert rollouts.completion_mask.sum().item() == 11
    assert (rollouts.logprobs[rollouts.completion_mask > 0] < 0).all()
    assert (rollouts.logprobs[rollouts.completion_mask == 0] == 0).all()
    assert not rollouts.logprobs_exact


def test_with_a_tokenizer_ids_are_the_tokenizers():
    tokenizer = char_tokenizer()
    engine = ScriptedEngine({"1+1=": ["2"]}, tokenizer=tokenizer)
    rollouts = engine.generate(["1+1="], 1, SamplingParams(max_new_tokens=4))
    assert rollouts.prompt_ids[0].tolist() == tokenizer("1+1=")["input_ids"]
    two = tokenizer.convert_tokens_to_ids("2")
    assert rollouts.completion_ids[0].tolist() == [two, tokenizer.eos_token_id]


def test_bad_group_size_and_problem_ids_raise():
    engine = ScriptedEngine(cycle_script(["a"]))
    with pytest.raises(ConfigError, match="n"):
        engine.generate(["p"], 0, SamplingParams(max_new_tokens=2))
    with pytest.raises(ConfigError, match="problem_ids"):
        engine.generate(["p"], 1, SamplingParams(max_new_tokens=2), problem_ids=["a", "b"])


def test_toy_task_and_template():
    task, template = ToyTask(), ToyTemplate()
    problem = task.problems("eval")[1]
    assert problem.answer == "7" and template.render(problem.question) == "Q: 3+4\nA:"
    assert task.verify(problem, template.write_answer("7"), template).correct
    wrong = task.verify(problem, " =8\n", template)
    assert not wrong.correct and wrong.format_ok and wrong.reward == 0
    assert task.verify(problem, "no answer", template).format_ok is False
    assert task.verify(problem, "boom", template).error is not None
