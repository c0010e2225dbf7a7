"""One RL step, top to bottom: sample → forward → shape → estimate → correct → update → account →
log.

Each stage is one call that returns a record (`ablate.base.records`); the step reads its compute and
its metrics from those records and never re-enters a stage. The one call back up is the engine's
weight sync after the update (the sampler must sample from the new weights).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ablate.base.errors import DivergedError
from ablate.base.records import Estimate, FrozenPass, ScoredBatch, ShapedBatch, UpdateResult
from ablate.stages import diagnostics as diag
from ablate.stages.batch import PromptStream, collect_batch
from ablate.stages.compute import step_compute
from ablate.stages.forward import frozen_pass
from ablate.stages.offpolicy import correct
from ablate.stages.shaping import shape
from ablate.stages.update import run_updates
from ablate.trial.setup import Setup, TrainState


@dataclass
class Learned:
    """What the learning stages of one step returned, in their order."""

    frozen: FrozenPass
    shaped: ShapedBatch
    estimate: Estimate
    update: UpdateResult


def rl_step(s: Setup, state: TrainState, stream: PromptStream) -> dict[str, float]:
    """One RL step. A batch that zero-variance filtering emptied trains nothing (the step still
    counts, and is logged)."""
    step = state.step + 1
    t0 = time.perf_counter()
    batch = collect_batch(s.sampler, stream, step, state.counters)
    t_gen = time.perf_counter()
    learned = learn(s, batch, step) if batch.rollouts.num_samples else None
    t_end = time.perf_counter()
    _account(s, state, batch, learned)
    metrics = step_metrics(s, state, batch, learned)
    metrics.update(
        {
            "perf/gen_seconds": t_gen - t0,
            "perf/train_seconds": t_end - t_gen,
            "perf/step_seconds": t_end - t0,
        }
    )
    # The harness's own cost (building this dict), so benchmarks can report it as a share.
    metrics["perf/diagnostics_seconds"] = time.perf_counter() - t_end
    state.step = step
    state.stream_position = stream.position
    state.prompt_history = {pid: list(counts) for pid, counts in stream.history.items()}
    state.retired_prompts = sorted(stream.retired)
    return metrics


def learn(s: Setup, batch: ScoredBatch, step: int) -> Learned:
    """Forward → shape → estimate → update on a non-empty batch, then the engine follows the
    new weights."""
    algo, budget = s.algo, s.spec.budget
    frozen = frozen_pass(s.model, s.ref, s.estimator.head, batch.rollouts, budget.temperature)
    shaped = shape(batch, frozen.old_logp, frozen.ref_logp, algo, budget.max_new_tokens)
    estimate = s.estimator.estimate(shaped, frozen.readout)
    if not torch.isfinite(estimate.advantages).all():
        raise DivergedError(step, "advantages (non-finite rewards)")
    shaped = correct(shaped, estimate.advantages, algo, staleness=algo.rollout_staleness)
    update = run_updates(s.learner, shaped, estimate, s.update_config, step)
    s.engine.sync_weights(s.model)
    return Learned(frozen, shaped, estimate, update)


def _account(s: Setup, state: TrainState, batch: ScoredBatch, learned: Learned | None) -> None:
    """The step's trained tokens and model FLOPs, read from what its stages say they ran."""
    frozen, update = (learned.frozen, learned.update) if learned else (None, None)
    generate, train = step_compute(s.shape, batch, frozen, update)
    state.generate_flops += generate
    state.train_flops += train
    if update is not None:
        state.counters.trained_tokens += update.trained_tokens


def step_metrics(
    s: Setup, state: TrainState, batch: ScoredBatch, learned: Learned | None
) -> dict[str, float]:
    """Every sample generated (so arms compare), for a filtered batch also the trained ones,
    the learning stages' metrics, the budget counters and the cumulative model FLOPs."""
    g, algo = s.spec.budget.group_size, s.algo
    filtered = algo.dynamic_sampling or algo.zero_variance_filter
    kept = diag.sample_metrics(batch, g, suffix="_kept") if filtered and learned else {}
    trained = _learning_metrics(learned) if learned else {"data/skipped_update": 1.0}
    return {
        **diag.sample_metrics(batch.all_samples, g),
        **kept,
        **batch.metrics,
        **trained,
        **state.counters.as_metrics(),
        "budget/gen_batches_step": float(batch.gen_batches),
        # non-padding tokens through forward + backward (for FLOP utilisation: 6 x params x this)
        "perf/update_tokens": float(learned.update.update_tokens if learned else 0),
        # cumulative model FLOPs (stages.compute): sampling, frozen passes + updates, their sum
        "perf/generate_flops": state.generate_flops,
        "perf/train_flops": state.train_flops,
        "perf/model_flops": state.axes()["flops"],
    }


def _learning_metrics(learned: Learned) -> dict[str, float]:
    shaped, estimate, update = learned.shaped, learned.estimate, learned.update
    return {
        **shaped.metrics,
        **estimate.metrics,
        **diag.advantage_metrics(estimate.advantages, shaped.loss_mask),
        **diag.mean_stats(update.stats),
        **update.estimator_metrics,
    }
