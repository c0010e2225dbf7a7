"""The seed-batching measurement (`make bench`, section 6): its stacked passes compute each
trial's own model, so the speed-up it reports compares equal work."""

from __future__ import annotations

import pytest
import torch

from devtools.bench.batching import pass_rows, quickstart_arms, seed_models
from devtools.bench.options import SuiteOptions
from devtools.bench.stacked import StackedDecoder, stack_models, stacked_logits


@pytest.fixture(scope="module")
def models():
    from ablate.models import load_model

    model, _ = load_model("rl_ready")
    return seed_models(model, 3)


def test_seed_models_differ_from_each_other(models):
    a, b = (m.model.layers[0].mlp.down_proj.weight for m in models[:2])
    assert not torch.equal(a, b)


def test_stacked_forward_is_each_trials_own_model(models):
    ids = torch.randint(
        models[0].config.vocab_size, (3, 4, 12), generator=torch.Generator().manual_seed(1)
    )
    with torch.no_grad():
        stacked = stacked_logits(stack_models(models), ids)
        lone = torch.stack([m(ids[i]).logits for i, m in enumerate(models)])
        swapped = models[1](ids[0]).logits
    assert stacked.shape == lone.shape
    torch.testing.assert_close(stacked, lone, atol=1e-5, rtol=1e-5)
    # and not any model's: trial 0's rows through trial 1's weights differ
    assert (stacked[0] - swapped).abs().max() > 1e-4


def test_stacked_decoder_matches_the_full_forward_token_by_token(models):
    ids = torch.randint(
        models[0].config.vocab_size, (3, 2, 10), generator=torch.Generator().manual_seed(2)
    )
    w = stack_models(models)
    decoder = StackedDecoder(w, rows=2, capacity=10)
    with torch.no_grad():
        steps = torch.stack([decoder.step(ids[:, :, j]) for j in range(10)], 2)
        full = stacked_logits(w, ids)
    torch.testing.assert_close(steps, full, atol=1e-4, rtol=1e-4)


def test_stacked_gradients_are_the_lone_gradients(models):
    ids = torch.randint(
        models[0].config.vocab_size, (3, 2, 8), generator=torch.Generator().manual_seed(3)
    )

    def grads(weights, rows):
        logp = torch.log_softmax(stacked_logits(weights, rows[:, :, :-1]), -1)
        logp.gather(-1, rows[:, :, 1:, None]).sum().backward()
        return [leaf.grad for leaf in weights.leaves()]

    stacked = grads(stack_models(models, grad=True), ids)
    for i, model in enumerate(models):
        lone = grads(stack_models([model], grad=True), ids[i : i + 1])
        for s, g in zip(stacked, lone, strict=True):
            torch.testing.assert_close(s[i : i + 1], g, atol=1e-5, rtol=1e-4)


def test_pass_rows_report_speedups_as_lone_over_stacked(models):
    rows = pass_rows(models[0], trials=2, repeats=2, warmup=0, new_tokens=2)
    by_metric = {r.metric: r for r in rows}
    for part in ("decode", "update"):
        lone, stacked = by_metric[f"{part} lone"], by_metric[f"{part} stacked"]
        speedup = by_metric[f"{part} speed-up"].summary.median
        assert speedup == pytest.approx(lone.summary.median / stacked.summary.median)
    assert by_metric["step speed-up"].target is None  # the goal is stated at 5 seeds only


def test_quickstart_arms_keep_its_budget_and_drop_its_extras():
    study = quickstart_arms("bench-q", seeds=3, steps=None, eval_problems=None)
    assert [a.name for a in study.arms] == ["grpo", "dr_grpo", "dapo", "gspo"]
    assert list(study.seeds) == [0, 1, 2]
    assert study.budget.max_steps == 50 and study.eval.max_problems is None
    assert study.passk is None and not study.extra and study.positive_control is None
    short = quickstart_arms("bench-q", seeds=2, steps=2, eval_problems=4)
    assert short.budget.max_steps == 2 and short.eval.max_problems == 4


def test_quick_options_run_the_batching_section_small():
    quick = SuiteOptions.quick()
    assert "batching" in quick.sections
    assert quick.batch_trials == (2,) and quick.batch_steps == 2
    assert SuiteOptions().batch_trials == (3, 5) and SuiteOptions().batch_steps is None


def test_rate_rows_scale_the_measured_lone_rate_by_each_bound(monkeypatch, tmp_path):
    import devtools.bench.batching as batching

    monkeypatch.setattr(batching, "trials_per_hour", lambda results, seeds, o: (36.0, 4))
    rows = batching.rate_rows(tmp_path, 2, SuiteOptions.quick(), speedup=0.5, shared=1.25)
    medians = [r.summary.median for r in rows]
    assert medians == pytest.approx([400.0, 200.0, 500.0])  # 4 trials in 36 s = 400 per hour
    assert "one trial per process" in rows[0].metric and "36 s wall, 2 steps" in rows[0].note


def test_step_floor_splits_the_step_into_kernels_and_shareable_cost():
    from devtools.bench.batching import step_floor

    floor = step_floor(steps=1, warmup=0)
    assert 0 < floor.kernels < floor.wall and floor.bound == pytest.approx(
        floor.wall / floor.kernels
    )
    # what batching can share is a part of the step, never all of it nor nothing
    assert 0 < floor.shareable < floor.profiled_wall - floor.kernels
    assert (
        1
        < floor.gain(2)
        < floor.gain(5)
        < floor.profiled_wall / (floor.profiled_wall - floor.shareable)
    )


def test_step_floor_arithmetic_by_hand():
    from devtools.bench.batching import StepFloor

    floor = StepFloor(wall=0.4, kernels=0.2, profiled_wall=0.5, shareable=0.1)
    assert floor.bound == pytest.approx(2.0)
    # a fifth of the step shared by 5 trials: each pays 0.8 + 0.2 / 5 = 0.84 of it
    assert floor.gain(5) == pytest.approx(1 / 0.84) and floor.gain(1) == pytest.approx(1.0)
