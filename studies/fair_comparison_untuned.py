"""`fair_comparison.py`'s arms at the shared setting (lr 3e-5, no tuning), the same seeds,
budget, eval and eval recipes: the comparison as a study without tuning would make it."""

import dataclasses

from fair_comparison import STUDY as TUNED

STUDY = dataclasses.replace(TUNED, name="fair_comparison_untuned", tune=None)
