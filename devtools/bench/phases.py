"""A natural-length RL step timed phase by phase: the bench's natural case (GRPO without KL,
8 prompts × G = 8, up to 80 new tokens ending at EOS) with timers around the step's own
functions (the engine's generate, the policy forward, backward, the optimizer step). Read by the
bench's `profile` and `batching` sections and by `python -m devtools profile-step`, which adds
torch's operator tables. Only trainer APIs that predate ragged decoding and packed updates, so
the same timers profile an older checkout (see `devtools.profile_step`)."""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections import defaultdict
from contextlib import contextmanager

import torch

PHASES = ("sampling", "scoring", "forward", "backward", "optimizer", "rest")


def stepper(model: str, seed: int = 0):
    """(setup, state, stream) of the natural case on `model` (a zoo name or folder)."""
    from ablate import baseline
    from ablate.factors.spec import Budget, Optim, TrialSpec
    from ablate.models import load_model
    from ablate.rollout.hf import HFEngine
    from ablate.stages.batch import PromptStream
    from ablate.trial import TrainState, setup_trial

    spec = TrialSpec(
        algorithm=dataclasses.replace(baseline("grpo"), kl_coef=0.0),
        model=model,
        budget=Budget(prompts_per_step=8, group_size=8, max_new_tokens=80),
        optim=Optim(lr=3e-5),
        seed=seed,
    )
    setup = setup_trial(spec, loaded=load_model(model), engine=HFEngine)
    return setup, TrainState(), PromptStream(setup.task.problems("train"), seed)


class Clock:
    """Seconds per phase of the current step, from wrappers around the step's functions."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.profiles: dict[str, torch.profiler.profile] = {}

    @contextmanager
    def phase(self, name: str, profile: str | None = None):
        prof = self.profiles.get(profile) if profile else None
        if prof is not None:
            prof.start()
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - start
            if prof is not None:
                prof.stop()

    def wrap(self, owner, attr: str, name: str, profile: str | None = None) -> None:
        inner = getattr(owner, attr)

        def timed(*args, **kwargs):
            with self.phase(name, profile):
                return inner(*args, **kwargs)

        setattr(owner, attr, timed)


def instrument(clock: Clock, setup) -> None:
    """Time the engine's generate, the policy forward, backward and the optimizer step."""
    import ablate.stages.forward as forward
    import ablate.stages.update as update

    clock.wrap(setup.engine, "generate", "sampling", "sampling")
    # the no-grad passes call it in `forward`, the updates through their own reference
    clock.wrap(forward, "completion_forward", "forward", "update")
    clock.wrap(update, "completion_forward", "forward", "update")
    clock.wrap(torch.Tensor, "backward", "backward", "update")
    clock.wrap(setup.optimizer, "step", "optimizer", "update")


def natural_model(model: str) -> str:
    """A benchmark size's natural-length model folder; a zoo name or folder as given."""
    if model in ("0.53M", "4.2M"):
        from devtools.bench.models import natural_model_dir

        return str(natural_model_dir(model))
    return model


def phase_seconds(model: str, steps: int, warmup: int):
    """Seconds per phase (PHASES, plus "step" and the mean completion "length") of `steps`
    natural-length steps after `warmup` untimed ones; also (setup, state, stream, clock) to go
    on."""
    from ablate.trial import rl_step

    # the optimizer's step is wrapped (timed) after the LR scheduler saw it: expected here
    warnings.filterwarnings("ignore", message=".*optimizer.step\\(\\)` has been overridden")
    setup, state, stream = stepper(natural_model(model))
    clock = Clock()
    instrument(clock, setup)
    rows: dict[str, list[float]] = defaultdict(list)
    for index in range(warmup + steps):
        clock.seconds.clear()
        start = time.perf_counter()
        metrics = rl_step(setup, state, stream)
        wall = time.perf_counter() - start
        if index < warmup:
            continue
        s = clock.seconds
        s["scoring"] = metrics["perf/gen_seconds"] - s["sampling"]
        s["rest"] = wall - sum(s[p] for p in PHASES if p != "rest")
        for p in PHASES:
            rows[p].append(s[p])
        rows["step"].append(wall)
        rows["length"].append(metrics["length/mean"])
    return rows, (setup, state, stream, clock)
