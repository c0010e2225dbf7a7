"""Rollout engines: sample completions (token ids, log-probs, masks) for the trainer and the
pass@k sweep. `HFEngine` runs on the trainer's own model; `VLLMEngine` (GPU, optional) lives in
`ablate.rollout.vllm` and is imported only when asked for."""

from ablate.base.records import Rollouts, SamplingParams
from ablate.rollout.base import RolloutEngine
from ablate.rollout.hf import HFEngine

__all__ = ["HFEngine", "RolloutEngine", "Rollouts", "SamplingParams"]
