"""A real train–inference mismatch on a CPU: the bf16/fp16 rollout engine and stale rollouts
(`ablate.rollout.mismatch`), their checks, a short trial that logs the mismatch, and the
engine's state: saved with the trial's checkpoints, so a killed trial resumes exactly."""

from __future__ import annotations

import json
import math

import pytest
import torch

from ablate.base.errors import ConfigError, TrialError
from ablate.base.records import SamplingParams
from ablate.factors.algorithms import Algorithm
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.objective import policy_loss
from ablate.factors.rollout_corrections import ROLLOUT_CORRECTIONS
from ablate.factors.spec import Budget, Optim, TrialSpec
from ablate.rollout import mismatch
from ablate.rollout.mismatch import MismatchedEngine, check_rollout_dtype
from ablate.stages.checkpoint import ENGINE, MANIFEST, checkpoint_dirs
from ablate.stages.forward import frozen_logprobs
from ablate.tasks.base import CHARSET
from ablate.testing import zoo_model_built
from ablate.testing.models import char_tokenizer, tiny_llama
from ablate.tracking import MemoryTracker
from ablate.trial import train

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


# --- the engine's state: saved with the checkpoint, restored on resume -------------------------
def _same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a
    )


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_an_engine_loaded_with_another_ones_state_samples_and_lags_identically(dtype):
    model, tok, engine = _engine(staleness=2, dtype=dtype)
    for _ in range(3):  # the sampler holds update 1; updates 2 and 3 are queued
        _perturb(model, 0.01)
        engine.sync_weights(model)
    state = engine.state()
    assert len(state["pending"]) == 2
    other = MismatchedEngine(tiny_llama(seed=1, tokenizer=tok), tok, dtype=dtype, staleness=2)
    other.load_state(state)
    assert _same_weights(other.sampler_model.state_dict(), engine.sampler_model.state_dict())
    assert all(_same_weights(a, b) for a, b in zip(other.pending, engine.pending, strict=True))
    mine, theirs = (e.generate(["1+2=", "3+4="], 4, SAMPLING) for e in (engine, other))
    assert torch.equal(mine.completion_ids, theirs.completion_ids)
    assert torch.equal(mine.logprobs, theirs.logprobs)
    _perturb(model, 0.01)  # the next update: both take update 2 off their queue
    for e in (engine, other):
        e.sync_weights(model)
    assert _same_weights(other.sampler_model.state_dict(), engine.sampler_model.state_dict())
    # the state is a copy: syncs after `state()` changed neither it nor the loaded engine
    assert not _same_weights(state["sampler"], engine.sampler_model.state_dict())


def test_an_engine_state_that_does_not_fit_is_refused():
    model, _, engine = _engine(staleness=1)
    for _ in range(2):
        engine.sync_weights(model)
    two_queued = {**engine.state(), "pending": engine.state()["pending"] * 2}
    with pytest.raises(ValueError, match="queues 2 snapshots, more than the staleness 1"):
        engine.load_state(two_queued)
    renamed = {"sampler": {"w": torch.zeros(1)}, "pending": []}
    with pytest.raises(ValueError, match="weights of another model"):
        engine.load_state(renamed)


TOK = char_tokenizer(CHARSET)


def _trial(**fields) -> TrialSpec:
    """4 steps on a tiny random model, a checkpoint after each; an entropy bonus and a large
    learning rate move the weights (a random model's rewards are all 0: no advantage)."""
    return TrialSpec(
        algorithm=Algorithm(entropy_coef=0.05, **fields),
        model="tiny",
        task_options=(("n_train", 64), ("n_eval", 8)),
        budget=Budget(max_steps=4, prompts_per_step=2, group_size=4, max_new_tokens=12),
        optim=Optim(lr=1e-2),
        eval=EvalSpec(max_problems=4, n_samples=2, ks=(1, 2), at_start=False),
        checkpoint_every=1,
    )


def _stop_after_step_2(step, total, metrics):
    if step == 2:  # after step 2's checkpoint: as a kill there would
        raise KeyboardInterrupt


def _killed_at_2(spec: TrialSpec, run_dir, tracker: MemoryTracker) -> None:
    with pytest.raises(KeyboardInterrupt):
        loaded = (tiny_llama(0, tokenizer=TOK), TOK)
        train(spec, tracker=tracker, run_dir=run_dir, loaded=loaded, progress=_stop_after_step_2)


def _history(tracker: MemoryTracker) -> list[tuple[int, dict[str, float]]]:
    """Every logged metric but timings, NaN (a mean over no samples) made comparable."""
    return [
        (step, {k: "nan" if math.isnan(v) else v for k, v in m.items() if _timeless(k)})
        for step, m in tracker.metrics
    ]


def _timeless(key: str) -> bool:
    return not key.startswith("perf/") and "wall" not in key


@pytest.mark.parametrize(
    "fields", [{"rollout_staleness": 2}, {"rollout_precision": "bf16", "rollout_staleness": 0}]
)
def test_a_mismatched_trial_killed_after_a_checkpoint_resumes_exactly(tmp_path, fields):
    spec = _trial(**fields)
    full = MemoryTracker()
    train(spec, tracker=full, run_dir=tmp_path / "full", loaded=(tiny_llama(0, tokenizer=TOK), TOK))
    cut = MemoryTracker()
    _killed_at_2(spec, tmp_path / "cut", cut)
    assert (checkpoint_dirs(tmp_path / "cut")[0] / ENGINE).is_file()
    train(spec, tracker=cut, run_dir=tmp_path / "cut", loaded=(tiny_llama(0, tokenizer=TOK), TOK))
    want = _history(full)
    assert [s for s, _ in want] == [1, 2, 3, 4, 4]  # 4 steps, then the final eval
    # the sampler's log-probs after the resume: they move with the weights it samples from
    assert len({m["offpolicy/logp_diff_mean"] for s, m in want[:4]}) == 4
    assert _history(cut) == want  # bit for bit: the resume sampled from the same weights


def test_a_checkpoint_without_the_engine_state_is_refused_in_one_line(tmp_path):
    spec = _trial(rollout_staleness=2)
    _killed_at_2(spec, tmp_path, MemoryTracker())
    for folder in checkpoint_dirs(tmp_path):  # as checkpoints written before engine.pt
        (folder / ENGINE).unlink()
        manifest = json.loads((folder / MANIFEST).read_text())
        del manifest["sha256"][ENGINE]
        (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(TrialError) as err:
        train(spec, run_dir=tmp_path, loaded=(tiny_llama(0, tokenizer=TOK), TOK))
    assert "\n" not in str(err.value) and "holds no rollout engine state" in str(err.value)
    assert "fresh run_dir" in str(err.value)


def test_a_plain_trial_checkpoints_no_engine_state(tmp_path):
    spec = _trial()
    train(spec, run_dir=tmp_path, loaded=(tiny_llama(0, tokenizer=TOK), TOK))
    for folder in checkpoint_dirs(tmp_path):
        listed = json.loads((folder / MANIFEST).read_text())["sha256"]
        assert sorted(listed) == ["model.safetensors", "state.json", "trainer.pt"]
        assert not (folder / ENGINE).exists()
