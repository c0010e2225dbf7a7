"""The trainer of one trial: `setup` (what a trial needs, built before any compute), `step`
(one RL step as typed stages) and `loop` (the trial from start or checkpoint to its budget)."""

from ablate.trainer.loop import TrialResult, budget_spent, train
from ablate.trainer.setup import Setup, TrainState, setup_trial
from ablate.trainer.step import rl_step

__all__ = ["Setup", "TrainState", "TrialResult", "budget_spent", "rl_step", "setup_trial", "train"]
