"""The report's inert-factor flag: a differing factor that changed under 1% of the training
tokens marks its arm "not testable at this setting"."""

from __future__ import annotations

import pandas as pd
import pytest

from ablate.factors.algorithms import Algorithm
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.report.data.load import StudyData
from ablate.report.render.took_effect import took_effect_table
from ablate.report.stats.took_effect import NOT_TESTABLE, factor_shares, inert_arms
from ablate.testing import zoo_model_built


def _study(algorithms: dict[str, Algorithm], shares: dict[str, list[float]]) -> StudyData:
    trials = pd.DataFrame({"arm": list(algorithms)})
    history = pd.DataFrame(
        [
            {"arm": arm, "step": step, "metric": "offpolicy/changed_frac", "value": v}
            for arm, values in shares.items()
            for step, v in enumerate(values, 1)
        ],
        columns=["arm", "step", "metric", "value"],
    )
    empty = pd.DataFrame()
    return StudyData(
        "s", next(iter(algorithms)), trials, history, empty, empty, algorithms=algorithms
    )


def test_an_arm_whose_factor_changed_under_one_percent_is_not_testable():
    data = _study(
        {
            "grpo": Algorithm(),
            "tis_inert": Algorithm(rollout_correction="token_truncate"),
            "tis_live": Algorithm(rollout_correction="token_truncate"),
            "mis_edge": Algorithm(rollout_correction="token_mis"),
            "clip_high": Algorithm(clip_high=0.28),  # no share metric: not checked
        },
        {"tis_inert": [0.0, 0.0], "tis_live": [0.3, 0.5], "mis_edge": [0.005, 0.02]},
    )
    rows = {r["arm"]: r for r in factor_shares(data)}
    assert set(rows) == {"tis_inert", "tis_live", "mis_edge"}
    assert rows["tis_inert"]["verdict"] == NOT_TESTABLE
    assert rows["tis_live"]["share changed"] == pytest.approx(0.4)
    assert rows["mis_edge"]["share changed"] == pytest.approx(0.0125)  # 1.25% took effect
    assert inert_arms(data) == {"tis_inert"}
    table = took_effect_table(data)
    assert [r["verdict"] for r in table.rows].count(NOT_TESTABLE) == 1


def test_arms_that_differ_in_unchecked_factors_get_no_row():
    data = _study({"grpo": Algorithm(), "dr": Algorithm(scale="none")}, {})
    assert factor_shares(data) == [] and inert_arms(data) == set()


@pytest.mark.skipif(not zoo_model_built("rl_ready"), reason="zoo not available")
def test_a_correction_without_mismatch_is_flagged_from_a_real_trial():
    from ablate.tracking import MemoryTracker
    from ablate.trial import train

    algo = Algorithm(rollout_correction="token_mis", rollout_correction_cap=1.5)
    spec = TrialSpec(
        algorithm=algo,
        model="rl_ready",
        budget=Budget(max_steps=2, prompts_per_step=2, group_size=4, max_new_tokens=24),
        eval=EvalSpec(max_problems=2, n_samples=1, ks=(1,)),
    )
    tracker = MemoryTracker()
    assert train(spec, tracker=tracker).outcome == "finished"
    shares = [m["offpolicy/changed_frac"] for _, m in tracker.metrics if "offpolicy/ess" in m]
    assert shares == [0.0, 0.0]  # no mismatch: every weight exactly 1
    data = _study({"grpo": Algorithm(), "mis": algo}, {"mis": shares})
    assert inert_arms(data) == {"mis"}
