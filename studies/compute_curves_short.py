"""`studies/compute_curves.py` cut to GRPO and DAPO and to 1.2M generated tokens per trial (about
560 GRPO steps, 270 DAPO steps): the curves stop before their midpoint, which is the case the
curve report must not overclaim on (the pooled fit of the full study's GRPO arm at 6M finds it
still not levelled off). The README's 1.2M curve tables come from it: `ablate run
studies/compute_curves_short.py --workers 3` (70 min on 2 shared cores; the full study's GRPO
arm alone took 117 min per trial, 3 in parallel, so all three arms take about 6 h here).
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
