"""The natural-length benchmark's pieces (fast): cases, length checks and bookkeeping, the
generate-length count, the options, and the natural engine ending rows at EOS."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ablate.base.records import SamplingParams
from ablate.rollout.hf import HFEngine
from devtools.bench.natural import NATURAL_TOKENS, STEP_TARGETS
from devtools.bench.options import SECTIONS, options_from_cli
from devtools.bench.rollout import generated_lengths, zoo_prompts
from devtools.bench.step import LengthError, StepCase, check_max_length, natural_engine
from devtools.bench.trl_step import per_step_means


def test_natural_case_label_and_targets():
    assert StepCase("4.2M", new_tokens=80, natural=True).label == "4.2M P=8 G=8 T≤80 natural"
    assert NATURAL_TOKENS == 80
    assert {size: str(t) for size, t in STEP_TARGETS.items()} == {"0.53M": "≤ 0.5", "4.2M": "≤ 0.5"}


def test_natural_lengths_must_lie_within_the_limit():
    check_max_length([1, 40, 80], 80, "x")
    with pytest.raises(LengthError, match="81"):
        check_max_length([3, 81], 80, "trl")
    with pytest.raises(LengthError):
        check_max_length([], 80, "trl")


def test_trl_lengths_are_averaged_per_step():
    assert per_step_means([2, 4, 10, 20, 7, 9], 2) == [3.0, 15.0, 8.0]


def test_generated_lengths_count_to_the_first_eos_inclusive():
    eos, pad = 2, 0
    new = torch.tensor([[5, 6, eos, pad], [5, 5, 5, 5], [eos, pad, pad, pad]])
    assert generated_lengths(new, eos) == [3, 4, 1]


def test_natural_section_runs_without_trl_as_rollouts_only():
    assert SECTIONS.index("natural") == SECTIONS.index("trl") + 1
    both = options_from_cli(sections="natural")
    assert both.trl and both.sections == ("natural",)
    rollouts_only = options_from_cli(sections="trl,natural", no_trl=True)
    assert rollouts_only.sections == ("natural",) and not rollouts_only.trl
    assert "--no-trl" in rollouts_only.command(Path("x"))


def test_zoo_prompts_are_the_tasks_training_prompts():
    prompts, stop = zoo_prompts(3)
    assert len(prompts) == 3 and len(set(prompts)) == 3 and stop == ()


def test_natural_engine_is_the_trials_own_engine():
    """Not the fixed-length wrapper: EOS and stop strings end rows, finished rows leave."""
    from ablate.testing import char_tokenizer, tiny_llama

    tokenizer = char_tokenizer()
    engine = natural_engine(tiny_llama(seed=0, tokenizer=tokenizer), tokenizer)
    assert type(engine) is HFEngine and engine.ragged
    sampling = SamplingParams(max_new_tokens=9, stop=tuple("0123456789abc"), seed=3)
    assert min(engine.generate(["1+2=", "30+4="], 3, sampling).lengths.tolist()) < 9


def test_trl_samples_the_prompts_ablate_draws_step_for_step(tmp_path):
    """Natural cases give TRL's trainer ablate's prompt stream in order (no shuffling), so the
    two tools' steps answer the same questions and their lengths compare fairly."""
    pytest.importorskip("trl")
    from ablate.models import zoo_path
    from ablate.stages.batch import PromptStream
    from ablate.tasks import get_task
    from ablate.tasks.templates import get_template
    from devtools.bench.trl_step import StepClock, _trainer, ablate_prompts

    stream = PromptStream(get_task("arithmetic").problems("train"), 0)
    assert [p.id for p in ablate_prompts(24)] == [p.id for p in stream.take(24)]
    case = StepCase("0.53M", 2, 4, NATURAL_TOKENS, natural=True)
    clock = StepClock(lambda: None, ablate_steps=0)
    trainer = _trainer(case, zoo_path("rl_ready"), clock, 3, str(tmp_path), [])
    plain = get_template("plain")
    assert trainer.train_dataset["prompt"] == [plain.render(p.question) for p in ablate_prompts(6)]
    assert trainer.args.shuffle_dataset is False
    assert "min_new_tokens" not in (trainer.args.generation_kwargs or {})
