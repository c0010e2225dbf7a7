"""The profile section of `python -m devtools bench`: where a natural-length step's time goes
(the `natural` section's case: GRPO without KL, 8 prompts × G = 8, up to 80 new tokens ending at
EOS), phase by phase, from `devtools.bench.phases`' timers around the step's own functions.
The shares show what to cut first: sampling (decode), scoring (the verifier), the policy's
forward passes, backward, the optimiser, and the rest (Python, diagnostics, logging)."""

from __future__ import annotations

from typing import Any

from devtools.bench.harness import Row, summarize

SECTION = "profile"


def section_profile(bench: Any) -> list[Row]:
    """Per size: each phase's seconds per step (median over the timed steps, min–max) and its
    share of the step in the note."""
    from devtools.bench.phases import PHASES, phase_seconds

    o, rows = bench.options, []
    for size in o.sizes:
        bench.progress(f"profile of the natural-length step, {size}")
        seconds, _ = phase_seconds(size, steps=o.repeats, warmup=o.warmup)
        step = summarize(seconds["step"])
        label = f"{size} natural step (8x8, T≤80)"
        rows.append(Row(SECTION, label, "step", "s", step))
        for phase in PHASES:
            part = summarize(seconds[phase])
            share = f"{100 * part.median / step.median:.0f}% of the step"
            rows.append(Row(SECTION, label, phase, "s", part, note=share))
        rows.append(
            Row(SECTION, label, "mean completion length", "tokens", summarize(seconds["length"]))
        )
    return rows
