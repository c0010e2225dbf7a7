"""The benchmark's fixed-length engine (fast, tiny random model)."""

from __future__ import annotations

import pytest

from ablate.base.records import SamplingParams
from ablate.rollout.hf import HFEngine
from ablate.testing import char_tokenizer, tiny_llama
from devtools.bench.step import FixedLengthEngine, LengthError, fixed_length_engine


@pytest.fixture(scope="module")
def tiny():
    tokenizer = char_tokenizer()
    return tiny_llama(seed=0, tokenizer=tokenizer), tokenizer


def test_fixed_length_engine_gives_exactly_t_tokens(tiny):
    model, tokenizer = tiny
    # stop strings random text keeps hitting: they end plain completions early, never these
    sampling = SamplingParams(max_new_tokens=9, stop=tuple("0123456789abc"), seed=3)
    plain = HFEngine(model, tokenizer).generate(["1+2=", "30+4="], 3, sampling)
    assert min(plain.lengths.tolist()) < 9
    engine = fixed_length_engine(model, tokenizer)
    rollouts = engine.generate(["1+2=", "30+4="], 3, sampling)
    assert rollouts.lengths.tolist() == [9] * 6
    assert rollouts.completion_mask.sum().item() == 6 * 9


def test_fixed_length_engine_refuses_short_completions():
    class Short:
        def generate(self, prompts, n, sampling, *, problem_ids=None):
            from ablate.testing import ScriptedEngine

            return ScriptedEngine(lambda p, j, c: "ab").generate(prompts, n, sampling)

    with pytest.raises(LengthError, match="ablate"):
        FixedLengthEngine(Short()).generate(["x"], 2, SamplingParams(max_new_tokens=8))
