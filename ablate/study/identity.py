"""A trial's identity: the study's trials with each base model's weights hash in their spec, and
so in their id. A model rebuilt under the same name is a different trial, never a resumed one.

The runner ids the trials it trains this way, and the report ids the trials it reads this way
to find their runs: both import it from here, a module that reads weight files and trains
nothing (the report must not import the runner)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from ablate.models import weights_hash
from ablate.study.study import Study, Trial


def with_weights(trials: Sequence[Trial], hashes: Mapping[str, str]) -> list[Trial]:
    """`trials` with `hashes[model]` as each spec's `model_weights` (which enters its id)."""
    return [
        Trial(t.arm, dataclasses.replace(t.spec, model_weights=hashes[t.spec.model]))
        for t in trials
    ]


def identified_trials(
    study: Study,
    hash_weights: Callable[[str], str] = weights_hash,
    chosen: Mapping[str, Mapping[str, object]] | None = None,
) -> list[Trial]:
    """The study's trials with each base model's weights hash, each model hashed once, at each
    tuned arm's `chosen` values; ConfigError when a model's name or folder is unknown or holds
    no weights."""
    trials = study.trials(chosen)
    hashes = {m: hash_weights(m) for m in dict.fromkeys(t.spec.model for t in trials)}
    return with_weights(trials, hashes)
