"""ablate: compare and ablate GRPO-family RL algorithms for language models, with statistics."""

from __future__ import annotations

from ablate.algorithms import Algorithm
from ablate.errors import AblateError, ConfigError, StudyError
from ablate.presets import baseline, baseline_names

__version__ = "0.1.0"

__all__ = [
    "AblateError",
    "Algorithm",
    "ConfigError",
    "StudyError",
    "__version__",
    "baseline",
    "baseline_names",
]
