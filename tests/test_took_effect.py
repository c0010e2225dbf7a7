"""The report's inert-factor flag: a differing factor that changed under 1% of the training
tokens marks its arm "not testable at this setting"."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from ablate.factors.algorithms import Algorithm
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.report.data.arms import arm_engine
from ablate.report.data.load import StudyData
from ablate.report.render.took_effect import diagnostics_table, took_effect_table
from ablate.report.stats.took_effect import (
    INERT,
    NOT_TESTABLE,
    diagnostics,
    factor_shares,
    inert_arms,
    inert_verdicts,
    partly_inert_sentences,
)
from ablate.testing import zoo_model_built


def _study(
    algorithms: dict[str, Algorithm],
    shares: dict[str, list[float]],
    metric: str = "offpolicy/changed_frac",
) -> StudyData:
    trials = pd.DataFrame({"arm": list(algorithms)})
    history = pd.DataFrame(
        [
            {"arm": arm, "step": step, "metric": metric, "value": v}
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
    assert rows["tis_inert"]["verdict"] == INERT
    assert rows["tis_live"]["share changed"] == pytest.approx(0.4)
    assert rows["mis_edge"]["share changed"] == pytest.approx(0.0125)  # 1.25% took effect
    assert inert_arms(data) == {"tis_inert"}
    table = took_effect_table(data)
    assert [r["verdict"] for r in table.rows].count(INERT) == 1


def test_a_mismatch_factor_is_read_from_the_share_of_mismatched_tokens():
    data = _study(
        {
            "grpo": Algorithm(),
            "bf16": Algorithm(rollout_precision="bf16"),
            "stale": Algorithm(rollout_staleness=2),
        },
        {"bf16": [0.9, 0.95], "stale": [0.0, 0.004]},
        metric="offpolicy/mismatched_frac",
    )
    rows = {r["arm"]: r for r in factor_shares(data)}
    assert rows["bf16"]["factor"] == "rollout_precision" and not rows["bf16"]["_inert"]
    assert rows["stale"]["factor"] == "rollout_staleness" and rows["stale"]["_inert"]


@dataclasses.dataclass(frozen=True)
class _Row:  # the fields of a contrast row `inert_verdicts` reads
    arm: str
    verdict: str
    note: str = ""


def test_an_inert_arms_contrast_verdict_is_not_testable_whatever_its_p():
    data = _study(
        {
            "grpo": Algorithm(),
            "tis_inert": Algorithm(rollout_correction="token_truncate"),
            "tis_live": Algorithm(rollout_correction="token_truncate"),
        },
        {"tis_inert": [0.0, 0.002], "tis_live": [0.3, 0.5]},
    )
    rows = [_Row("tis_inert", "equivalent"), _Row("tis_live", "different", "x")]
    out = inert_verdicts(data, rows)
    assert out[0].verdict == NOT_TESTABLE
    assert out[0].note == "rollout_correction changed 0.1% of training tokens"
    assert out[1] == rows[1]


def test_an_arm_is_not_testable_only_when_nothing_it_changes_acted():
    algorithms = {
        "grpo": Algorithm(),
        "bf16_opsm": Algorithm(rollout_precision="bf16", rollout_correction="opsm"),
        "clip_tis": Algorithm(clip_high=0.28, rollout_correction="token_truncate"),
        "tis_capped": Algorithm(rollout_correction="token_truncate", rollout_correction_cap=2.0),
    }
    logged = {
        ("bf16_opsm", "offpolicy/mismatched_frac"): 0.25,
        ("bf16_opsm", "offpolicy/changed_frac"): 0.0,
        ("clip_tis", "offpolicy/changed_frac"): 0.0,
        ("tis_capped", "offpolicy/changed_frac"): 0.0,
    }
    history = pd.DataFrame(
        [{"arm": a, "step": 1, "metric": m, "value": v} for (a, m), v in logged.items()]
    )
    data = StudyData(
        "s",
        "grpo",
        pd.DataFrame({"arm": list(algorithms)}),
        history,
        pd.DataFrame(),
        pd.DataFrame(),
        algorithms=algorithms,
    )
    rows = factor_shares(data)
    # a correction and its own parameter are one row: one metric measures both
    assert [r["factor"] for r in rows if r["arm"] == "tis_capped"] == [
        "rollout_correction, rollout_correction_cap"
    ]
    # the precision acted in bf16_opsm, clip_high (no share metric) may have in clip_tis
    assert inert_arms(data) == {"tis_capped"}
    said = partly_inert_sentences(data)
    assert len(said) == 2 and said[0].startswith("bf16_opsm: rollout_correction changed 0.0%")
    assert "measures its other differing factors only" in said[1]


def test_a_correction_inert_on_another_engine_leaves_the_engines_contrast_testable():
    """vLLM's fp32 kernels moved no token by 1e-4 (the lane measures it): TIS on them is inert,
    but the arm also samples with another engine, so its contrast still tests that."""
    algorithms = {"grpo": Algorithm(), "vllm_tis": Algorithm(rollout_correction="token_truncate")}
    algorithms["hf_tis"] = algorithms["vllm_tis"]
    history = pd.DataFrame(
        [
            {"arm": a, "step": 1, "metric": "offpolicy/changed_frac", "value": 0.0}
            for a in ("vllm_tis", "hf_tis")
        ]
    )
    trials = pd.DataFrame({"arm": list(algorithms), "engine": ["hf", "vllm", "hf"]})
    data = StudyData(
        "s", "grpo", trials, history, pd.DataFrame(), pd.DataFrame(), algorithms=algorithms
    )
    assert arm_engine(trials, "vllm_tis") == "vllm" and arm_engine(trials, "grpo") == "hf"
    assert arm_engine(trials.drop(columns="engine"), "vllm_tis") == "hf"  # an older table
    assert inert_arms(data) == {"hf_tis"}
    (said,) = [s for s in partly_inert_sentences(data) if s.startswith("vllm_tis")]
    assert "measures its other differing factors only" in said


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


def test_the_diagnostics_table_averages_each_arms_steps_and_takes_the_largest_gap():
    history = pd.DataFrame(
        [
            {"arm": "bf16", "step": 1, "metric": "offpolicy/logp_diff_mean", "value": 0.002},
            {"arm": "bf16", "step": 2, "metric": "offpolicy/logp_diff_mean", "value": 0.004},
            {"arm": "bf16", "step": 1, "metric": "offpolicy/logp_diff_max", "value": 0.05},
            {"arm": "bf16", "step": 2, "metric": "offpolicy/logp_diff_max", "value": 0.08},
            {"arm": "bf16", "step": 1, "metric": "offpolicy/masked_frac", "value": 0.25},
            {"arm": "bf16", "step": 2, "metric": "offpolicy/masked_frac", "value": 0.0},
            {"arm": "bf16", "step": 1, "metric": "loss", "value": 9.0},
        ]
    )
    algorithms = {"grpo": Algorithm(), "bf16": Algorithm(rollout_precision="bf16")}
    data = StudyData(
        "s",
        "grpo",
        pd.DataFrame({"arm": ["grpo", "bf16"]}),
        history,
        pd.DataFrame(),
        pd.DataFrame(),
        algorithms=algorithms,
    )
    (row,) = diagnostics(data)  # grpo logged no off-policy metric: no row
    assert row["arm"] == "bf16"
    assert row["|Δ log p| mean"] == pytest.approx(0.003)
    assert row["|Δ log p| max"] == pytest.approx(0.08)
    assert row["masked"] == pytest.approx(0.125)
    assert row["ESS"] != row["ESS"]  # not logged: NaN, shown as a dash
    (shown,) = diagnostics_table(data).rows
    assert shown["masked"] == "12.5%" and shown["ESS"] == "–"


def test_no_arm_of_the_quickstart_is_flagged():
    from pathlib import Path

    from ablate.study import load_study

    study = load_study(Path(__file__).parents[1] / "studies" / "quickstart.py")
    algorithms = {a.name: a.algorithm for a in study.arms}
    history = pd.DataFrame(columns=["arm", "step", "metric", "value"])
    empty = pd.DataFrame()
    arms = pd.DataFrame({"arm": list(algorithms)})
    data = StudyData("quickstart", "grpo", arms, history, empty, empty, algorithms=algorithms)
    # its arms differ in factors no share metric covers (scale, loss_agg, clip, ratio level,
    # reward controls): none is checked, none is flagged
    assert len(data.compared_arms) >= 4
    assert factor_shares(data) == [] and inert_arms(data) == set()
