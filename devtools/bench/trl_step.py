"""ablate's RL step against TRL's `GRPOTrainer` on identical work, interleaved in one process.

Both load the same model folder, sample 8 prompts × G completions of exactly T tokens (ours: EOS
and stop strings ignored; TRL: `min_new_tokens = T`), or in a natural case of up to T tokens
ending at EOS (both tools' mean lengths are reported, so the work is shown equal), score them
with our task's verifier, and do one GRPO update per rollout with no KL, the same learning rate
and gradient clipping. TRL's
gradient checkpointing (on by default since TRL 1.x) is switched off: it only slows a step down
on these tiny models, and we compare against TRL's best case.

Interleaving: `trainer.train()` runs TRL's steps; a callback runs exactly one ablate step at each
TRL step end. A TRL step's time is the gap between two consecutive step begins minus the ablate
step run inside it. trl is imported lazily (~7 s), only here.
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.base.errors import ConfigError
from devtools.bench.step import (
    LR,
    AblateStepper,
    StepCase,
    StepRecord,
    check_lengths,
    check_max_length,
)

INSTALL_HINT = 'run `make bench` or `pip install -c .venv/constraints.txt -e ".[bench]"`'


def trl_available() -> bool:
    """Whether trl can be imported (checked without paying its import)."""
    return importlib.util.find_spec("trl") is not None


def require_trl() -> None:
    if not trl_available():
        raise ConfigError(
            f"the TRL comparison needs trl, which is not installed: {INSTALL_HINT} "
            "(or skip that section with --no-trl)"
        )


# -- the event clock: pure bookkeeping, testable without TRL -----------------------------------

TRL_BEGIN, ABLATE_BEGIN, ABLATE_END = "trl_begin", "ablate_begin", "ablate_end"


@dataclass
class StepClock:
    """Records when each TRL step begins and when each ablate step (run at a TRL step's end)
    begins and ends. `ablate_steps` caps how many ablate steps run: TRL's last step is only
    there to close the previous one's interval."""

    run_ablate: Callable[[], StepRecord]
    ablate_steps: int
    events: list[tuple[str, float]] = field(default_factory=list)
    records: list[StepRecord] = field(default_factory=list)

    def on_step_begin(self) -> None:
        self.events.append((TRL_BEGIN, time.perf_counter()))

    def on_step_end(self) -> None:
        if len(self.records) >= self.ablate_steps:
            return
        self.events.append((ABLATE_BEGIN, time.perf_counter()))
        self.records.append(self.run_ablate())
        self.events.append((ABLATE_END, time.perf_counter()))


def trl_step_seconds(events: list[tuple[str, float]]) -> list[float]:
    """Seconds of each closed TRL step: begin-to-next-begin minus the ablate time inside it."""
    out: list[float] = []
    start: float | None = None
    inner = 0.0
    ablate_start: float | None = None
    for kind, t in events:
        if kind == TRL_BEGIN:
            if start is not None:
                out.append(t - start - inner)
            start, inner = t, 0.0
        elif kind == ABLATE_BEGIN:
            ablate_start = t
        elif kind == ABLATE_END:
            if ablate_start is None:
                raise ValueError("an ablate step ended that never began")
            inner += t - ablate_start
            ablate_start = None
    return out


def event_order(events: list[tuple[str, float]]) -> list[str]:
    """ "trl" / "ablate" in the order the steps started (for checking A B A B)."""
    names = {TRL_BEGIN: "trl", ABLATE_BEGIN: "ablate"}
    return [names[kind] for kind, _ in events if kind in names]


# -- the TRL side -------------------------------------------------------------------------------


def grpo_config(case: StepCase, steps: int, output_dir: str, seed: int = 0):
    """GRPOConfig doing what ablate's grpo preset does without KL (every name checked against
    trl 1.16's grpo_config.py)."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=output_dir,
        per_device_train_batch_size=case.prompts * case.group,
        num_generations=case.group,
        max_completion_length=case.new_tokens,
        generation_kwargs=None if case.natural else {"min_new_tokens": case.new_tokens},
        beta=0.0,  # no KL, so no reference model (as ablate with kl_coef=0)
        learning_rate=LR,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        num_iterations=1,  # one update per rollout (ablate: ppo_epochs=1, minibatches=1)
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        gradient_checkpointing=False,  # TRL's default True is slower here: give TRL its best case
        loss_type="grpo",  # per-sequence token mean (ablate: seq_mean_token_mean)
        scale_rewards="group",  # std-scaled group advantages
        epsilon=0.2,
        importance_sampling_level="token",
        mask_truncated_completions=False,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        logging_steps=10**9,
        disable_tqdm=True,
        max_steps=steps,
        seed=seed,
    )


def verifier_reward(task, template, problems, lengths: list[int]):
    """A TRL reward function scoring with our task's verifier; records completion lengths."""

    def reward(prompts, completions, completion_ids, index, **_: Any) -> list[float]:
        lengths.extend(len(ids) for ids in completion_ids)
        return [
            task.verify(problems[i], text, template).reward
            for i, text in zip(index, completions, strict=True)
        ]

    reward.__name__ = "verifier"
    return reward


def arithmetic_trainer(
    args, folder: Path | str, lengths: list[int], problems: int | list, callbacks=()
):
    """TRL's GRPOTrainer on our arithmetic task (plain template, our verifier as the reward) for
    the model in `folder` (or a zoo name), with GRPOConfig `args`; `problems`: how many of the
    task's first training problems its dataset holds, or the problems themselves."""
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOTrainer

    from ablate.models import load_model
    from ablate.tasks import get_task
    from ablate.tasks.templates import get_template

    task, template = get_task("arithmetic"), get_template("plain")
    chosen = task.problems("train")[:problems] if isinstance(problems, int) else list(problems)
    data = Dataset.from_dict(
        {"prompt": [template.render(p.question) for p in chosen], "index": range(len(chosen))}
    )
    model, tokenizer = load_model(folder)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=verifier_reward(task, template, chosen, lengths),
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )
    trainer.remove_callback(PrinterCallback)  # it prints TRL's metrics dict to the console
    return trainer


def _trainer(case: StepCase, folder: Path, clock: StepClock, steps: int, out: str, lengths):
    from transformers import TrainerCallback

    class Interleave(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            clock.on_step_begin()

        def on_step_end(self, args, state, control, **kwargs):
            clock.on_step_end()

    args = grpo_config(case, steps, out)
    problems: int | list = max(1024, steps * case.prompts)
    if case.natural:  # the prompts ablate's steps draw, step for step: lengths compare fairly
        problems = ablate_prompts(steps * case.prompts)
        args.shuffle_dataset = False
    return arithmetic_trainer(args, folder, lengths, problems, callbacks=[Interleave()])


def ablate_prompts(count: int, seed: int = 0) -> list:
    """The first `count` problems of the prompt stream an `AblateStepper` of `seed` draws."""
    from ablate.stages.batch import PromptStream
    from ablate.tasks import get_task

    return PromptStream(get_task("arithmetic").problems("train"), seed).window(0, count)


@dataclass
class PairedSteps:
    """Kept (post-warm-up) step times of both tools, paired by index, and TRL's mean
    completion length in each kept step (ablate's is in its records)."""

    trl: list[float]
    ablate: list[StepRecord]
    order: list[str]
    trl_lengths: list[float] = field(default_factory=list)


def per_step_means(lengths: list[int], per_step: int) -> list[float]:
    """Mean of each consecutive chunk of `per_step` completion lengths (one chunk a step)."""
    chunks = [lengths[i : i + per_step] for i in range(0, len(lengths), per_step)]
    return [sum(c) / len(c) for c in chunks]


def run_pair(case: StepCase, folder: Path, tracker, repeats: int, warmup: int) -> PairedSteps:
    """TRL and ablate steps A B A B on `case`; the first `warmup` of each are dropped."""
    import torch

    threads = torch.get_num_threads()
    stepper = AblateStepper(case, folder, tracker)
    clock = StepClock(stepper.step, ablate_steps=warmup + repeats)
    lengths: list[int] = []
    with tempfile.TemporaryDirectory(prefix="ablate-bench-trl-") as out, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers' renames, seen via TRL
        trainer = _trainer(case, folder, clock, warmup + repeats + 1, out, lengths)
        torch.set_num_threads(threads)  # whatever the trainer's setup did, both get the same
        trainer.train()
    if case.natural:
        check_max_length(lengths, case.new_tokens, "trl")
    else:
        check_lengths(lengths, case.new_tokens, "trl")
    trl = trl_step_seconds(clock.events)
    if len(trl) != warmup + repeats or len(clock.records) != warmup + repeats:
        raise RuntimeError(f"expected {warmup + repeats} steps each, got {len(trl)} TRL steps")
    means = per_step_means(lengths, case.prompts * case.group)[warmup : warmup + repeats]
    order = event_order(clock.events)
    return PairedSteps(trl[warmup:], clock.records[warmup:], order, means)
