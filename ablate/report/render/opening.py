"""The report's opening paragraph, read as a paper's results paragraph: what the numbers are
about (the estimand), the training budget every trial ran under (steps, prompts × group size,
generated tokens, learning rate, seeds, eval problems × samples), then the design (trials,
reference, primary comparison). The verdicts follow it (`sections.FIRST_SCREEN`)."""

from __future__ import annotations

import numpy as np

from ablate.report.data import numbers
from ablate.report.data.load import StudyData
from ablate.report.stats import contrasts as cx
from ablate.report.stats import measures as m


def estimand(data: StudyData) -> str:
    """What the numbers are about, in one or two sentences."""
    problems = eval_problems(data)
    if not problems:
        return (
            "Estimand: the study's eval problems as fixed (no per-problem records): intervals "
            "cover the mean over these problems, not the task."
        )
    k = f", {data.eval_samples} samples each" if data.eval_samples else ""
    return (
        f"Estimand: {problems} problems of {data.task or 'the task'}'s eval split{k}, treated "
        "as a sample of the task, and the seeds as a sample of training runs: intervals and tests "
        "account for both (crossed seed × problem analysis); the fixed-problem reading is "
        "labelled where shown."
    )


def eval_problems(data: StudyData) -> int:
    rows = [r for r in cx.headline_contrasts(data) if r.reading == cx.TASK]
    return max((r.problems for r in rows), default=0)


def _generated_tokens(data: StudyData) -> str:
    """Tokens generated in training per trial: the reference arm's mean, and the range of the
    arms' means where they differ."""
    tokens = m.curve(data.history, "budget/generated_tokens")
    if tokens.empty:
        return ""
    last = tokens.groupby("trial_id")["value"].last()
    arms = data.trials.set_index("trial_id")["arm"].reindex(last.index)
    means = last.groupby(arms.to_numpy()).mean()
    if data.reference_arm not in means.index:
        return ""
    ref = numbers.integer(round(float(means[data.reference_arm])))
    low, high = float(means.min()), float(means.max())
    spread = (
        f" (arms' means {numbers.integer(round(low))}–{numbers.integer(round(high))})"
        if high > low * 1.01
        else ""
    )
    return f"; {ref} tokens generated in training per {data.reference_arm} trial{spread}"


def _seeds(data: StudyData) -> str:
    per_arm = data.trials.groupby("arm")["seed"].nunique()
    main = per_arm.get(data.reference_arm, per_arm.max() if len(per_arm) else 0)
    extra = " (1 seed for the extra cells)" if len(per_arm) and per_arm.min() < main else ""
    return f"{int(main)} seeds per arm{extra}"


def training_budget(data: StudyData) -> str:
    """The budget sentence: steps, prompts × group size, tokens, learning rate, seeds, eval."""
    b, o, e = data.budget, data.optim, data.eval_spec
    if b is None:
        return ""
    parts = [
        f"{numbers.integer(b.max_steps)} RL steps per trial of {b.prompts_per_step} prompts × "
        f"{b.group_size} samples (group size), at most {b.max_new_tokens} new tokens each"
        + _generated_tokens(data)
    ]
    if b.max_generated_tokens:
        parts.append(f"stopping at {numbers.integer(b.max_generated_tokens)} generated tokens")
    if o is not None:
        parts.append(f"AdamW, {_learning_rate(data, o.lr)}")
    parts.append(_seeds(data))
    problems = eval_problems(data)
    if problems and e is not None:
        when = f"every {e.every} steps" if e.every else _start_and_end(e)
        tokens = f" and every {numbers.integer(e.every_tokens)} tokens" if e.every_tokens else ""
        parts.append(f"eval on {problems} problems × {e.n_samples} samples, {when}{tokens}")
    return "Training budget: " + "; ".join(parts) + "."


def _learning_rate(data: StudyData, shared: float) -> str:
    """The study's lr, or each arm's where tuning chose it (`Study(tune=...)`)."""
    tuned = {arm: v["lr"] for arm, v in data.chosen().items() if "lr" in v}
    if not tuned:
        return f"learning rate {numbers.rate(shared)}"
    arms = [a for a in dict.fromkeys(data.trials["arm"]) if a in tuned]
    each = ", ".join(f"{a} {numbers.rate(float(f'{tuned[a]:.3g}'))}" for a in arms)
    return f"learning rate tuned per arm ({each})"


def _start_and_end(e) -> str:
    return "at the start and the end" if e.at_start else "at the end"


def design(data: StudyData) -> str:
    t = data.trials
    done = int(np.asarray(t["complete"], dtype=bool).sum())
    return (
        f"{len(t)} planned trials, {done} finished, {len(t) - done} diverged/failed/missing; "
        f"reference arm `{data.reference_arm}`. Primary comparison: {data.primary}; every other "
        "table is secondary. Each contrast is different, equivalent within the margin, or "
        "inconclusive; inconclusive is a result, not a failure (calibration: "
        "`python -m devtools calibrate`)."
    )


def summary(data: StudyData) -> list[str]:
    """The opening's paragraphs: the estimand and the budget, then the design."""
    head = " ".join(s for s in (estimand(data), training_budget(data)) if s)
    return [head, design(data)]
