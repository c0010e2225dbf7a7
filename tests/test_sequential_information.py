"""Information-based monitoring (`stats.information`, `stats.sequential`): information fractions
from the crossed components by hand, boundaries at the observed fractions, the look's df at
small nominal levels, and "seeds cannot help" with its advice, in the replay and the runner."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from ablate.commands import sequential as seqrun
from ablate.report.stats import crossed as cx
from ablate.report.stats import information as info
from ablate.report.stats import sequential as sq
from ablate.report.stats import spending as sp
from ablate.study import Study, arm

LOOKS = (3, 5, 8, 12, 16)
Y = np.array([[0.50, 0.25, 0.75, 1.00], [0.25, 0.00, 0.75, 0.50], [0.75, 0.50, 1.00, 1.00]])


def _components(ms_seed: float, problem_var: float, n: int, problems: int) -> cx.Crossed:
    nan = float("nan")
    return cx.Crossed(nan, nan, nan, nan, problem_var, nan, n, problems, ms_seed)


def test_two_looks_by_hand():
    # J = 10: v_seed = MS_seed/J = 0.002, v_problem = σ²_problem/J = 0.001, r = 0.5.
    # Var at 4 seeds 0.002/4 + 0.001 = 0.0015, at 8 seeds 0.00125: t = 0.00125/0.0015 = 5/6
    c = _components(ms_seed=0.02, problem_var=0.01, n=4, problems=10)
    assert info.ratio(c) == pytest.approx(0.5)
    assert info.fraction(info.ratio(c), 4, 8) == pytest.approx(0.83)  # read to two decimals
    assert info.seed_gain(5 / 6) == pytest.approx(1 - np.sqrt(5 / 6))  # 8.7%: seeds still help
    assert not info.seeds_cannot_help(0.83) and info.seeds_cannot_help(0.91)
    assert info.problem_share(c, 4) == pytest.approx(0.001 / 0.0015)
    # without an interaction the information is the seed count; without seed spread, all of it
    assert info.fraction(info.ratio(_components(0.02, 0.0, 4, 10)), 4, 8) == pytest.approx(0.5)
    assert info.fraction(info.ratio(_components(0.0, 0.01, 4, 10)), 4, 8) == pytest.approx(1.0)
    assert info.fraction(np.nan, 4, 8) == pytest.approx(0.5)  # no estimate: the seed count


def test_fraction_from_a_table_by_hand_and_at_the_seed_variance_bound():
    # Y's mean squares (test_calibration_task): MS_seed 111/576, MS_problem 139/576, MS_resid
    # 7/576; σ²_problem = (139 − 7)/576/3, so r = σ²_problem/MS_seed = 132/333
    c = cx.crossed(Y)
    r = 132 / 333
    assert info.ratio(c) == pytest.approx(r)
    assert info.fraction(info.ratio(c), 3, 6) == pytest.approx(round((1 / 6 + r) / (1 / 3 + r), 2))
    # at the 90% upper bound, MS_seed·2/χ²₂(0.1) and χ²₂(0.1) = −2·ln 0.9 (an exponential)
    bound = r * (-2 * np.log(0.9)) / 2
    assert info.ratio(c, 0.1) == pytest.approx(bound)
    assert info.fraction(info.ratio(c, 0.1), 3, 6) < info.fraction(r, 3, 6)


def test_the_earlier_looks_follow_from_the_same_components():
    t = info.fraction(0.05, 8, 16)  # r = 0.05
    fractions = info.look_fractions(LOOKS, 2, t, final=False)
    r = (t / 8 - 1 / 16) / (1 - t)  # r recovered from the rounded t
    want = [(1 / 16 + r) / (1 / n + r) for n in LOOKS[:3]]
    assert fractions == pytest.approx(want) and fractions[-1] == pytest.approx(t)
    assert all(np.diff(fractions) > 0) and fractions[0] > LOOKS[0] / LOOKS[-1]
    final = info.look_fractions(LOOKS, 2, t, final=True)
    assert final == pytest.approx(np.array(want) / want[-1]) and final[-1] == 1.0


@pytest.mark.parametrize("kind", sp.SPENDING)
def test_boundaries_at_observed_fractions_spend_the_alpha_of_the_spending_function(kind):
    fractions = info.look_fractions(LOOKS, 3, 0.83, final=False)  # t unlike n/16 at every look
    z = sp.boundaries(fractions, 0.05 / 3, kind)
    spent = np.cumsum(sp.crossing_probabilities(fractions, z))
    assert spent == pytest.approx(sp.spent(np.array(fractions), 0.05 / 3, kind), abs=1e-8)
    nominal, eq = sq.look_levels(LOOKS, 3, 0.83, False, 0.05 / 3, kind)
    assert nominal == pytest.approx(2 * sps.norm.sf(z[-1]))
    z1 = sp.boundaries(fractions, sq.EQUIVALENCE_ALPHA, kind, sides=1)
    assert eq == pytest.approx(sps.norm.sf(z1[-1]))
    # a final look (seeds cannot help) spends all the alpha left: the total is alpha
    last = info.look_fractions(LOOKS, 3, 0.83, final=True)
    z_last = sp.boundaries(last, 0.05 / 3, kind)
    assert sp.crossing_probabilities(last, z_last).sum() == pytest.approx(0.05 / 3, abs=1e-8)
    assert sq.look_levels(LOOKS, 3, 0.83, True, 0.05 / 3, kind)[0] > nominal


def _mean_square_draws(n, J, seed_var, problem_var, resid_var, size, rng):
    """Crossed summaries of `size` balanced normal studies, drawn through their exact mean
    squares (independent scaled χ²) and the grand mean."""
    ms_s = (J * seed_var + resid_var) * rng.chisquare(n - 1, size) / (n - 1)
    ms_p = (n * problem_var + resid_var) * rng.chisquare(J - 1, size) / (J - 1)
    nu = (n - 1) * (J - 1)
    ms_r = resid_var * rng.chisquare(nu, size) / nu
    mean = rng.standard_normal(size) * np.sqrt(seed_var / n + problem_var / J + resid_var / (n * J))
    keep = (ms_p > ms_r).astype(float)
    terms = [(ms_s, n - 1), (keep * ms_p, J - 1), (-keep * ms_r, nu)]
    se = np.sqrt(sum(t for t, _ in terms) / (n * J))
    problem = np.where(keep > 0, (ms_p - ms_r) / n, 0.0)
    c = cx.Crossed(mean, se, cx.effective_df(terms), 0.0, problem, ms_r, n, J, ms_s)
    return c


@pytest.mark.parametrize(
    "n, J, seed_var, problem_var",
    [
        (3, 64, 0.0012, 0.0),
        (3, 256, 0.0012, 0.0225),
        (5, 64, 0.0012, 0.0056),
        (8, 256, 0.0012, 0.0056),
    ],
)
def test_a_looks_df_keeps_its_size_at_small_nominal_levels(n, J, seed_var, problem_var):
    """Exact mean-square draws; the default bounded df (every positive term at its bound) is
    liberal at these levels in the same draws: the check can fail."""
    c = _mean_square_draws(n, J, seed_var, problem_var, 0.09, 400_000, np.random.default_rng(n))
    t = np.abs(c.mean) / c.se
    liberal = 0
    for level in (0.001, 0.005):
        p = 2 * sps.t.sf(t, cx.look_df(c, sq.df_level(level)))
        assert (p < level).mean() <= level + 3 * np.sqrt(level / 400_000)
        liberal = max(liberal, (2 * sps.t.sf(t, c.df) < level).mean() / level)
    assert liberal > 1.15


def _problem_dominated(rng, n=16, J=64):
    """Arm × problem interaction SD 0.3, seed noise 0.001: more seeds add nothing."""
    b = rng.normal(0, 0.3, J)
    return (b - b.mean())[None, :] + rng.normal(0, 0.001, (n, 1)) + rng.normal(0, 0.001, (n, J))


def test_seeds_cannot_help_ends_the_contrast_with_its_advice():
    d = _problem_dominated(np.random.default_rng(3))
    r = sq.replay_contrast(d, LOOKS, 0.025, None, "obrien_fleming", name="b − ref")
    look = r.final
    assert len(r.history) == 1 and look.seeds_cannot_help and r.verdict == sq.INCONCLUSIVE
    assert r.decided and look.information >= 0.91 and look.problem_share > 0.9
    # the look spent all its alpha: its nominal level is the contrast's whole alpha
    assert look.nominal == pytest.approx(0.025, rel=1e-6)
    line = sq.look_line(r)
    assert line.count("\n") == 0 and line.startswith("b − ref: look 1 (3 seeds): inconclusive")
    assert "seeds cannot help" in line and "13 seed(s)" in line and "more problems" in line
    stop, verdict = sq.stopping_looks(d[None], LOOKS, 0.025, None, "obrien_fleming")
    assert (int(stop[0]), int(verdict[0])) == (0, 3)  # stopped at look 1, seeds cannot help
    # a seed-dominated contrast keeps adding seeds and says nothing of the kind
    rng = np.random.default_rng(4)
    seeds = rng.normal(0, 0.05, (16, 1)) + rng.normal(0, 0.01, (16, 64))
    other = sq.replay_contrast(seeds, LOOKS, 0.025, None, "obrien_fleming", reached=2)
    assert other.verdict == sq.CONTINUE and not any(x.seeds_cannot_help for x in other.history)
    assert "seeds cannot help" not in sq.look_line(other)


def test_the_runner_stops_seeding_a_contrast_seeds_cannot_help(monkeypatch, capsys):
    from ablate.report.data import load
    from ablate.report.stats import sequential_data

    arms = [arm("ref", "grpo"), arm("b", "grpo", clip_high=0.28), arm("c", "grpo", clip_high=0.3)]
    study = Study(name="s", base_models=["rl_ready"], arms=arms, seeds=range(16), looks=LOOKS)
    b, c = seqrun.primary_keys(study)
    rng = np.random.default_rng(5)
    stuck = sq.replay_contrast(_problem_dominated(rng), LOOKS, 0.025, None, "pocock", name="b")
    seeds = rng.normal(0, 0.05, (16, 1)) + rng.normal(0, 0.01, (16, 64))
    monkeypatch.setattr(load, "load_study_data", lambda *a, **k: None)

    def replayed(data):
        k = len(looks)
        live = sq.replay_contrast(seeds, LOOKS, 0.025, None, "pocock", reached=k, name="c")
        return {b: stuck, c: live}

    monkeypatch.setattr(sequential_data, "replay_study", replayed)
    looks = []

    def run_look(select):
        looks.append({(t.arm, t.spec.seed) for t in study.trials() if select(t)})
        return []

    seqrun.run_until_decided(study, run_look, results="r", tracking_uri=None)
    assert ("b", 3) not in looks[1] and ("c", 3) in looks[1]  # b gets no more seeds
    lines = capsys.readouterr().out.splitlines()
    advice = [x for x in lines if "seeds cannot help" in x]
    assert len(advice) == len(looks) and all(" b: look 1 (3 seeds)" in x for x in advice)


def test_calibrate_prints_the_sequential_and_divergence_tables(capsys):
    from devtools.__main__ import main

    argv = ["calibrate", "--seeds", "3", "--arms", "2", "--studies", "10"]
    assert main([*argv, "--sequential", "--divergence"]) == 0
    out = capsys.readouterr().out
    assert "| 0.5 | 0.05 | O'Brien–Fleming, new |" in out and "| 1 | 0 | Pocock, old |" in out
    assert "| q 0.2 in one arm | 10 |" in out and "survivors' Δ cov" in out
