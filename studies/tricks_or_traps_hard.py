"""Tricks or Traps on hard data: the problems the RL-ready rung solves in at most 1 of 8
samples (see studies/tricks_or_traps.py)."""

from tricks_or_traps import HARD, tricks_study

STUDY = tricks_study(
    "tricks_or_traps_hard",
    ["grpo4", "no_std", "batch_std", "lite_ppo"],
    task_options=HARD,
)
