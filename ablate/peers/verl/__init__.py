"""How verl 0.9.1 expresses each value of each `Algorithm` field, as Hydra overrides of
`verl.trainer.main_ppo` (data; the vocabulary is in `model.py`). Every claim was checked against
verl/trainer/ppo/core_algos.py (advantage estimators, policy losses, agg_loss, kl_penalty),
ray_trainer.py (compute_advantage, apply_kl_penalty), workers/utils/losses.py (ppo_loss),
trainer/ppo/rollout_corr_helper.py, trainer/ppo/v1 (filter_groups), the dapo reward manager and
the dataclasses/YAML under trainer/config and workers/config.

`algorithm.adv_estimator` fuses our baseline and scale: grpo = group mean (÷ group std unless
norm_adv_by_std_in_grpo=False), rloo = leave-one-out without a std, reinforce_plus_plus_baseline
= group mean then token whitening, reinforce_plus_plus = no baseline then token whitening. It is
keyed under `baseline`, per scale.
"""

from __future__ import annotations

from ablate.peers.model import Table
from ablate.peers.verl.data import DATA
from ablate.peers.verl.loss import LOSS

NAME = "verl"
VERSION = "0.9.1"

#: Every `Algorithm` field, in field order: the estimator and loss side, then the data side.
TABLE: Table = {**LOSS, **DATA}
