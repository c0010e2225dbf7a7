"""A real train–inference mismatch on a CPU: the bf16/fp16 rollout engine and stale rollouts
(`ablate.rollout.mismatch`), their checks, and a short trial that logs the mismatch."""

from __future__ import annotations

import pytest
import torch

from ablate.base.errors import ConfigError
from ablate.base.records import SamplingParams
from ablate.factors.algorithms import Algorithm
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.objective import policy_loss
from ablate.factors.rollout_corrections import ROLLOUT_CORRECTIONS
from ablate.factors.spec import Budget, TrialSpec
from ablate.rollout import mismatch
from ablate.rollout.mismatch import MismatchedEngine, check_rollout_dtype
from ablate.stages.forward import frozen_logprobs
from ablate.testing import zoo_model_built
from ablate.testing.models import char_tokenizer, tiny_llama

SAMPLING = SamplingParams(max_new_tokens=8, temperature=1.0, seed=0)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"rollout_staleness": -1}, "rollout_staleness=-1 must be an integer >= 0"),
        ({"rollout_staleness": 1.5}, "rollout_staleness=1.5 must be an integer >= 0"),
        ({"rollout_precision": "fp8"}, "rollout_precision='fp8' is not one of"),
    ],
)
def test_bad_mismatch_levels_are_one_line_errors(fields, message):
    with pytest.raises(ConfigError) as err:
        Algorithm(**fields)
    problems = str(err.value).splitlines()[1:]
    assert len(problems) == 1 and message in problems[0]


def test_a_precision_the_machine_lacks_is_a_one_line_error(monkeypatch):
    def no_kernel(*args, **kwargs):
        raise RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'\nmore detail")

    monkeypatch.setattr(mismatch.torch, "log_softmax", no_kernel)
    with pytest.raises(ConfigError) as err:
        check_rollout_dtype("fp16", "cpu")
    assert "\n" not in str(err.value) and "rollout_precision='fp16'" in str(err.value)
    check_rollout_dtype("trainer", "cpu")  # the trainer's own precision needs no check


def _engine(**kw):
    tok = char_tokenizer()
    model = tiny_llama(seed=0, tokenizer=tok)
    return model, tok, MismatchedEngine(model, tok, **kw)


def _perturb(model, scale: float) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale)


def test_stale_engine_samples_from_the_weights_k_updates_old():
    model, _, engine = _engine(staleness=2)
    history = [{k: v.clone() for k, v in model.state_dict().items()}]
    for u in range(1, 5):
        _perturb(model, 0.01)
        history.append({k: v.clone() for k, v in model.state_dict().items()})
        engine.sync_weights(model)
        want = history[max(0, u - 2)]  # after update u the sampler holds update u - 2
        got = engine.sampler_model.state_dict()
        assert all(torch.equal(got[k], want[k]) for k in want), u


def test_bf16_rollouts_differ_from_the_trainer_and_a_correction_changes_the_update():
    model, _, engine = _engine(dtype=torch.bfloat16)
    assert next(engine.sampler_model.parameters()).dtype == torch.bfloat16
    r = engine.generate(["1+2=", "3+4="], 4, SAMPLING)
    assert not r.logprobs_exact and r.logprobs.dtype == torch.float32
    trainer = frozen_logprobs(model.float(), r, 1.0)
    mask = r.completion_mask
    diff = ((trainer - r.logprobs).abs() * mask).sum() / mask.sum()
    assert diff > 1e-4  # bf16 weights and compute move the log-probs
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 1.0, -1.0, 0.5, -0.5])
    algo = Algorithm(rollout_correction="token_truncate", rollout_correction_cap=1.0)
    c = ROLLOUT_CORRECTIONS.get("token_truncate")(trainer, r.logprobs, mask, adv, algo)
    logp = trainer.clone().requires_grad_(True)
    plain, _ = policy_loss(logp, trainer, adv, mask, Algorithm())
    corrected, _ = policy_loss(logp, trainer, adv, mask, Algorithm(), is_weights=c.weights)
    g_plain = torch.autograd.grad(plain, logp, retain_graph=True)[0]
    g_corr = torch.autograd.grad(corrected, logp)[0]
    assert not torch.equal(g_plain, g_corr)


@pytest.mark.skipif(not zoo_model_built("rl_ready"), reason="zoo not available")
def test_a_bf16_trial_logs_the_mismatch_and_the_default_logs_nothing_new():
    from ablate.tracking import MemoryTracker
    from ablate.trial import train

    def run(**fields):
        spec = TrialSpec(
            algorithm=Algorithm(**fields),
            model="rl_ready",
            budget=Budget(max_steps=2, prompts_per_step=2, group_size=4, max_new_tokens=24),
            eval=EvalSpec(max_problems=2, n_samples=1, ks=(1,)),
        )
        tracker = MemoryTracker()
        assert train(spec, tracker=tracker).outcome == "finished"
        return [m for _, m in tracker.metrics if "perf/step_seconds" in m]

    steps = run(rollout_precision="bf16", rollout_correction="token_truncate")
    assert all(m["offpolicy/logp_diff_mean"] > 0 for m in steps)
    assert all(m["offpolicy/prob_pearson"] < 1 for m in steps)
    # the inert-factor check reads this share: a bf16 copy moves a fifth to a third of the
    # tokens by more than 1e-4 (measured; the near-certain ones not at all)
    assert all(m["offpolicy/mismatched_frac"] > 0.1 for m in steps)
    assert not any(k.startswith("offpolicy/") for m in run() for k in m)
