"""The RL loop's plumbing with a scripted engine on a tiny random model: dynamic sampling,
shaping, KL placement, budgets, common random numbers, determinism, resume and divergence."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from ablate.base.records import Counters
from ablate.factors.algorithms import Algorithm
from ablate.factors.estimators import make_estimator
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.stages.batch import PromptStream, StepSampler, collect_batch
from ablate.stages.checkpoint import TRAINER, checkpoint_dirs
from ablate.stages.forward import frozen_pass
from ablate.stages.shaping import shape
from ablate.tasks import get_task
from ablate.tasks.base import CHARSET
from ablate.tasks.templates import get_template
from ablate.testing import ScriptedEngine, char_tokenizer, tiny_llama
from ablate.tracking import MemoryTracker
from ablate.trial import setup_trial, train


def shaped_and_estimated(batch, policy, ref, algo, estimator=None):
    """The step's shape → estimate stages on `batch`, as `rl_step` runs them."""
    budget = spec().budget
    estimator = estimator or make_estimator(
        algo, group_size=budget.group_size, hidden_size=policy.config.hidden_size
    )
    frozen = frozen_pass(policy, ref, estimator.head, batch.rollouts, budget.temperature)
    shaped = shape(batch, frozen.old_logp, frozen.ref_logp, algo, budget.max_new_tokens)
    return shaped, estimator.estimate(shaped, frozen.readout)


TOK = char_tokenizer(CHARSET)
PLAIN = get_template("plain")
TASK_OPTIONS = (("n_train", 64), ("n_eval", 8))


def loaded(seed: int = 0):
    return tiny_llama(seed, tokenizer=TOK), TOK


def true_sum(prompt: str) -> int:
    return sum(int(x) for x in re.search(r"Question: ([\d+]+)", prompt).group(1).split("+"))


def mixed(prompt: str, j: int, call: int) -> str:
    """Even samples correct, odd samples off by one: every group is informative."""
    answer = true_sum(prompt) + (j % 2)
    return " 1+2=3;" + PLAIN.write_answer(str(answer))


def spec(algo: Algorithm | None = None, **kw) -> TrialSpec:
    defaults = dict(
        algorithm=algo or Algorithm(),
        model="tiny",
        task="arithmetic",
        task_options=TASK_OPTIONS,
        template="plain",
        seed=0,
        budget=Budget(max_steps=2, prompts_per_step=2, group_size=4, max_new_tokens=24),
        eval=EvalSpec(max_problems=4, n_samples=2, ks=(1, 2), at_start=False),
    )
    defaults.update(kw)
    return TrialSpec(**defaults)


def scripted(script):
    return lambda model, tok: ScriptedEngine(script, tokenizer=tok)


def batch_parts(algo: Algorithm, script, budget: Budget | None = None):
    budget = budget or spec().budget
    task = get_task("arithmetic", n_train=64, n_eval=8)
    counters = Counters()
    sampler = StepSampler(ScriptedEngine(script, tokenizer=TOK), task, PLAIN, algo, budget, seed=0)
    batch = collect_batch(sampler, PromptStream(task.problems("train"), 0), 1, counters)
    return batch, counters


# --- dynamic sampling -------------------------------------------------------------------------
def test_dynamic_sampling_fills_the_batch_and_charges_every_sample():
    def late_signal(prompt, j, call):  # uniform groups for two batches, then mixed
        return mixed(prompt, j, call) if call >= 2 else mixed(prompt, 0, call)

    batch, counters = batch_parts(Algorithm(dynamic_sampling=True), late_signal)
    assert batch.gen_batches == 3 and batch.rollouts.num_samples == 2 * 4
    assert counters.generated_samples == 3 * 2 * 4 and counters.extra_gen_batches == 2
    # the two discarded batches are charged too: about three times the kept batch's tokens
    assert counters.generated_tokens > 2.5 * int(batch.rollouts.lengths.sum())
    groups = batch.correct.reshape(-1, 4)
    assert (groups.any(1) & ~groups.all(1)).all()


def test_dynamic_sampling_fails_clearly_at_the_limit():
    result = train(
        spec(Algorithm(dynamic_sampling=True, max_gen_batches=3)),
        loaded=loaded(),
        engine=scripted(lambda p, j, c: mixed(p, 0, c)),
    )
    assert result.outcome == "failed" and result.steps == 0
    assert "max_gen_batches=3" in result.message and "0 of 2 groups" in result.message
    assert result.budget["budget/generated_samples"] == 3 * 2 * 4


def test_without_dynamic_sampling_uniform_groups_are_kept():
    batch, counters = batch_parts(Algorithm(), lambda p, j, c: mixed(p, 0, c))
    assert batch.rollouts.num_samples == 8 and counters.gen_batches == 1


# --- shaping and KL -------------------------------------------------------------------------
def test_soft_overlong_punishment_and_truncation_mask():
    def long_or_short(prompt, j, call):
        return mixed(prompt, j, call) + ("x" * 40 if j == 0 else "")

    algo = Algorithm(overlong_buffer=8, mask_truncated=True).resolve(max_new_tokens=24)
    batch, _ = batch_parts(algo, long_or_short)
    model, _ = loaded()
    tb, _ = shaped_and_estimated(batch, model, None, algo)
    metrics = tb.metrics
    r = batch.rollouts
    assert r.truncated.tolist() == [True, False, False, False] * 2
    expected = batch.scores + torch.where(r.lengths >= 24, -1.0, -(r.lengths - 16).clamp(min=0) / 8)
    torch.testing.assert_close(tb.rewards, expected)
    assert tb.loss_mask[r.truncated].sum() == 0 and tb.loss_mask[~r.truncated].sum() > 0
    assert metrics["reward/overlong_penalty_mean"] < 0


def test_kl_in_reward_shapes_rewards_and_kl_in_loss_does_not():
    batch, _ = batch_parts(Algorithm(), mixed)
    policy, ref = loaded(0)[0], loaded(1)[0]
    in_reward = Algorithm(kl_coef=0.1, kl_in="reward")
    tb_r, _ = shaped_and_estimated(batch, policy, ref, in_reward)
    assert tb_r.ref_logp is None and tb_r.metrics["reward/kl_penalty_mean"] > 0
    assert (tb_r.rewards < batch.scores).all()
    tb_l, _ = shaped_and_estimated(batch, policy, ref, Algorithm(kl_coef=0.1))
    assert tb_l.ref_logp is not None and torch.equal(tb_l.rewards, batch.scores)


def test_reference_model_only_when_kl_is_on():
    assert setup_trial(spec(), loaded=loaded(), engine=scripted(mixed)).ref is None
    s = setup_trial(spec(Algorithm(kl_coef=0.04)), loaded=loaded(), engine=scripted(mixed))
    assert s.ref is not None and not any(p.requires_grad for p in s.ref.parameters())


def test_the_stages_views_of_a_setup_are_built_once():
    s = setup_trial(spec(), loaded=loaded(), engine=scripted(mixed))
    assert s.sampler is s.sampler and s.learner is s.learner
    assert s.update_config is s.update_config
    assert s.sampler.engine is s.engine and s.learner.optimizer is s.optimizer


# --- budgets and seeds ------------------------------------------------------------------------
def test_step_budget_stops_where_it_should():
    tracker = MemoryTracker()
    result = train(
        spec(budget=dataclasses.replace(spec().budget, max_steps=3)),
        tracker=tracker,
        loaded=loaded(),
        engine=scripted(mixed),
    )
    assert result.outcome == "finished" and result.steps == 3
    assert [s for s, _ in tracker.history("reward/mean")] == [1, 2, 3]
    assert "eval/pass_at_1" in result.final_eval


def test_generated_token_budget_stops_early():
    tracker = MemoryTracker()
    budget = dataclasses.replace(spec().budget, max_steps=50, max_generated_tokens=150)
    result = train(spec(budget=budget), tracker=tracker, loaded=loaded(), engine=scripted(mixed))
    tokens = [v for _, v in tracker.history("budget/generated_tokens")]
    assert result.steps < 50 and tokens[-1] >= 150 and tokens[-2] < 150


def test_same_seed_gives_two_algorithms_identical_first_batches():
    seen: dict[str, list] = {}

    def recording(name):
        def factory(model, tok):
            from ablate.rollout.hf import HFEngine

            engine = HFEngine(model, tok)
            original = engine.generate

            def generate(prompts, n, sampling, **kw):
                out = original(prompts, n, sampling, **kw)
                seen.setdefault(name, []).append((list(prompts), list(out.texts)))
                return out

            engine.generate = generate
            return engine

        return factory

    budget = dataclasses.replace(spec().budget, max_steps=1)
    dapo = Algorithm(clip_high=0.28, loss_agg="token_mean")
    train(spec(budget=budget), loaded=loaded(), engine=recording("grpo"))
    train(spec(dapo, budget=budget), loaded=loaded(), engine=recording("dapo"))
    train(spec(budget=budget, seed=1), loaded=loaded(), engine=recording("seed1"))
    assert seen["grpo"][0] == seen["dapo"][0]
    assert seen["grpo"][0][0] != seen["seed1"][0][0]


# --- determinism, resume, divergence ----------------------------------------------------------
def _comparable(tracker: MemoryTracker):
    return [
        (s, {k: v for k, v in m.items() if not k.startswith("perf/") and "wall" not in k})
        for s, m in tracker.metrics
    ]


def test_same_trial_twice_gives_identical_metrics():
    runs = []
    for _ in range(2):
        tracker = MemoryTracker()
        train(
            spec(Algorithm(minibatches=2)), tracker=tracker, loaded=loaded(), engine=scripted(mixed)
        )
        runs.append(_comparable(tracker))
    assert runs[0] == runs[1]
    assert any(m.get("policy/grad_norm", 0) > 0 for _, m in runs[0])


def test_resume_after_kill_equals_uninterrupted_run(tmp_path):
    s = spec(
        Algorithm(minibatches=2),
        budget=dataclasses.replace(spec().budget, max_steps=4),
        checkpoint_every=1,
    )
    full_model, _ = loaded()
    train(s, run_dir=tmp_path / "full", loaded=(full_model, TOK), engine=scripted(mixed))

    def kill_at_2(step, total, metrics):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(
            s, run_dir=tmp_path / "cut", loaded=loaded(), engine=scripted(mixed), progress=kill_at_2
        )
    resumed_model, _ = loaded()
    result = train(s, run_dir=tmp_path / "cut", loaded=(resumed_model, TOK), engine=scripted(mixed))
    assert result.steps == 4
    init = loaded()[0].state_dict()
    full, resumed = full_model.state_dict(), resumed_model.state_dict()
    assert any(not torch.equal(full[k], init[k]) for k in full)  # training moved the weights
    for key in full:
        assert torch.equal(full[key], resumed[key]), key


def test_injected_nan_ends_the_trial_as_diverged_with_the_step():
    model, tok = loaded()

    def poison(step, total, metrics):
        if step == 2:
            with torch.no_grad():
                next(model.parameters()).view(-1)[0] = float("nan")

    budget = dataclasses.replace(spec().budget, max_steps=5)
    result = train(
        spec(budget=budget), loaded=(model, tok), engine=scripted(mixed), progress=poison
    )
    assert result.outcome == "diverged" and result.steps == 2
    assert "step 3" in result.message and "not finite" in result.message


# --- PPO's critic -----------------------------------------------------------------------------
PPO = Algorithm(advantage="gae", kl_coef=0.1, kl_estimator="k1", kl_in="reward", ppo_epochs=2)


def test_gae_batch_has_per_token_advantages_and_kl_in_the_token_rewards():
    algo = dataclasses.replace(PPO, gae_lambda=1.0)
    batch, _ = batch_parts(algo, mixed)
    policy, ref = loaded(0)[0], loaded(1)[0]
    tb, est = shaped_and_estimated(batch, policy, ref, algo)
    m, returns = est.metrics, est.targets.returns
    mask = batch.rollouts.completion_mask
    assert est.advantages.shape == mask.shape and returns.shape == mask.shape
    assert est.advantages[mask == 0].abs().sum() == 0
    real = est.advantages[mask.bool()]  # whitened over the batch's tokens
    assert abs(real.mean().item()) < 1e-5 and real.std().item() == pytest.approx(1.0, abs=1e-4)
    # V_old = 0 (zero head), gamma = lambda = 1: the returns are the rewards-to-go, i.e. the
    # outcome plus the KL penalties of the tokens still to come
    kl_tok = (tb.old_logp - frozen(ref, batch)) * mask
    to_go = torch.flip(torch.cumsum(torch.flip(-0.1 * kl_tok, [1]), 1), [1])
    expected_first = batch.scores + to_go[:, 0]
    torch.testing.assert_close(returns[:, 0], expected_first, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(tb.rewards, batch.scores - 0.1 * kl_tok.sum(-1))
    assert m["critic/explained_var"] == pytest.approx(0.0, abs=1e-6)  # V = 0 explains nothing


def frozen(model, batch):
    from ablate.stages.forward import frozen_logprobs

    return frozen_logprobs(model, batch.rollouts, spec().budget.temperature)


def test_gae_needs_the_value_heads_outputs():
    batch, _ = batch_parts(PPO, mixed)
    policy = loaded()[0]
    gae = make_estimator(PPO, group_size=4, hidden_size=policy.config.hidden_size)
    frozen = frozen_pass(policy, None, None, batch.rollouts, 1.0)
    shaped = shape(batch, frozen.old_logp, None, PPO, 24)
    with pytest.raises(ValueError, match="needs the value head"):
        gae.estimate(shaped, None)


def test_value_head_only_for_gae_and_in_its_own_optimizer_group():
    group = setup_trial(spec(), loaded=loaded(), engine=scripted(mixed))
    assert group.estimator.head is None and group.estimator.trained_modules() == {}
    assert len(group.optimizer.param_groups) == 1
    algo = Algorithm(advantage="gae", critic_lr=1e-3)
    s = setup_trial(spec(algo), loaded=loaded(), engine=scripted(mixed))
    assert s.estimator.trained_modules() == {"critic": s.estimator.head}
    assert [g["lr"] for g in s.optimizer.param_groups] == [spec().optim.lr, 1e-3]


def test_ppo_resume_after_kill_equals_uninterrupted_run_critic_included(tmp_path):
    s = spec(PPO, budget=dataclasses.replace(spec().budget, max_steps=4), checkpoint_every=1)
    full_tracker = MemoryTracker()
    full_model, _ = loaded()
    train(
        s,
        tracker=full_tracker,
        run_dir=tmp_path / "full",
        loaded=(full_model, TOK),
        engine=scripted(mixed),
    )

    def kill_at_2(step, total, metrics):
        if step == 2:
            raise KeyboardInterrupt

    cut_tracker = MemoryTracker()
    with pytest.raises(KeyboardInterrupt):
        train(
            s,
            tracker=cut_tracker,
            run_dir=tmp_path / "cut",
            loaded=loaded(),
            engine=scripted(mixed),
            progress=kill_at_2,
        )
    resumed_model, _ = loaded()
    result = train(
        s,
        tracker=cut_tracker,
        run_dir=tmp_path / "cut",
        loaded=(resumed_model, TOK),
        engine=scripted(mixed),
    )
    assert result.steps == 4
    full, resumed = full_model.state_dict(), resumed_model.state_dict()
    for key in full:
        assert torch.equal(full[key], resumed[key]), key
    # the critic's trajectory (value head weights and Adam state) resumed exactly too
    full_values = [v for _, v in full_tracker.history("critic/value_mean")]
    cut_values = [v for _, v in cut_tracker.history("critic/value_mean")]
    assert len(full_values) == 4 and full_values == cut_values
    assert full_values[-1] != 0
    saved = [
        torch.load(checkpoint_dirs(tmp_path / run)[0] / TRAINER, weights_only=False)["estimator"][
            "value_head"
        ]
        for run in ("full", "cut")
    ]
    assert saved[0]["weight"].abs().sum() > 0
    for key in saved[0]:
        assert torch.equal(saved[0][key], saved[1][key]), key
