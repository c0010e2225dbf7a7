"""Tricks or Traps, Takeaway 8 at a long maximum length: overlong filtering with 80 new tokens,
where almost nothing is truncated (compare studies/tricks_or_traps_short.py)."""

from tricks_or_traps import tricks_study

STUDY = tricks_study("tricks_or_traps_long", ["grpo4", "overlong_filter"])
