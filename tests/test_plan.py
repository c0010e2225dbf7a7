"""`ablate plan`: from a pilot's final pass@1 to the seeds a full study needs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2

from ablate import tracking
from ablate.cli import main
from ablate.report.stats import inference
from ablate.report.stats.plan import pilot_values, plan_rows, recommendation
from ablate.study import Study, arm

PILOT = {"grpo": [0.50, 0.52, 0.48], "dr": [0.53, 0.53, 0.52]}  # differences 0.03, 0.01, 0.04


def study(seeds=(0, 1, 2), effect=0.02) -> Study:
    return Study(
        name="planned",
        base_models=["rl_ready"],
        arms=[arm("grpo", "grpo", kl_coef=0.0), arm("dr", "dr_grpo")],
        seeds=list(seeds),
        effect_of_interest=effect,
        passk=None,
    )


@pytest.fixture(scope="module")
def pilot(tmp_path_factory):
    results = tmp_path_factory.mktemp("pilot")
    store = tracking.open_store(tracking.default_uri(results))
    store.init()
    parent = store.open_study("planned")
    for trial in study().trials():
        tags = {
            "ablate.arm": trial.arm,
            "ablate.seed": str(trial.spec.seed),
            "ablate.model": trial.spec.model,
            "ablate.template": trial.spec.template,
        }
        run = parent.trial_tracker(trial.id, run_name=trial.id, tags=tags)
        run.log_metrics({"eval/pass_at_1": 0.1}, 0)
        run.log_metrics({"eval/pass_at_1": PILOT[trial.arm][trial.spec.seed]}, 10)
        run.set_tags({"ablate.outcome": "finished"})
        run.close("FINISHED")
    parent.close("FINISHED")
    return results


def test_pilot_values_are_each_trials_final_pass_at_1(pilot):
    values = pilot_values(pilot, "planned").sort_values(["arm", "seed"])
    assert values["value"].tolist() == pytest.approx(PILOT["dr"] + PILOT["grpo"])


def test_plan_rows_by_hand(pilot):
    full = study(seeds=range(10))
    (row,) = plan_rows(full, pilot_values(pilot, "planned"), 0.02)
    d = np.array([0.03, 0.01, 0.04])
    sd = np.std(d, ddof=1)
    assert (row.pilot_seeds, row.delta, row.sd) == (3, pytest.approx(d.mean()), pytest.approx(sd))
    # one contrast: alpha 0.05; the upper bound of the SD from 2 degrees of freedom
    assert row.sd_upper == pytest.approx(sd * math.sqrt(2 / chi2.ppf(0.2, 2)))
    assert row.for_effect == inference.seeds_needed(0.02, sd, alpha=0.05)
    assert row.for_effect_upper == inference.seeds_needed(0.02, row.sd_upper, alpha=0.05)
    assert row.for_effect_upper >= row.for_effect
    assert f"seeds = {row.for_effect_upper}" in recommendation([row], 0.02)
    assert "effect_of_interest" in recommendation([row], None)


def test_plan_command_prints_the_table_and_one_recommendation(pilot, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps cells in a narrow terminal
    path = tmp_path / "full.py"
    path.write_text(
        "from ablate.study import Study, arm\n"
        "STUDY = Study(name='planned', base_models=['rl_ready'], arms=[arm('grpo', 'grpo', "
        "kl_coef=0.0), arm('dr', 'dr_grpo')], seeds=list(range(10)), effect_of_interest=0.02)\n"
    )
    assert main(["plan", str(path), "--pilot", str(pilot)]) == 0
    out = capsys.readouterr().out
    assert "rl_ready" in out and "seeds = " in out
    assert main(["plan", str(path), "--pilot", str(pilot), "--pilot-study", "other"]) == 2
    assert "no finished trials of study 'other'" in capsys.readouterr().err
