"""The batching section of `python -m devtools bench`: trials per hour, one trial per process,
for the quickstart's arms at 3 and 5 seeds (the real runner), and what seed-batching could add.

A batched trainer (issue 46, item 1) would run the T seeds of one arm in lock step, one grouped
pass for all of them. Its gain is bounded by how much faster one stacked pass over T trials' weights
is than T lone passes (`devtools.bench.stacked`), measured here for the sampler's decode steps
and the update's forward + backward at the quickstart's shapes (8 prompts × 8 samples, prompt
`PROMPT` tokens, `NEW_TOKENS` new ones). Even if every second of a trial were such a pass, batched
trials per hour could be at most that speed-up × the lone rate: the section prints that bound
beside the measured lone rate, so the decision to build the batched trainer rests on numbers.
"""

from __future__ import annotations

import copy
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from devtools.bench.harness import Row, Target, interleave, ratio_summary, summarize

SECTION = "batching"
ROWS, PROMPT, NEW_TOKENS = 64, 25, 40
#: Issue 46's goal for batched over lone trials per hour at 5 seeds: the step's speed-up bounds it.
STEP_TARGET = {5: Target(">=", 1.8)}
SPEEDUP_NOTE = "T lone passes ÷ one stacked pass over T trials' weights"
QUICKSTART = Path(__file__).resolve().parents[2] / "studies" / "quickstart.py"


def seed_models(model, trials: int) -> list:
    """`trials` copies of `model`, each moved by its own small noise: after one update, seeds'
    weights differ, so no matmul is shared between them."""
    out = []
    for seed in range(trials):
        clone, gen = copy.deepcopy(model), torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in clone.parameters():
                p.add_(torch.randn(p.shape, generator=gen) * 1e-3)
        out.append(clone)
    return out


def decode(weights, prompt: torch.Tensor, new_tokens: int, gen: torch.Generator) -> float:
    """Seconds to sample `new_tokens` tokens for every row of every trial (the prompt [T, B, W] is
    fed first, untimed: the sampler's prefill is one pass, not a step per token)."""
    from devtools.bench.stacked import StackedDecoder

    dec = StackedDecoder(weights, prompt.shape[1], prompt.shape[2] + new_tokens)
    with torch.no_grad():
        for j in range(prompt.shape[2]):
            logits = dec.step(prompt[:, :, j])
        start = time.perf_counter()
        for _ in range(new_tokens):
            probs = torch.softmax(logits.flatten(0, 1), -1)
            token = torch.multinomial(probs, 1, generator=gen).view(logits.shape[:2])
            logits = dec.step(token)
    return time.perf_counter() - start


def update(weights, ids: torch.Tensor) -> float:
    """Seconds of the update's forward and backward on ids [T, B, S] (the tokens' mean
    log-likelihood, whose gradient reaches every stacked weight)."""
    from devtools.bench.stacked import stacked_logits

    start = time.perf_counter()
    logp = torch.log_softmax(stacked_logits(weights, ids[:, :, :-1]), -1)
    logp.gather(-1, ids[:, :, 1:, None]).mean().backward()
    for leaf in weights.leaves():
        leaf.grad = None
    return time.perf_counter() - start


def pass_rows(model, trials: int, repeats: int, warmup: int, new_tokens: int) -> list[Row]:
    """Per-trial seconds of decode and update, lone (T passes of one trial's weights) vs stacked
    (one pass of T), interleaved, and their ratios."""
    from devtools.bench.stacked import stack_models

    models = seed_models(model, trials)
    lone = [stack_models([m], grad=True) for m in models]
    stacked = stack_models(models, grad=True)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(vocab, (trials, ROWS, PROMPT), generator=gen)
    ids = torch.randint(vocab, (trials, ROWS, PROMPT + new_tokens), generator=gen)
    runners = {
        "decode lone": lambda: sum(
            decode(w, prompt[i : i + 1], new_tokens, gen) for i, w in enumerate(lone)
        ),
        "decode stacked": lambda: decode(stacked, prompt, new_tokens, gen),
        "update lone": lambda: sum(update(w, ids[i : i + 1]) for i, w in enumerate(lone)),
        "update stacked": lambda: update(stacked, ids),
    }
    # the runners time their own work (prefill and set-up excluded): use what they return
    runs = interleave(runners, repeats, warmup)
    per_trial = {k: [s / trials for s in v] for k, v in runs.results.items()}  # type: ignore[misc]
    case = f"0.53M, T={trials} trials, {ROWS} rows, {new_tokens} new tokens"
    rows = [Row(SECTION, case, name, "s per trial", summarize(v)) for name, v in per_trial.items()]
    for part in ("decode", "update"):
        ratio = ratio_summary(per_trial[f"{part} lone"], per_trial[f"{part} stacked"])
        rows.append(Row(SECTION, case, f"{part} speed-up", "×", ratio, note=SPEEDUP_NOTE))
    both_lone = [
        a + b for a, b in zip(per_trial["decode lone"], per_trial["update lone"], strict=True)
    ]
    both = [
        a + b for a, b in zip(per_trial["decode stacked"], per_trial["update stacked"], strict=True)
    ]
    step = ratio_summary(both_lone, both)
    target = STEP_TARGET.get(trials)
    rows.append(Row(SECTION, case, "step speed-up", "×", step, target, note=SPEEDUP_NOTE))
    return rows


def quickstart_arms(name: str, seeds: int, steps: int | None, eval_problems: int | None):
    """The quickstart's four preset arms at its budget and eval, `seeds` seeds, without its
    controls, extra cells and Pass@G phase (`steps` and `eval_problems` shrink the budget and
    the eval for quick runs)."""
    from dataclasses import replace

    from ablate.base.errors import StudyWarning
    from ablate.study.study import load_study

    study = load_study(QUICKSTART)
    budget = study.budget if steps is None else replace(study.budget, max_steps=steps)
    evals = (
        study.eval
        if eval_problems is None
        else replace(study.eval, max_problems=eval_problems, every_tokens=0)
    )
    with warnings.catch_warnings():
        if eval_problems is not None:  # a quick run's few problems warn; the bench knows
            warnings.simplefilter("ignore", StudyWarning)
        return replace(
            study,
            name=name,
            arms=study.arms[:4],
            seeds=tuple(range(seeds)),
            extra=(),
            passk=None,
            positive_control=None,
            graded_control=None,
            budget=budget,
            eval=evals,
        )


def trials_per_hour(results: Path, seeds: int, options: Any) -> tuple[float, int]:
    """(wall seconds, trials) of the quickstart's arms at `seeds` seeds through the real runner,
    one trial per process, `options.batch_workers` at a time."""
    from ablate.tracking import default_uri, open_store
    from devtools.bench.scaling import time_study

    uri = default_uri(results)
    open_store(uri).init()
    o = options
    study = quickstart_arms(
        f"bench-quickstart-{seeds}seeds", seeds, o.batch_steps, o.batch_eval_problems
    )
    return time_study(study, results, uri, o.batch_workers), len(study.trials())


def section_batching(bench: Any) -> list[Row]:
    from ablate.models import load_model

    o, rows = bench.options, []
    model, _ = load_model(bench.folder("0.53M"))
    speedups: dict[int, float] = {}
    for trials in o.batch_trials:
        bench.progress(f"stacked passes, {trials} trials")
        new_rows = pass_rows(model, trials, o.repeats, o.warmup, o.batch_new_tokens)
        speedups[trials] = new_rows[-1].summary.median
        rows += new_rows
    bench.progress("the natural step's arithmetic floor")
    floor = step_floor(o.repeats, o.warmup)
    rows += floor_rows(floor, o.batch_trials)
    for seeds in o.batch_trials:
        bench.progress(f"quickstart arms, {seeds} seeds, one trial per process")
        rows += rate_rows(
            bench.scratch / f"batching-{seeds}", seeds, o, speedups[seeds], floor.gain(seeds)
        )
    return rows


def floor_rows(floor: StepFloor, trials: tuple[int, ...]) -> list[Row]:
    case = "0.53M natural step (8x8, T≤80)"
    kernels = f"{floor.wall:.3f} s step, {floor.kernels:.3f} s in matmul and attention kernels"
    shareable = f"{floor.shareable:.3f} s of a {floor.profiled_wall:.3f} s profiled step"
    shareable += " is Python or per-op cost"
    return [
        Row(SECTION, case, "most any batching could gain: step ÷ kernels", "×",
            summarize([floor.bound]), note=kernels),
        *(Row(SECTION, case, f"estimated gain, T={t} trials sharing per-op cost", "×",
              summarize([floor.gain(t)]), note=shareable) for t in trials),
    ]  # fmt: skip


def rate_rows(results: Path, seeds: int, o: Any, speedup: float, shared: float) -> list[Row]:
    """Measured trials per hour one trial per process, and the batched rate's two upper bounds:
    the lone rate × the stacked prototype's step speed-up, and × the gain with every per-op
    cost shared (`StepFloor.gain`)."""
    seconds, trials = trials_per_hour(results, seeds, o)
    rate = 3600 * trials / seconds
    case = f"quickstart arms × {seeds} seeds ({trials} trials), --workers {o.batch_workers}"
    steps = "" if o.batch_steps is None else f", {o.batch_steps} steps"
    lone = "trials/hour, one trial per process"
    return [
        Row(SECTION, case, lone, "1/h", summarize([rate]), note=f"{seconds:.0f} s wall{steps}"),
        Row(SECTION, case, "trials/hour batched, bound by the stacked passes", "1/h",
            summarize([rate * speedup]), note=f"lone × {speedup:.2f} (T={seeds})"),
        Row(SECTION, case, "trials/hour batched, with every per-op cost shared", "1/h",
            summarize([rate * shared]), note=f"lone × {shared:.2f}"),
    ]  # fmt: skip


TINY_OPS = 2000
#: The arithmetic a step cannot shed by batching: matmuls and attention (forward and backward).
KERNELS = frozenset(
    {
        "aten::mm",
        "aten::bmm",
        "aten::addmm",
        "aten::baddbmm",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    }
)


@dataclass(frozen=True)
class StepFloor:
    """What one natural-length 0.53M step spends where, per step (seconds)."""

    wall: float  # unprofiled median
    kernels: float  # matmul and attention kernels' self time (profiled)
    profiled_wall: float
    shareable: float  # Python between operators + each operator's fixed cost (profiled)

    @property
    def bound(self) -> float:
        """wall ÷ kernels: batching T trials shares per-op overhead, never a trial's own
        matmuls, so no batched step can be faster than this (element-wise work counts as
        shareable here: the bound errs high)."""
        return self.wall / self.kernels

    def gain(self, trials: int) -> float:
        """The speed-up of one pass over `trials` trials if `shareable` were paid once for all
        of them, and every other second (element-wise work, kernels) once per trial."""
        share = self.shareable / self.profiled_wall
        return 1 / (1 - share * (1 - 1 / trials))


def step_floor(steps: int, warmup: int) -> StepFloor:
    """The natural-length 0.53M step's floor; an operator's fixed cost is the profiled self
    time of a no-op-sized one (`add_` on one element)."""
    from torch.profiler import ProfilerActivity, profile

    from ablate.trial import rl_step
    from devtools.bench.phases import natural_model, stepper

    setup, state, stream = stepper(natural_model("0.53M"))
    walls = []
    for index in range(warmup + steps):
        start = time.perf_counter()
        rl_step(setup, state, stream)
        if index >= warmup:
            walls.append(time.perf_counter() - start)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            rl_step(setup, state, stream)
        profiled = (time.perf_counter() - start) / steps
    # an operator's fixed cost, from a profile of its own (the step's add_ calls are larger)
    one = torch.zeros(1)
    with profile(activities=[ProfilerActivity.CPU]) as tiny_prof:
        for _ in range(TINY_OPS):
            one.add_(1.0)
    tiny = next(e for e in tiny_prof.key_averages() if e.key == "aten::add_")
    fixed = tiny.self_cpu_time_total / tiny.count / 1e6
    # an operator called from another (linear → mm) pays no second Python-level dispatch
    ops = sum(1 for e in prof.events() if e.cpu_parent is None)
    per_step = {e.key: e.self_cpu_time_total / 1e6 / steps for e in prof.key_averages()}
    kernels = sum(v for k, v in per_step.items() if k in KERNELS)
    shareable = (profiled - sum(per_step.values())) + ops / steps * fixed
    return StepFloor(summarize(walls).median, kernels, profiled, shareable)
