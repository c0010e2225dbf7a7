"""Floor 6: one trial. The trainer: `setup` (what a trial needs, built before any compute),
`step` (one RL step as typed stages) and `loop` (the trial from start or checkpoint to its
budget); the held-out `evaluation`, the base-model `passk_sweep` and the best-elicited base
(`elicitation`)."""

from ablate.trial.loop import TrialResult, budget_spent, train
from ablate.trial.setup import Setup, TrainState, setup_trial
from ablate.trial.step import rl_step

__all__ = ["Setup", "TrainState", "TrialResult", "budget_spent", "rl_step", "setup_trial", "train"]
