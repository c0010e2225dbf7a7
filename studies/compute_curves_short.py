"""`studies/compute_curves.py` cut to GRPO and DAPO and to 1.2M generated tokens per trial (about
560 GRPO steps, 270 DAPO steps): the curves stop before their midpoint, which is the case the
curve report must not overclaim on (the pooled fit of the full study's GRPO arm at 6M finds it
still not levelled off). The README's 1.2M curve tables come from it: `ablate run
studies/compute_curves_short.py --workers 3` (70 min on 2 shared cores; the full study's GRPO
trials took 117 min each, 3 in parallel beside other jobs, and its Dr. GRPO trials 0.6 s/step
with `--workers 2` on a quiet machine: about 2-2.5 h for all nine).
"""

from dataclasses import replace

from compute_curves import STUDY as FULL

STUDY = replace(
    FULL,
    name="compute_curves_short",
    arms=[a for a in FULL.arms if a.name in ("grpo", "dapo")],
    budget=replace(FULL.budget, max_generated_tokens=1_200_000),
    eval=replace(FULL.eval, every_tokens=200_000),
)
