"""Divergence as its own outcome (`stats.divergence`): the survivors' contrast on a tiny study,
Boschloo's exact test against a brute-force one and its size over every table, the hurdle Δ by
hand, and the calibration on simulated studies with divergence in one arm."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from ablate.report.data.load import StudyData
from ablate.report.stats import contrasts as cx
from ablate.report.stats import divergence as dv
from ablate.report.stats import outcomes as oc
from devtools.calibration import divergence as dvc
from devtools.calibration import sequential_task as st
from devtools.calibration.task_level import TaskModel, simulate_task

# per-seed pass rates on problems 0..3 at the final eval; None: the run diverged
SCORES = {
    "ref": {0: [0.5, 0.5, 0.0, 1.0], 1: [0.5, 0.0, 0.5, 0.5], 2: [1.0, 0.5, 0.5, 0.0]},
    "b": {0: [1.0, 0.5, 0.5, 1.0], 1: None, 2: [1.0, 1.0, 0.5, 0.5]},
}


def _study(scores=SCORES) -> StudyData:
    """Two arms, seeds 0..2, 4 problems × 2 samples (a rate of 0.5 is one of two correct)."""
    trials, samples, history = [], [], []
    for arm, by_seed in scores.items():
        for seed, rates in by_seed.items():
            tid, diverged = f"{arm}{seed}", rates is None
            trials.append(dict(trial_id=tid, arm=arm, model="m", template="t", seed=seed,
                               status="FINISHED", outcome="diverged" if diverged else "finished",
                               complete=not diverged))  # fmt: skip
            if diverged:
                continue
            history.append(dict(trial_id=tid, metric="eval/pass_at_1", step=10,
                                value=float(np.mean(rates))))  # fmt: skip
            for problem, rate in enumerate(rates):
                for sample in (0, 1):
                    samples.append(dict(trial_id=tid, arm=arm, model="m", template="t",
                                        seed=seed, step=10, problem_id=problem, sample=sample,
                                        correct=float(sample < 2 * rate)))  # fmt: skip
    return StudyData(
        name="s", reference_arm="ref", trials=pd.DataFrame(trials),
        history=pd.DataFrame(history), samples=pd.DataFrame(samples), passk=pd.DataFrame(),
    )  # fmt: skip


def test_the_survivors_contrast_pairs_the_seeds_both_arms_survived():
    (row,) = cx.headline_contrasts(_study())
    a, r = np.array([SCORES["b"][s] for s in (0, 2)]), np.array([SCORES["ref"][s] for s in (0, 2)])
    assert row.reading == cx.TASK and row.n == 2 and row.diffs.tolist() == (a - r).tolist()
    assert row.contrast.diff.value == pytest.approx((a - r).mean())  # 0.375: seed 1 left out
    d = row.divergence
    assert (d.k, d.n, d.ref_k, d.ref_n) == (1, 3, 0, 3) and d.any
    # hurdle: (1 − 1/3)·μ_b − μ_ref, μ over each arm's own survivors: the zeros reading's mean
    mu_b, mu_ref = a.mean(), np.mean(list(SCORES["ref"].values()))
    assert d.hurdle.value == pytest.approx(2 / 3 * mu_b - mu_ref)
    zeros = np.array([SCORES["b"][0], [0.0] * 4, SCORES["b"][2]]).mean() - mu_ref
    assert d.hurdle.value == pytest.approx(zeros)
    assert np.isnan(d.hurdle.low)  # 2 surviving pairs: no crossed SE, no interval
    # without the divergence the same study is read over all three seeds
    whole = {**SCORES, "b": {**SCORES["b"], 1: [0.5, 0.5, 0.5, 0.5]}}
    (row,) = cx.headline_contrasts(_study(whole))
    assert row.n == 3 and not row.divergence.any and np.isnan(row.divergence.p_value)


def _fisher_greater(x1: int, n1: int, x2: int, n2: int) -> float:
    """One-sided Fisher p by hypergeometric probabilities: P(X1 >= x1 | the margins)."""
    events = x1 + x2
    top = min(n1, events)
    comb = math.comb
    return sum(comb(n1, k) * comb(n2, events - k) for k in range(x1, top + 1)) / comb(
        n1 + n2, events
    )


def _boschloo_brute(x1: int, n1: int, x2: int, n2: int) -> float:
    """Two-sided as scipy defines it, twice the smaller one-sided p (at most 1); each one-sided
    p = sup over a common rate π of P(Fisher's one-sided p <= the observed one), on a grid."""
    pi = np.linspace(1e-4, 1 - 1e-4, 4001)
    sides = []
    for flip in (False, True):

        def stat(a: int, b: int, flip=flip) -> float:  # "less": the same with roles swapped
            return (
                _fisher_greater(n1 - a, n1, n2 - b, n2) if flip else _fisher_greater(a, n1, b, n2)
            )

        seen = stat(x1, x2)
        tables = [
            (a, b) for a in range(n1 + 1) for b in range(n2 + 1) if stat(a, b) <= seen * (1 + 1e-7)
        ]
        total = sum(sps.binom.pmf(a, n1, pi) * sps.binom.pmf(b, n2, pi) for a, b in tables)
        sides.append(float(np.max(total)))
    return min(1.0, 2 * min(sides))


@pytest.mark.parametrize("table", [(3, 5, 0, 5), (1, 4, 0, 4), (0, 6, 4, 6), (2, 5, 3, 4)])
def test_boschloo_matches_a_brute_force_one_and_beats_fisher(table):
    p = oc.exact_p(*table)
    assert p == pytest.approx(_boschloo_brute(*table), abs=2e-3)
    assert p <= oc.fisher_p(*table) + 1e-12
    assert oc.exact_p(table[2], table[3], table[0], table[1]) == pytest.approx(p)  # symmetric


def test_no_divergence_anywhere_is_no_test():
    assert np.isnan(oc.exact_p(0, 5, 0, 5)) and np.isnan(oc.exact_p(5, 5, 4, 4))


def test_the_exact_test_keeps_its_size_over_every_table():
    """Exact, over every pair of outcomes of two Binomial(n, q) arms; and it detects an arm
    diverging 30% of the time against none more often than Fisher's test does."""
    for n in (5, 10):
        k = np.arange(n + 1)
        reject = np.array([[oc.exact_p(a, n, b, n) < 0.05 for b in k] for a in k])
        for q in (0.1, 0.3, 0.5):
            weight = np.outer(sps.binom.pmf(k, n, q), sps.binom.pmf(k, n, q))
            assert weight[reject].sum() <= 0.05
    fisher = np.array([[oc.fisher_p(a, 10, b, 10) < 0.05 for b in k] for a in k])
    weight = np.outer(sps.binom.pmf(k, 10, 0.3), sps.binom.pmf(k, 10, 0.0))
    assert weight[reject].sum() > weight[fisher].sum() + 0.1


def test_the_hurdle_by_hand():
    value, half = dv.hurdle(0.6, 0.5, 1, 4, 0, 4, diff_se=0.02, df=5)
    assert value == pytest.approx(0.75 * 0.6 - 0.5)
    q_a, q_r = 2 / 6, 1 / 6  # Agresti–Caffo: (k + 1)/(n + 2)
    rates = 0.36 * q_a * (1 - q_a) / 6 + 0.25 * q_r * (1 - q_r) / 6
    want = np.sqrt((sps.t.ppf(0.975, 5) * 0.02) ** 2 + sps.norm.ppf(0.975) ** 2 * rates)
    assert half == pytest.approx(want)
    # every run of the arm diverged: no survivors' mean, the hurdle is −(1 − q_r)·μ_r
    value, _ = dv.hurdle(np.nan, 0.5, 4, 4, 1, 4, diff_se=np.nan, df=np.nan)
    assert value == pytest.approx(-0.75 * 0.5)


def test_the_simulator_diverges_one_arm_and_knows_the_survivors_truth():
    model = TaskModel(arms=2, seeds=10, divergence=(0.0, 0.3), survivor_effects=True,
                      effects=(0.0, 0.03))  # fmt: skip
    s = simulate_task(model, 400, 0, fixed=False)
    assert s.alive[:, 0].all() and abs((~s.alive[:, 1]).mean() - 0.3) < 0.02
    assert np.all(s.y[:, 1][~s.alive[:, 1]] == 0)
    assert s.survivors[1] - s.survivors[0] == pytest.approx(0.03, abs=1e-9)
    assert s.truth[1] == pytest.approx(0.7 * s.survivors[1]) and s.truth[0] == s.survivors[0]


def test_the_gates_pass_at_reduced_size():
    gates = dvc.adversarial_gates(150, seed=1) + st.adversarial_gates(100, seed=1)
    assert [g.line() for g in gates if not g.passed] == []
    assert len(gates) == 9
