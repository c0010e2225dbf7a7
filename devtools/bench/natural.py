"""The natural-length section of `python -m devtools bench`: RL steps and rollouts whose
completions end at EOS, as a study's do, instead of being forced to exactly T tokens.

Both tools sample the zoo's arithmetic prompts (plain template, our verifier) with up to
`NATURAL_TOKENS` new tokens from the same model folder: the shipped `rl_ready` at 0.53M, a
warm-started 4.2M model (`bench.models.natural_model_dir`) whose completions have the zoo's
length distribution. The tools draw different samples, so each reports its mean completion
length: equal means show equal work.
"""

from __future__ import annotations

from typing import Any

from devtools.bench.harness import Row, Target, ratio_summary, rows_for, summarize

SECTION = "natural"
#: The longest completion (the zoo's and `Budget`'s default generation limit).
NATURAL_TOKENS = 80
STEP_TARGETS = {"0.53M": Target("<=", 0.5), "4.2M": Target("<=", 0.5)}
ROLLOUT_TARGETS = {"0.53M": Target(">=", 1.3), "4.2M": Target(">=", 1.0)}


def section_natural(bench: Any) -> list[Row]:
    """Per size: ablate vs TRL steps (unless TRL is off), then rollouts vs `model.generate`."""
    from devtools.bench.models import natural_model_dir

    o, rows = bench.options, []
    for size in o.sizes:
        bench.progress(f"natural-length model {size}")
        folder = natural_model_dir(size)
        if o.trl:
            rows += step_rows(bench, size, folder)
        rows += rollout_rows(bench, size, folder)
    return rows


def step_rows(bench: Any, size: str, folder) -> list[Row]:
    from devtools.bench.step import StepCase
    from devtools.bench.trl_step import require_trl, run_pair

    require_trl()
    o = bench.options
    case = StepCase(size, 8, 8, NATURAL_TOKENS, natural=True)
    bench.progress(f"ablate vs TRL {case.label}")
    pair = run_pair(case, folder, bench.tracker(case.label), o.repeats, o.warmup)
    walls = [r.wall for r in pair.ablate]
    label = f"{size} steps, T≤{NATURAL_TOKENS}"
    rows = rows_for(SECTION, label, "s", {"ablate step": walls, "trl step": pair.trl})
    ratio = ratio_summary(walls, pair.trl)
    rows.append(Row(SECTION, label, "ablate / trl", "ratio", ratio, STEP_TARGETS.get(size)))
    parts = {
        "ablate sampling": [r.gen for r in pair.ablate],
        "ablate update": [r.train for r in pair.ablate],
    }
    rows += rows_for(SECTION, label, "s", parts)
    lengths = {
        "ablate mean length": [r.mean_length for r in pair.ablate],
        "trl mean length": pair.trl_lengths,
    }
    rows += rows_for(SECTION, label, "tokens", lengths)
    return rows


def rollout_rows(bench: Any, size: str, folder) -> list[Row]:
    from ablate.models import load_model
    from devtools.bench.rollout import natural_case

    o = bench.options
    model, tokenizer = load_model(folder)
    label = f"{size} rollout 8x8, T≤{NATURAL_TOKENS}"
    bench.progress(f"natural-length {label}")
    seconds, tokens = natural_case(model, tokenizer, 8, 8, NATURAL_TOKENS, o.repeats)
    rates = {
        f"{name} tok/s": [t / s for t, s in zip(tokens[name], seconds[name], strict=True)]
        for name in seconds
    }
    rows = rows_for(SECTION, label, "tok/s", rates)
    ratio = ratio_summary(rates["ours tok/s"], rates["generate tok/s"])
    rows.append(Row(SECTION, label, "ours / generate", "ratio", ratio, ROLLOUT_TARGETS.get(size)))
    ragged = ratio_summary(seconds["ours"], seconds["ours full batch"])
    rows.append(Row(SECTION, label, "ragged ÷ full-batch decode time", "ratio", ragged))
    means = {f"{name} mean length": [t / 64 for t in tokens[name]] for name in tokens}
    rows += [Row(SECTION, label, k, "tokens", summarize(v)) for k, v in means.items()]
    return rows
