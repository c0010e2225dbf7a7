"""What defines one trial: algorithm, base model, task, template, seed, budget, optimiser, eval.

Frozen and keyword-only like `Algorithm`; `TrialSpec.id` is a stable hash of everything that
defines the trial, so the same trial is recognised across processes and machines.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

from ablate.base.devices import device_problems
from ablate.base.errors import ConfigError
from ablate.factors.algorithms import Algorithm
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.fields import Rule, listed_problems, record_problems


@dataclass(frozen=True, kw_only=True)
class Budget:
    """How much each trial may spend; arms of one comparison share it."""

    max_steps: int = 100
    """Optimizer-step budget counted in RL steps (one rollout batch each)."""
    max_generated_tokens: int | None = None
    """Stop once this many tokens were generated (compute-matched comparisons); None = off."""
    prompts_per_step: int = 8
    """Prompts (groups) per RL step."""
    group_size: int = 8
    """Completions per prompt (G)."""
    max_new_tokens: int = 80
    """Generation limit per completion."""
    temperature: float = 1.0
    """Rollout sampling temperature (the trainer's log-probs use the same temperature)."""
    top_p: float = 1.0
    """Rollout nucleus sampling: must stay 1 (off) for training, see `TRUNCATED_SAMPLING`."""
    top_k: int = 0
    """Rollout top-k sampling: must stay 0 (off) for training, see `TRUNCATED_SAMPLING`."""

    RULES: ClassVar[dict[str, Rule]] = {
        "max_steps": Rule(low=1),
        "max_generated_tokens": Rule(low=1, note="None = off"),
        "prompts_per_step": Rule(low=1),
        "group_size": Rule(low=2, note="one sample has no group baseline"),
        "max_new_tokens": Rule(low=1),
        "temperature": Rule(above=0),
        "top_p": Rule(above=0, high=1, note="1 = off"),
        "top_k": Rule(low=0, note="0 = off"),
    }

    def problems(self) -> list[str]:
        if wrong := record_problems(self):
            return wrong
        truncated = f"top_p={self.top_p}, top_k={self.top_k}: {TRUNCATED_SAMPLING}"
        return listed_problems(self, {truncated: self.top_p == 1 and self.top_k == 0})


#: Why training refuses top-p/top-k: the trainer's log-probs are the full distribution's,
#: log_softmax(logits / T), while a truncated sampler's are its renormalised distribution's
#: (vLLM's "processed_logprobs", `Rollouts.logprobs`). Evaluation may filter: it reads texts only.
TRUNCATED_SAMPLING = (
    "top-p/top-k sampling is for evaluation only (e.g. `ablate passk --top-p`), not training: "
    "use top_p=1, top_k=0"
)


@dataclass(frozen=True, kw_only=True)
class Optim:
    """Optimiser settings (trial settings, not algorithm factors)."""

    lr: float = 3e-5
    """AdamW learning rate (measured on the zoo's 0.53M model: 3e-5 improves it, 1e-4
    degrades it)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    grad_clip: float = 1.0
    """Max gradient norm (0 = no clipping)."""
    warmup_steps: int = 0
    """Linear LR warm-up over this many optimizer updates, then constant."""

    RULES: ClassVar[dict[str, Rule]] = {
        "lr": Rule(above=0),
        "grad_clip": Rule(low=0, note="0 = no clipping"),
        "warmup_steps": Rule(low=0),
        "weight_decay": Rule(low=0),
        "betas": Rule(low=0, below=1),
    }

    def problems(self) -> list[str]:
        return record_problems(self)


Engine = Literal["hf", "vllm"]


def setting_problems(
    budget: Budget, optim: Optim, eval: EvalSpec, checkpoint_every: int, engine: str
) -> list[str]:
    """What is wrong with a trial's settings (a study's are checked by the same rules)."""
    problems = budget.problems() + optim.problems() + eval.problems()
    if not isinstance(checkpoint_every, int) or checkpoint_every < 0:
        problems.append(f"checkpoint_every={checkpoint_every!r} must be an integer >= 0")
    if engine not in get_args(Engine):
        problems.append(f"engine={engine!r} must be 'hf' or 'vllm'")
    if engine == "vllm" and not problems:  # refused here, before any compute, not by vLLM
        from ablate.base.records import vllm_temperature_problems  # lazily: records imports torch

        problems += vllm_temperature_problems(budget.temperature, "budget.temperature")
        problems += vllm_temperature_problems(eval.temperature, "eval.temperature")
    return problems


@dataclass(frozen=True, kw_only=True)
class TrialSpec:
    """One trial: one algorithm from one base model under one template with one seed."""

    algorithm: Algorithm
    model: str
    """Zoo name or local checkpoint directory."""
    task: str = "arithmetic"
    task_options: tuple[tuple[str, Any], ...] = ()
    """Options for `get_task`, as sorted (key, value) pairs (hashable)."""
    template: str = "plain"
    seed: int = 0
    budget: Budget = field(default_factory=Budget)
    optim: Optim = field(default_factory=Optim)
    eval: EvalSpec = field(default_factory=EvalSpec)
    checkpoint_every: int = 0
    """Save a resumable checkpoint every this many steps (0 = only at the end)."""
    engine: Engine = "hf"
    """Rollout engine: "hf" (our KV-cache sampler, CPU or GPU) or "vllm" (optional: the `vllm`
    extra on a GPU, vLLM's CPU build from `make install-vllm` on a CPU)."""
    device: str = "cpu"
    """Torch device of the policy, reference and critic ("cpu", "cuda", "cuda:N", or "auto":
    CUDA when torch sees a GPU); `ablate.base.devices`."""
    precision: str = "fp32"
    """"fp32", or "bf16": fp32 weights, forward passes under bf16 autocast (a GPU option,
    logged with the trial's parameters); `ablate.base.devices`."""
    study: str = ""
    """Name of the study this trial belongs to (part of the id)."""
    replicate: str = ""
    """Name of an A/A replicate arm: its rollouts (and mini-batch order) draw from a seed stream
    of their own, while its data order, eval samples and initial state stay the study's common
    random numbers, so it pairs with its twin by seed like any other arm; '' = not a replicate."""
    model_weights: str = ""
    """sha256 of the base model's weights (filled in by the runner), so that a model rebuilt
    under the same name is a new trial, not the old one resumed; '' = not recorded."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "task_options", tuple(sorted(dict(self.task_options).items())))
        problems = setting_problems(
            self.budget, self.optim, self.eval, self.checkpoint_every, self.engine
        ) + [f"TrialSpec: {p}" for p in device_problems(self.device, self.precision)]
        if problems:
            raise ConfigError("invalid trial:\n  - " + "\n  - ".join(problems))

    @property
    def rng_seed(self) -> int:
        """The seed of the trial's common random numbers: data order, eval samples, init."""
        return self.seed

    @property
    def rollout_seed(self) -> int:
        """The seed of the training rollouts and the update's mini-batch order: `seed`, or for
        an A/A replicate a stable seed of its own (the only randomness it does not share)."""
        if not self.replicate:
            return self.seed
        from ablate.base.seeding import derive_seed  # lazily: seeding imports torch, specs must not

        return derive_seed(self.seed, "replicate", self.replicate) % 2**31

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["task_options"] = dict(self.task_options)
        return d

    @property
    def id(self) -> str:
        """Stable hash of everything that defines the trial (not of where it runs).

        Only values that differ from their field's default are hashed, so adding a new factor
        (with a default that keeps the old behaviour) leaves every existing trial id, and so its
        finished MLflow run, valid. Changing an existing default changes what old ids mean:
        bump `ID_VERSION` when doing so."""
        blob = json.dumps([ID_VERSION, _non_default(self)], sort_keys=True, default=repr)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


#: Bumped whenever a default of Algorithm, Budget, Optim, EvalSpec or TrialSpec changes meaning,
#: or what a trial produces.
# 2: rollout seeds keyed on (step, attempt), no longer on the count of generation batches.
# 3: EvalSpec.max_problems defaults to the whole eval split (was 64); an A/A replicate shares its
#    twin's data order and eval samples (common random numbers), only its rollouts differ.
ID_VERSION = 3


def _non_default(obj: Any) -> Any:
    """A dataclass as a dict of its non-default fields, recursively (tuples of pairs as dicts)."""
    if not dataclasses.is_dataclass(obj):
        return obj
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.default is not dataclasses.MISSING and value == f.default:
            continue
        if f.default_factory is not dataclasses.MISSING and value == f.default_factory():
            continue
        out[f.name] = _non_default(value)
    return out
