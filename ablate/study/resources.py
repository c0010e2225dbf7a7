"""What a trial's sizes need of the model and the machine, checked before compute: a size beyond
the model's positions, or a step's batch that cannot fit in memory, is refused naming the field
and stating the limit, instead of a multi-terabyte allocation minutes into the run.

The memory needed is a floor, never an estimate of the peak: for every token of a step's batch
`BYTES_PER_TOKEN` (ids, masks, log-probs of the policy, the rollout and the reference, advantages
live for the whole step) and one hidden state (the batch's first forward pass holds them all),
one sequence's logits, and the weights with their gradient and Adam moments. What fails this
check cannot run however the step is chunked; what passes it may still need more.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ablate.factors.spec import Budget

#: Bytes a step keeps for each sampled token besides its hidden state: an int64 id, int64 and
#: bool masks, four float32 per-token values (log-probs of policy, rollout, reference, advantage).
BYTES_PER_TOKEN = 8 + 8 + 1 + 4 * 4
#: The weights held by training: themselves, their gradient and two Adam moments.
WEIGHT_COPIES = 4
#: Config keys that give a model's positions, by architecture family.
POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
#: The sizes of a step's batch, with their defaults (the field blamed is the one furthest above).
STEP_SIZES = {"prompts_per_step": 8, "group_size": 8, "max_new_tokens": 80}
#: Seconds per RL step at 8 prompts × 8 completions × 80 new tokens on one CPU core of the
#: reference machine (scaled by their product; measured, and read by `ablate plan`'s defaults).
STEP_SECONDS, STEP_TOKENS = 0.58, 8 * 8 * 80
#: A trial estimated to train longer than this is said (a year: no real budget comes near it).
ABSURD_SECONDS = 365.25 * 86400


def model_limits(folder: str | os.PathLike) -> dict[str, int]:
    """positions, vocab, bytes of a hidden state and of the weights of a model folder, those
    its config states."""
    folder = Path(folder)
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    config = config.get("text_config", config) if isinstance(config, dict) else {}
    out = {}
    positions = next((config[k] for k in POSITION_KEYS if isinstance(config.get(k), int)), None)
    scaling = config.get("rope_scaling") or {}
    if positions and isinstance(scaling, dict) and isinstance(scaling.get("factor"), int | float):
        positions = int(positions * max(1.0, scaling["factor"]))  # context extended by RoPE
    if positions:
        out["positions"] = positions
    if isinstance(config.get("vocab_size"), int):
        out["vocab"] = config["vocab_size"]
    if isinstance(config.get("hidden_size"), int):
        dtype = str(config.get("torch_dtype") or config.get("dtype") or "float32")
        out["hidden_bytes"] = config["hidden_size"] * (4 if "32" in dtype else 2)
    weights = [f for f in folder.glob("*.safetensors")] + list(folder.glob("*.bin"))
    out["weight_bytes"] = sum(f.stat().st_size for f in weights if f.is_file())
    return out


def memory_limit(device: str) -> tuple[int, str] | None:
    """Bytes a trial on `device` can hold at most, and what they are (the GPU's memory, or the
    machine's RAM); None for a GPU this machine does not have (the machine that trains the
    trial checks it)."""
    if device == "auto":  # what the trial will resolve it to on this machine
        from ablate.base.devices import resolve_device

        device = resolve_device(device)
    if device.startswith("cuda"):
        try:
            import torch

            if torch.cuda.is_available():
                index = int(device.partition(":")[2] or 0)
                props = torch.cuda.get_device_properties(index)
                return props.total_memory, f"{props.name}'s memory"
        except (ImportError, RuntimeError, ValueError):
            pass
        return None
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine's RAM"


def sampling_phases(study) -> dict[str, int]:
    """The samples of one problem each sampling phase of `study` draws at once besides a
    training step, by the field that sets them: the eval's, the Pass@G phase's, the
    elicitation's."""
    out = {"EvalSpec: n_samples": study.eval.n_samples}
    if study.passk is not None:
        out["PassKSpec: n"] = study.passk.n
        if study.passk.elicit is not None:
            out["ElicitSpec: n"] = study.passk.elicit.n
    return out


def size_problems(
    budget: Budget,
    model: str,
    limits: dict[str, int],
    memory: tuple[int, str] | None,
    samples: Mapping[str, int] | None = None,
) -> list[str]:
    """Each size the model or the memory cannot hold, naming its field and the limit: a
    training step's batch, and `samples` (field -> samples of one problem: every other
    sampling phase, `sampling_phases`)."""
    out = []
    positions = limits.get("positions")
    if positions and budget.max_new_tokens >= positions:
        out.append(
            f"Budget: max_new_tokens={budget.max_new_tokens} leaves no room for a prompt in "
            f"{model}'s {positions} positions: use at most {positions - 1}"
        )
        return out  # the memory needed follows from a length the model cannot reach anyway
    if memory is None:
        return out
    total, where = memory
    fixed = limits.get("weight_bytes", 0) * WEIGHT_COPIES
    fixed += budget.max_new_tokens * limits.get("vocab", 0) * 4  # one sequence's logits
    per_token = (BYTES_PER_TOKEN + limits.get("hidden_bytes", 0)) * budget.max_new_tokens
    room = max(total - fixed, 0) // per_token  # sequences of one step that fit
    out += _step_problems(budget, room, fixed, per_token, memory)
    for name, n in (samples or {}).items():
        if n > room:
            out.append(
                f"{name}={n} is more than {where} can hold: {n:,} samples of a problem "
                f"× max_new_tokens={budget.max_new_tokens} need at least "
                f"{_size(fixed + n * per_token)} and there are {_size(total)}: use at most {room:,}"
            )
    return out


def _step_problems(budget, room: int, fixed: int, per_token: int, memory) -> list[str]:
    """A training step's batch beyond the `room` (sequences) `memory` leaves, naming the size
    furthest above its default."""
    total, where = memory
    sizes = {k: getattr(budget, k) for k in STEP_SIZES}
    batch = budget.prompts_per_step * budget.group_size
    if batch <= room:
        return []
    field = max(sizes, key=lambda k: sizes[k] / STEP_SIZES[k])
    others = batch * budget.max_new_tokens // sizes[field]
    most = max(total - fixed, 0) * budget.max_new_tokens // (per_token * max(others, 1))
    return [
        f"Budget: {field}={sizes[field]} is more than {where} can hold: a step of "
        f"prompts_per_step × group_size × max_new_tokens = {batch * budget.max_new_tokens:,} "
        f"tokens needs at least {_size(fixed + batch * per_token)} and there are "
        f"{_size(total)}: with the other sizes as they are, {field} <= {most:,}"
    ]


def step_seconds(budget: Budget) -> float:
    """One step of `budget` at the measured CPU rate: `STEP_SECONDS` per `STEP_TOKENS`."""
    tokens = budget.prompts_per_step * budget.group_size * budget.max_new_tokens
    return STEP_SECONDS * tokens / STEP_TOKENS


def tuning_estimate(budget: Budget, tune: Any, arms: int) -> str | None:
    """One line when the tuning phase (`arms` × its runs of `tune.steps` steps of `budget`)
    implies an absurd time, at the rate the budget's own check uses; None otherwise."""
    runs = arms * tune.runs_per_arm
    seconds = runs * tune.steps * step_seconds(budget)
    if seconds <= ABSURD_SECONDS:
        return None
    return (
        f"tune: {runs:,} tuning runs ({arms} arm(s) × trials={tune.trials:,} × "
        f"{len(tune.seeds)} seed(s)) of steps={tune.steps:,} imply about {_duration(seconds)} "
        f"of training at the measured CPU rate of {STEP_SECONDS} s per step of "
        f"{STEP_TOKENS:,} tokens: check TuneSpec's steps and trials"
    )


def training_estimate(budget: Budget, trials: int) -> str | None:
    """One line when the budget implies an absurd training time (over `ABSURD_SECONDS` a
    trial), estimated at `STEP_SECONDS` per step scaled by its tokens: the CPU rate `ablate
    plan` prices a study with (a GPU is faster, a larger model slower); None otherwise."""
    tokens = budget.prompts_per_step * budget.group_size * budget.max_new_tokens
    steps = budget.max_steps
    if budget.max_generated_tokens is not None:  # the trial stops at its token budget
        steps = min(steps, -(-budget.max_generated_tokens // tokens))
    seconds = steps * step_seconds(budget)
    if seconds <= ABSURD_SECONDS:
        return None
    return (
        f"Budget: max_steps={budget.max_steps:,} at {tokens:,} tokens a step implies about "
        f"{_duration(seconds)} of training per trial ({trials} trial(s)), at the measured CPU "
        f"rate of {STEP_SECONDS} s per step of {STEP_TOKENS:,} tokens (`ablate plan` prices it "
        "from a pilot): check max_steps"
    )


def _duration(seconds: float) -> str:
    for unit, scale in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600)):
        if seconds >= scale:
            return f"{seconds / scale:,.0f} {unit}"
    return f"{seconds:,.0f} s"


def _size(n: int) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 1e3:.1f} kB"
