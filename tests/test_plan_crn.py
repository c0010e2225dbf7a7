"""`ablate plan` with common random numbers: the eval noise of a difference read from paired
per-sample outcomes (hand-checked), the power at the recommended design by formula and by
simulation, the declared controls' detection probabilities, and (devtools.calibration.
plan_calibration) the recommended design's power against a known truth, adversarial models
included."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ablate import tracking
from ablate.commands.cli import main
from ablate.report.stats import design, plan_power
from ablate.report.stats.design import Components
from ablate.report.stats.plan import load_pilot, make_plan
from ablate.study import Control, Study, arm
from devtools.calibration import plan_calibration as pc


def test_identical_draws_leave_no_eval_noise_in_the_difference():
    rng = np.random.default_rng(0)
    draws = (rng.random((3, 5, 4)) < 0.5).astype(float)  # [n, J, K]
    assert design.difference_sample_variance(draws, draws) == 0.0
    rates = draws.mean(axis=-1)
    shifted = np.clip(rates + np.array([0.1, -0.1, 0.0])[:, None], 0, 1)  # a seed effect
    c = design.contrast_components(shifted, rates, 4, (draws, draws))
    assert c.sample_var == 0.0 and c.sp_var == pytest.approx(c.resid_var)
    assert c.independent_var > 0  # what summing the arms' variances would have taken
    # the design's eval term vanishes: Var = σ²_seed/n + σ²_problem/J + σ²_sp/(nJ) at any K
    assert design.design_variance(c, 3, 5, 1) == design.design_variance(c, 3, 5, 16)


def test_independent_draws_give_the_sum_and_any_draws_the_covariance_identity():
    # one cell, K = 4: arm 1 1 0 0 and reference 1 0 1 0 have sample covariance 0, so the
    # variance of the difference is the sum, 1/3 + 1/3 (ddof 1)
    a, r = np.array([[[1.0, 1, 0, 0]]]), np.array([[[1.0, 0, 1, 0]]])
    assert design.difference_sample_variance(a, r) == pytest.approx(2 / 3)
    assert design.sample_variance(a.mean(-1), r.mean(-1), 4) == pytest.approx(2 / 3)
    # Var(a − r) = Var(a) + Var(r) − 2·Cov(a, r), cell by cell, for any draws
    rng = np.random.default_rng(1)
    u = rng.random((4, 30, 8))
    a, r = (
        (u < 0.6).astype(float),
        (np.where(rng.random(u.shape) < 0.5, u, rng.random(u.shape)) < 0.5).astype(float),
    )
    cov = ((a - a.mean(-1, keepdims=True)) * (r - r.mean(-1, keepdims=True))).sum(-1) / 7
    by_hand = np.mean(a.var(-1, ddof=1) + r.var(-1, ddof=1) - 2 * cov)
    assert design.difference_sample_variance(a, r) == pytest.approx(by_hand)
    # independent arms in expectation: the sum of their Bernoulli variances p(1 − p)
    big = rng.random((2, 200, 50, 8))
    v = design.difference_sample_variance(big[0] < 0.3, big[1] < 0.6)
    assert v == pytest.approx(0.3 * 0.7 + 0.6 * 0.4, rel=0.02)
    assert np.isnan(design.difference_sample_variance(a[..., :1], r[..., :1]))  # K = 1


def test_power_is_what_mde_inverts():
    c = Components(seed_var=0.0004, problem_var=0.0002, sp_var=0.005, sample_var=0.1)
    se = np.sqrt(design.design_variance(c, 6, 256, 2))
    mde = design.mde(se, design.design_df(c, 6, 256, 2), 0.05)
    assert design.design_power(c, 6, 256, 2, mde, 0.05) == pytest.approx(0.8, abs=1e-6)
    assert design.design_power(c, 6, 256, 2, -mde, 0.05) == pytest.approx(0.8, abs=1e-6)
    assert design.rejection_probability(0.01, 0.0, 5, 0.05) == 1.0  # no variance, an effect


@pytest.mark.parametrize(
    "c, shape",
    [
        (Components(0.001, 0.0, 0.002, 0.05), (8, 128, 2)),  # seeds
        (Components(0.00002, 0.01, 0.0, 0.1), (4, 512, 1)),  # arm × problem
        (Components(0.00001, 0.0002, 0.004, 0.3), (12, 256, 1)),  # eval noise
    ],
)
def test_the_simulated_power_at_the_mde_is_near_the_formulas(c, shape):
    """The plan's formula (bounded df) against the report's own crossed test on 2000 simulated
    studies of each shape: 0.8 at the MDE, within 3 Monte-Carlo SEs plus the formula's
    conservative margin (0.05)."""
    se = np.sqrt(design.design_variance(c, *shape))
    mde = float(design.mde(se, design.design_df(c, *shape), 0.05))
    simulated = plan_power.simulate_power(c, *shape, mde, 0.05, studies=2000, seed=3)
    assert 0.8 - 0.03 <= simulated <= 0.8 + 0.03 + 0.05
    assert plan_power.simulate_power(c, *shape, 0.0, 0.05, studies=2000, seed=3) < 0.07  # level


PILOT_RATES = {  # (arm, seed) -> per-problem correct counts of K = 2 samples (J = 6)
    ("grpo", 0): [2, 1, 1, 0, 2, 1],
    ("grpo", 1): [2, 2, 1, 0, 1, 1],
    ("grpo", 2): [1, 1, 0, 0, 2, 1],
    ("dr", 0): [2, 2, 1, 1, 2, 1],
    ("dr", 1): [2, 1, 2, 0, 1, 1],
    ("dr", 2): [1, 1, 1, 0, 2, 2],
    ("noisy", 0): [1, 1, 0, 0, 1, 1],
    ("noisy", 1): [2, 1, 0, 0, 1, 0],
    ("noisy", 2): [1, 0, 0, 0, 2, 1],
}
M = {"minibatches": 4, "kl_coef": 0.0}


def tiny_study(seeds=(0, 1, 2)) -> Study:
    return Study(
        name="tiny",
        base_models=["rl_ready"],
        arms=[
            arm("grpo", "grpo", **M),
            arm("dr", "dr_grpo", **M),
            arm("rnd", "grpo", reward_control="random", **M),
            arm("noisy", "grpo", reward_control="noisy", **M),
        ],
        seeds=list(seeds),
        passk=None,
        positive_control=Control(arm="rnd", effect=-0.25),
        graded_control=Control(arm="noisy", effect=-0.1),
    )


@pytest.fixture(scope="module")
def tiny_pilot(tmp_path_factory):
    """A pilot whose arms share their eval draws: sample k is correct when k < count."""
    results = tmp_path_factory.mktemp("tiny")
    store = tracking.open_store(f"jsonl://{results / 'store'}")
    store.init()
    parent = store.open_study("tiny")
    for trial in tiny_study().trials():
        counts = PILOT_RATES.get((trial.arm, trial.spec.seed))
        if counts is None:
            continue  # the positive control was not piloted
        tags = {f"ablate.{k}": str(v) for k, v in (("arm", trial.arm), ("seed", trial.spec.seed))}
        tags |= {"ablate.model": "rl_ready", "ablate.template": "plain"}
        run = parent.trial_tracker(trial.id, run_name=trial.id, tags=tags)
        records = [
            {"problem_id": f"p{j}", "sample": k, "correct": k < n, "length": 5, "truncated": False}
            for j, n in enumerate(counts)
            for k in range(2)
        ]
        run.log_metrics(
            {"eval/pass_at_1": float(np.mean(counts)) / 2, "budget/wall_seconds": 5.0}, 10
        )
        run.log_samples("eval", records, 10)
        run.set_tags({"ablate.outcome": "finished"})
        run.close("FINISHED")
    parent.close("FINISHED")
    return results


def test_the_pilot_pairs_sample_draws_and_the_plan_states_each_controls_detection(tiny_pilot):
    pilot = load_pilot(tiny_pilot, "tiny", f"jsonl://{tiny_pilot / 'store'}")
    assert pilot.draws[("dr", "rl_ready", "plain", 0)].to_numpy().tolist() == [
        [1, 1],
        [1, 1],
        [1, 0],
        [1, 0],
        [1, 1],
        [1, 0],
    ]
    plan = make_plan(tiny_study(), 0.2, 50, pilot, problems=(6, 64), studies=400)
    (dr,) = [c for c in plan.components.values()]
    # shared draws "k < count": per problem the difference is count_a − count_r samples of ±1
    assert dr.sample_var < dr.independent_var
    kinds = {c.label: c for c in plan.checks}
    assert set(kinds) == {"dr · rl_ready · plain", "rnd", "noisy"}
    best = plan.best
    graded = kinds["noisy"]
    assert graded.kind == "graded control" and graded.effect == -0.1 and graded.note == ""
    piloted = design.at_upper_bound(design.contrast_components(*_pair(pilot, "noisy")))
    shape = (best.seeds, best.problems, best.samples)
    assert graded.power == pytest.approx(float(design.design_power(piloted, *shape, 0.1, 0.05)))
    assert kinds["rnd"].note.startswith("no pilot data for it")  # the contrasts' stand in
    assert kinds["dr · rl_ready · plain"].power >= 0.8  # the recommendation reaches the effect


def _pair(pilot, arm_name):
    from ablate.report.stats.pilot import pilot_pair

    p = pilot_pair(pilot, arm_name, "grpo", "rl_ready", "plain")
    return p.arm, p.ref, pilot.samples, p.draws


def test_plan_command_prints_the_controls_detection_probability(
    tiny_pilot, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("COLUMNS", "240")
    path = tmp_path / "tiny.py"
    path.write_text(
        "from ablate.study import Control, Study, arm\n"
        "M = {'minibatches': 4, 'kl_coef': 0.0}\n"
        "STUDY = Study(name='tiny', base_models=['rl_ready'], passk=None, seeds=[0, 1, 2],\n"
        "    arms=[arm('grpo', 'grpo', **M), arm('dr', 'dr_grpo', **M),\n"
        "          arm('rnd', 'grpo', reward_control='random', **M),\n"
        "          arm('noisy', 'grpo', reward_control='noisy', **M)],\n"
        "    positive_control=Control(arm='rnd', effect=-0.25),\n"
        "    graded_control=Control(arm='noisy', effect=-0.1))\n"
    )
    uri = f"jsonl://{tiny_pilot / 'store'}"
    args = ["plan", str(path), "--pilot", str(tiny_pilot), "--tracking-uri", uri]
    assert main([*args, "--effect", "0.2", "--cpu-hours", "50", "--simulate", "300"]) == 0
    out = capsys.readouterr().out
    assert "graded control noisy (declared Δ -0.1): detected with probability 0." in out
    assert "positive control rnd (declared Δ -0.25): detected with probability" in out
    assert "simulated" in out and "per sample, Δ (shared draws)" in out


def test_the_recommended_design_has_the_formulas_power_against_the_truth():
    """From the truth's own components the plan's design has, on 600 fresh studies drawn
    problem by problem with shared eval draws, the power its formula gives it (a little above:
    the bounded df is conservative); summing the arms' eval noise instead overshoots it."""
    t = pc.ADVERSARIAL[0]  # a Beta mixture of difficulties
    paired = pc.truth_gate(t, 600, seed=1)
    assert paired.passed, paired.line()
    summed = pc.truth_gate(t, 600, seed=1, rule=1)
    assert not summed.passed and summed.value > summed.high, summed.line()


def test_adversarial_gates_pass_at_reduced_size():
    gates = pc.adversarial_gates(studies=120, seed=0)
    assert len(gates) == 6
    assert all(g.passed for g in gates), "\n".join(g.line() for g in gates)


def test_control_detection_tool_on_the_tiny_pilot(tiny_pilot, capsys):
    from devtools.__main__ import main as devtools_main

    uri = f"jsonl://{tiny_pilot / 'store'}"
    args = ["control-detection", str(tiny_pilot), "tiny", "--tracking-uri", uri]
    args += ["--control", "noisy=-0.1"]
    assert devtools_main([*args, "--seeds", "3,8", "--studies", "200"]) == 0
    out = capsys.readouterr().out
    assert "noisy: declared -0.1, measured" in out and "over 3 seeds" in out
    low, high = map(float, re.findall(r"n=\d+: ([\d.]+) \(", out))
    assert 0 <= low <= high <= 1 and high > 0.5  # more seeds, more often detected
    assert devtools_main([*args[:5], "--control", "noisy:-0.1"]) == 2
    assert "--control takes ARM=EFFECT" in capsys.readouterr().err
