"""What the trials table says of an arm beyond its algorithm: the rollout engine it samples with."""

from __future__ import annotations

import pandas as pd


def arm_engine(trials: pd.DataFrame, arm: str) -> str:
    """The rollout engine of `arm`'s trials ("hf" where the table does not say: an older one)."""
    if "engine" not in trials:
        return "hf"
    engines = trials.loc[trials["arm"] == arm, "engine"].dropna()
    return str(engines.iloc[0]) if len(engines) else "hf"
