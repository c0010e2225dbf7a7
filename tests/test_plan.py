"""`ablate plan`: variance components, their upper bound, the design search, an arm's variance
budget and the command, on numbers checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ablate import tracking
from ablate.commands.cli import main
from ablate.report.stats import design
from ablate.report.stats.crossed import crossed
from ablate.report.stats.design import Components, Cost
from ablate.report.stats.inference import mde_paired
from ablate.report.stats.plan import (
    Pilot,
    contrast_matrices,
    default_components,
    eval_count,
    load_pilot,
    make_plan,
    pilot_cost,
    recommendation,
)
from ablate.study import Budget, EvalSpec, Study, arm

# per-problem pass rates at the final eval (K = 2 samples): reference grpo, arm dr (seed 2 diverged)
FINAL = {
    ("grpo", 0): [1.0, 0.5, 0.5, 0.0],
    ("grpo", 1): [1.0, 1.0, 0.5, 0.0],
    ("grpo", 2): [0.5, 0.5, 0.0, 0.0],
    ("dr", 0): [1.0, 1.0, 0.5, 0.5],
    ("dr", 1): [1.0, 0.5, 1.0, 0.0],
}
PROBLEMS = ["p0", "p1", "p2", "p3"]


def study(seeds=(0, 1, 2), effect=0.02) -> Study:
    return Study(
        name="planned",
        base_models=["rl_ready"],
        arms=[arm("grpo", "grpo", kl_coef=0.0), arm("dr", "dr_grpo")],
        seeds=list(seeds),
        effect_of_interest=effect,
        passk=None,
    )


def records(rates: list[float]) -> list[dict]:
    """K = 2 samples per problem: a rate of 1 is two correct, 0.5 one, 0 none."""
    return [
        {"problem_id": p, "sample": k, "correct": k < round(2 * r), "length": 5, "truncated": False}
        for p, r in zip(PROBLEMS, rates, strict=True)
        for k in range(2)
    ]


def uri(results) -> str:
    """The pilot's store: the file store (the MLflow one costs ~20 s to fill here)."""
    return f"jsonl://{results / 'store'}"


@pytest.fixture(scope="module")
def pilot(tmp_path_factory):
    results = tmp_path_factory.mktemp("pilot")
    store = tracking.open_store(uri(results))
    store.init()
    parent = store.open_study("planned")
    for trial in study().trials():
        key = (trial.arm, trial.spec.seed)
        tags = {
            "ablate.arm": trial.arm,
            "ablate.seed": str(trial.spec.seed),
            "ablate.model": trial.spec.model,
            "ablate.template": trial.spec.template,
        }
        run = parent.trial_tracker(trial.id, run_name=trial.id, tags=tags)
        run.log_metrics({"eval/pass_at_1": 0.1}, 0)
        run.log_samples("eval", records([0.0] * 4), 0)
        if key in FINAL:
            run.log_metrics({"eval/pass_at_1": float(np.mean(FINAL[key]))}, 10)
            run.log_metrics({"budget/wall_seconds": 5.0}, 10)
            run.log_samples("eval", records(FINAL[key]), 10)
        run.set_tags({"ablate.outcome": "finished" if key in FINAL else "diverged"})
        run.close("FINISHED")
    parent.close("FINISHED")
    return results


def test_variance_budget_by_hand():
    y = np.array([[1.0, 0.5], [0.5, 0.0], [0.75, 0.25]])  # 3 seeds × 2 problems, K = 4
    b = design.variance_budget(y, samples=4)
    # seed means 0.75, 0.25, 0.5: variance 1/16; eval noise per seed mean_j ŷ(1 − ŷ)/(K − 1)/J:
    # 0.125/3/2, 0.125/3/2, 0.1875/3/2 -> mean 7/288
    assert b.total == pytest.approx(1 / 16)
    assert b.eval_noise == pytest.approx(7 / 288)
    assert b.training == pytest.approx(1 / 16 - 7 / 288)
    assert b.eval_share == pytest.approx(7 / 18)
    assert math.isnan(design.variance_budget(y[:1], 4).total)


def test_sample_variance_is_unbiased_per_sample_variance():
    # (0.5·0.5 + 0.25·0.75)·K/(K − 1) with K = 4
    assert design.sample_variance(np.array([[0.5]]), np.array([[0.25]]), 4) == pytest.approx(
        (0.25 + 0.1875) * 4 / 3
    )


def test_design_variance_on_constructed_components():
    c = Components(seed_var=0.004, problem_var=0.0009, sp_var=0.01, sample_var=0.5)
    # 0.004/4 + 0.0009/100 + (0.01 + 0.5/5)/(4·100)
    assert design.design_variance(c, 4, 100, 5) == pytest.approx(0.001 + 0.000009 + 0.000275)
    # seeds only: df n − 1; residual only: crossed never drops the seed mean square (it holds
    # the residual too), so its n − 1 df still bound the df
    assert design.design_df(Components(0.004, 0, 0, 0), 4, 100, 5) == pytest.approx(3)
    assert design.design_df(Components(0, 0, 0.01, 0), 4, 100, 5) == pytest.approx(3)


def test_pilot_components_predict_the_pilots_own_crossed_se_and_df():
    """Fed back the pilot's own design, the prediction is `crossed` on the pilot (no clipping)."""
    rng = np.random.default_rng(0)
    n, J, K = 5, 40, 8
    p = np.clip(0.5 + rng.normal(0, 0.15, (1, J)) + rng.normal(0, 0.05, (n, 1)), 0.05, 0.95)
    shift = rng.normal(0, 0.1, (1, J)) + rng.normal(0, 0.1, (n, 1))  # arm × problem, arm × seed
    arm = rng.binomial(K, np.clip(p + shift, 0, 1)) / K
    ref = rng.binomial(K, p) / K
    c = design.contrast_components(arm, ref, K)
    assert c.seed_var > 0 and c.problem_var > 0 and c.sp_var > 0
    direct = crossed(arm - ref)
    assert design.design_variance(c, n, J, K) == pytest.approx(direct.se**2)
    assert design.design_df(c, n, J, K) == pytest.approx(direct.df)


def test_upper_bound_factor_and_seed_term():
    # chi² on 2 df is exponential: its 20% quantile is −2 ln 0.8
    assert design.upper_factor(3) == pytest.approx(2 / (-2 * math.log(0.8)))
    c = Components(0.0, 0, 0, 0, ms_seed=0.05, resid_var=0.04, n=3, problems=10)
    # the pilot clipped σ²_seed to 0 (MS_seed 0.05 ≈ MS_resid 0.04); the bound is still positive
    expected = (0.05 * 2 / (-2 * math.log(0.8)) - 0.04) / 10
    assert design.at_upper_bound(c).seed_var == pytest.approx(expected)
    assert design.at_upper_bound(default_components()) == default_components()  # no pilot


def test_mde_is_the_paired_t_mde_for_seed_only_components():
    c = Components(0.001, 0, 0, 0)
    for n in (3, 5, 16):
        se, df = np.sqrt(design.design_variance(c, n, 64, 8)), design.design_df(c, n, 64, 8)
        assert design.mde(se, df, 0.05 / 3) == pytest.approx(mde_paired(0.001**0.5, n, 0.05 / 3))
    assert design.mde(0.0, float("nan"), 0.05) == 0.0


def test_search_picks_the_known_optimum():
    # sampling noise only: Var = v/(n·J·K). Training costs 1000 s a trial, an eval sample 0.01 s:
    # 3 seeds × 16 samples has a third of the variance of 4 seeds × 1 sample, and costs less
    c = Components(0.0, 0.0, 0.0, 0.5)
    cost = Cost(1000.0, 0.01, 1, trials_per_seed=1)
    grid = design.designs([c], cost, 0.05, problems=(64,), seeds=(3, 4), samples=(1, 16))
    hours = {(d.seeds, d.samples): d.hours for d in grid}
    assert hours[(3, 16)] == pytest.approx(3 * (1000 + 64 * 16 * 0.01) / 3600)
    mde = {(d.seeds, d.samples): d.mde for d in grid}
    assert mde[(3, 16)] < mde[(4, 1)] < mde[(3, 1)]
    effect = (mde[(3, 16)] + mde[(4, 1)]) / 2
    best = design.recommend(grid, effect, budget_hours=10)
    assert (best.seeds, best.samples) == (3, 16)
    # within a budget for 3 seeds only and an effect no design reaches: the smallest MDE
    small = design.recommend(grid, effect=1e-6, budget_hours=hours[(3, 16)])
    assert (small.seeds, small.samples) == (3, 16)
    assert design.recommend(grid, effect, budget_hours=0.01) is None
    cheap = design.frontier(grid, mde[(3, 1)], budget_hours=10)
    assert [(d.seeds, d.samples) for d in cheap] == [(3, 1), (3, 16)]  # per K, cheapest first


def test_problem_grid_ends_at_the_whole_split():
    assert design.problem_grid(256) == (64, 128, 256)
    assert design.problem_grid(500) == (64, 128, 256, 500)
    assert design.problem_grid(40) == (40,)


def test_pilot_loads_final_rates_and_diverged_trials_count_zero(pilot):
    p = load_pilot(pilot, "planned", uri(pilot))
    assert p.samples == 2
    assert p.rates[("grpo", "rl_ready", "plain", 1)].tolist() == FINAL[("grpo", 1)]
    ((label, (a, r)),) = contrast_matrices(p, study(), "grpo").items()
    assert label == "dr · rl_ready · plain"
    assert r.tolist() == [FINAL[("grpo", s)] for s in range(3)]
    assert a.tolist() == [FINAL[("dr", 0)], FINAL[("dr", 1)], [0.0] * 4]
    finished = p.trials[p.trials["outcome"] == "finished"]
    assert finished["steps"].tolist() == [10.0] * 5 and finished["evals"].tolist() == [2.0] * 5


def test_cost_from_a_pilot_by_hand():
    trials = pd.DataFrame(
        {
            "outcome": ["finished", "finished", "diverged"],
            "train_seconds": [50.0, 70.0, 1.0],
            "steps": [100.0, 100.0, float("nan")],
            "run_seconds": [74.0, 82.0, 2.0],
            "evals": [3.0, 3.0, float("nan")],
            "problems": [4.0, 4.0, float("nan")],
        }
    )
    cost = pilot_cost(Pilot("p", trials, {}, samples=2), study(), workers=2)
    assert cost.train_seconds == pytest.approx(100 * 0.6)  # study: 100 steps × median 0.6 s
    # eval: (74 − 50)/(3·4·2) = 1 and (82 − 70)/24 = 0.5 -> median 0.75 s a sample
    assert cost.eval_sample_seconds == pytest.approx(0.75)
    assert (cost.evals, cost.trials_per_seed, cost.fixed_trials) == (3.0, 2, 0)
    # 3 seeds × 2 arms, on 2 workers: 6 × (60 + 3·64·1·0.75)/2 s
    assert cost.hours(3, 64, 1) == pytest.approx(6 * (60 + 144) / 2 / 3600)
    # a pilot of other length: evals from the study's cadence (start and end)
    short = trials.assign(steps=[10.0, 10.0, float("nan")])
    assert pilot_cost(Pilot("p", short, {}, samples=2), study()).evals == 2


def test_eval_count_from_the_cadence():
    s = Study(
        name="c",
        base_models=["rl_ready"],
        arms=[arm("grpo", "grpo")],
        budget=Budget(max_steps=80),
        eval=EvalSpec(every=20, n_samples=2, ks=(1, 2)),
        passk=None,
    )
    assert eval_count(s) == 1 + 3 + 1  # start, steps 20/40/60, end


def test_make_plan_from_the_pilot(pilot):
    plan = make_plan(study(), 0.2, budget_hours=5, pilot=load_pilot(pilot, "planned", uri(pilot)))
    assert plan.family == 1 and plan.alpha == pytest.approx(0.05)
    assert plan.best == min(plan.table, key=lambda d: (d.hours, d.mde))
    text = recommendation(plan)
    assert f"{plan.best.seeds} seeds × {plan.best.problems} problems" in text


def test_plan_command(pilot, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps cells in a narrow terminal
    path = tmp_path / "full.py"
    path.write_text(
        "from ablate.study import Study, arm\n"
        "STUDY = Study(name='planned', base_models=['rl_ready'], arms=[arm('grpo', 'grpo', "
        "kl_coef=0.0), arm('dr', 'dr_grpo')], seeds=list(range(10)), effect_of_interest=0.02)\n"
    )
    args = ["plan", str(path), "--pilot", str(pilot), "--tracking-uri", uri(pilot)]
    args += ["--effect", "0.1", "--cpu-hours", "2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "dr · rl_ready · plain" in out and "MDE" in out and " seeds × " in out
    assert "for Δ" not in out  # post-hoc power on the observed Δ is gone
    assert main(["plan", str(path), "--cpu-hours", "2"]) == 0  # defaults, no pilot
    assert "defaults (no pilot)" in capsys.readouterr().out
    assert main([*args, "--pilot-study", "other"]) == 2
    assert "no finished trials of study 'other'" in capsys.readouterr().err
    assert main([*args[:6], "--effect", "-0.1"]) == 2
    assert "must be a Δ pass@1 in (0, 1]" in capsys.readouterr().err
    assert main([*args[:8], "--cpu-hours", "0.001"]) == 2
    assert "below the cheapest design (3 seeds, 64 problems × 1 sample" in capsys.readouterr().err


def test_predicted_variance_matches_a_simulation_and_the_fixed_problem_one_does_not():
    """Δ̂ over 4000 simulated studies (4 seeds × 64 problems × 2 samples, binomial evals) has the
    predicted variance within 8%; leaving out the arm × problem term (a fixed-problem reading)
    misses it by more than that. The pilot estimate of v is unbiased too."""
    rng = np.random.default_rng(1)
    reps, n, J, K = 4000, 4, 64, 2
    seed, problem, sp = 0.04**2, 0.15**2, 0.1**2
    x = (
        rng.normal(0, seed**0.5, (reps, n, 1))
        + rng.normal(0, problem**0.5, (reps, 1, J))
        + rng.normal(0, sp**0.5, (reps, n, J))
    )  # the true per-(seed, problem) difference, around pass rates of 0.5
    arm = rng.binomial(K, 0.5 + x / 2) / K
    ref = rng.binomial(K, 0.5 - x / 2) / K
    v = 0.5 - (seed + problem + sp) / 2  # E[p_a(1 − p_a) + p_r(1 − p_r)] with p = 0.5 ± x/2
    truth = Components(seed, problem, sp, v)
    observed = np.var((arm - ref).mean(axis=(1, 2)), ddof=1)
    assert observed == pytest.approx(design.design_variance(truth, n, J, K), rel=0.08)
    fixed = Components(seed, 0.0, sp, v)
    assert design.design_variance(fixed, n, J, K) < observed / 1.08
    estimates = [design.sample_variance(a, r, K) for a, r in zip(arm[:500], ref[:500], strict=True)]
    assert np.mean(estimates) == pytest.approx(v, rel=0.02)
