"""Tricks or Traps, Takeaway 8 at a short maximum length: overlong filtering with 40 new tokens,
where the RL-ready rung's completions (about 36 tokens on average) are often truncated."""

from tricks_or_traps import tricks_study

from ablate.study import Budget

STUDY = tricks_study(
    "tricks_or_traps_short",
    ["grpo4", "overlong_filter"],
    budget=Budget(max_steps=40, prompts_per_step=8, group_size=8, max_new_tokens=40),
)
