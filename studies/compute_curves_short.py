"""`studies/compute_curves.py` cut to GRPO and DAPO and to 1.2M generated tokens per trial (about
560 GRPO steps, 270 DAPO steps): the curves stop before their midpoint (the full study put C_mid
at 1.1M-2.7M tokens), which is the case the curve report must not overclaim on. The README's
curve tables come from it: `ablate run studies/compute_curves_short.py --workers 3` (70 min on
2 shared cores; the full study takes about 70 quiet minutes).
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
