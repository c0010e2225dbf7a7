"""Group-sequential designs: spending, boundaries, the replay, its data, its calibration."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from ablate.report.data.load import StudyData
from ablate.report.stats import information as info
from ablate.report.stats import sequential as sq
from ablate.report.stats import sequential_data as sd
from ablate.report.stats.crossed import DF_BOUND, crossed, look_df

LOOKS = (3, 5, 8, 12, 16)


@pytest.mark.parametrize("kind", sq.SPENDING)
def test_spending_is_zero_at_zero_alpha_at_one_and_increasing(kind):
    t = np.linspace(0, 1, 11)
    a = sq.spent(t, 0.05, kind)
    assert a[0] == pytest.approx(0.0, abs=1e-12) and a[-1] == pytest.approx(0.05, rel=1e-12)
    assert np.all(np.diff(a) > 0)


def test_spending_values_by_hand():
    # OBF-like: 2 − 2Φ(1.959964 / √0.5) = 2 − 2Φ(2.771808); Pocock-like: 0.05·ln(1 + (e − 1)/2)
    assert sq.spent(0.5, 0.05, "obrien_fleming") == pytest.approx(0.0055746, rel=1e-4)
    assert sq.spent(0.5, 0.05, "pocock") == pytest.approx(0.05 * np.log(1.8591409), rel=1e-6)
    with pytest.raises(ValueError, match="spending"):
        sq.spent(0.5, 0.05, "haybittle")


def test_two_equal_looks_pinned():
    """Lan–DeMets versions of the classic two-look designs (close to, not equal to, O'Brien–
    Fleming's (2.797, 1.977) and Pocock's (2.178, 2.178)); look 1 of OBF is analytic."""
    obf = sq.boundaries([0.5, 1.0], 0.05, "obrien_fleming")
    assert obf[0] == pytest.approx(sps.norm.isf(0.025) / np.sqrt(0.5), abs=1e-6)
    assert obf == pytest.approx([2.7718, 1.9793], abs=2e-4)
    assert sq.boundaries([0.5, 1.0], 0.05, "pocock") == pytest.approx([2.1570, 2.2010], abs=2e-4)


@pytest.mark.parametrize(
    "fractions, bounds",
    [
        ([0.5, 1.0], [2.178, 2.178]),  # Pocock, K = 2 (Jennison & Turnbull Table 2.1)
        ([0.5, 1.0], [2.797, 1.977]),  # O'Brien–Fleming, K = 2 (Table 2.3)
        (np.arange(1, 6) / 5, [2.413] * 5),  # Pocock, K = 5
        (np.arange(1, 6) / 5, 2.040 * np.sqrt(5 / np.arange(1, 6))),  # O'Brien–Fleming, K = 5
    ],
)
def test_integration_reproduces_the_classic_designs_alpha(fractions, bounds):
    assert sq.crossing_probabilities(fractions, bounds).sum() == pytest.approx(0.05, abs=5e-4)


@pytest.mark.parametrize("kind", sq.SPENDING)
@pytest.mark.parametrize("sides", [1, 2])
def test_boundaries_spend_the_increments_by_monte_carlo(kind, sides):
    t = np.array(LOOKS) / LOOKS[-1]
    z = sq.boundaries(t, 0.05, kind, sides=sides)
    want = np.diff(sq.spent(t, 0.05, kind), prepend=0.0)
    assert sq.crossing_probabilities(t, z, sides) == pytest.approx(want, abs=1e-7)
    rng = np.random.default_rng(7)
    steps = rng.standard_normal((200_000, len(t))) * np.sqrt(np.diff(t, prepend=0.0))
    zs = np.cumsum(steps, axis=1) / np.sqrt(t)  # canonical joint distribution
    cross = (np.abs(zs) if sides == 2 else zs) >= z
    first = np.where(cross.any(axis=1), cross.argmax(axis=1), -1)
    got = np.array([(first == k).mean() for k in range(len(t))])
    assert np.all(np.abs(got - want) < 4 * np.sqrt(want / 200_000) + 1e-4)


def test_one_look_is_the_fixed_design():
    assert sq.nominal_levels((16,), 0.05, "obrien_fleming") == pytest.approx([0.05])
    assert sq.equivalence_levels((16,), "pocock") == pytest.approx([0.05])


def _study_like(rng, effect, n=16, problems=32):
    noise = rng.normal(0, 0.03, (n, 1)) + rng.normal(0, 0.05, (1, problems))
    return effect + noise + rng.normal(0, 0.3, (n, problems))


def _by_hand(d, k, alpha, kind):
    """Look k rebuilt from its parts: (information, final, nominal, p)."""
    c = crossed(d[: LOOKS[k]])
    t = float(info.fraction(info.ratio(c, DF_BOUND), LOOKS[k], LOOKS[-1]))
    final = k == len(LOOKS) - 1 or bool(info.seeds_cannot_help(t))
    nominal = sq.look_levels(LOOKS, k, t, final, alpha, kind)[0]
    df = look_df(c, min(DF_BOUND, nominal))
    return t, final, nominal, float(2 * sps.t.sf(abs(c.mean) / c.se, df))


def test_replay_stops_at_the_first_look_below_its_nominal_level():
    d = _study_like(np.random.default_rng(1), 0.08)
    r = sq.replay_contrast(d, LOOKS, 0.05, None, "obrien_fleming", name="b − a")
    looks = [_by_hand(d, k, 0.05, "obrien_fleming") for k in range(len(LOOKS))]
    nominal, p = [x[2] for x in looks], [x[3] for x in looks]
    first = next(k for k in range(len(LOOKS)) if p[k] < nominal[k])
    assert r.verdict == sq.DIFFERENT and len(r.history) == first + 1
    assert r.final.seeds == LOOKS[first] and r.final.p_value == pytest.approx(p[first])
    assert r.final.low > 0 and r.final.nominal == pytest.approx(nominal[first])
    assert [look.information for look in r.history] == [x[0] for x in looks[: first + 1]]
    assert all(look.verdict == sq.CONTINUE for look in r.history[:-1])


def test_replay_equivalent_inconclusive_and_continue():
    rng = np.random.default_rng(2)
    null = _study_like(rng, 0.0)
    eq = sq.replay_contrast(null, LOOKS, 0.05, 0.1, "pocock")
    assert eq.verdict == sq.EQUIVALENT
    half = eq.final.estimate + np.array([-1, 1]) * 0.1
    assert half[0] < 0 < half[1]
    none = sq.replay_contrast(null, LOOKS, 0.05, None, "pocock")
    assert none.verdict == sq.INCONCLUSIVE and len(none.history) == len(LOOKS)
    partial = sq.replay_contrast(null, LOOKS, 0.05, None, "pocock", reached=2)
    assert partial.verdict == sq.CONTINUE and not partial.decided and len(partial.history) == 2


def test_replay_uses_the_seeds_ranked_below_each_look():
    d = _study_like(np.random.default_rng(3), 0.0)
    ranks = np.delete(np.arange(16), 1)  # seed 1 failed
    r = sq.replay_contrast(np.delete(d, 1, axis=0), LOOKS, 0.05, None, "pocock", ranks=ranks)
    assert [look.seeds for look in r.history] == [2, 4, 7, 11, 15]
    assert np.isnan(r.history[0].p_value)  # 2 seeds: no test


def test_vectorised_replay_agrees_with_the_records():
    rng = np.random.default_rng(4)
    d = np.stack([_study_like(rng, e) for e in (0.0, 0.03, 0.08, -0.1)])  # [4, n, J]
    stop, verdict = sq.stopping_looks(d, LOOKS, 0.05, 0.06, "pocock")
    names = {1: sq.DIFFERENT, 2: sq.EQUIVALENT}
    for i in range(len(d)):
        r = sq.replay_contrast(d[i], LOOKS, 0.05, 0.06, "pocock")
        assert names.get(int(verdict[i]), sq.INCONCLUSIVE) == r.verdict
        assert (stop[i] + 1 if stop[i] >= 0 else len(LOOKS)) == len(r.history)


def test_replay_splits_alpha_over_the_family_and_renders():
    d = _study_like(np.random.default_rng(5), 0.0)
    results = sq.replay({"b": (d, None, 5), "c": (d, None, 1)}, LOOKS, 0.05, None, "pocock")
    assert [r.alpha for r in results] == [0.025, 0.025]
    t = results[1].final.information
    assert results[1].final.nominal == pytest.approx(_by_hand(d, 0, 0.025, "pocock")[2])
    assert results[1].final.nominal == pytest.approx(
        sq.look_levels(LOOKS, 0, t, False, 0.025, "pocock")[0]
    )
    table = sq.render_history(results)
    assert table.count("\n") == 2 + 5 + 1 and f"| c | 1 | 3 of 3 | {t:.2f} |" in table
    assert sq.look_line(results[0]).startswith("b: look 5 (16 seeds): inconclusive, Δ ")


# --- from a study's results -------------------------------------------------------------------


def _data(looks=(3, 4), margin=0.5) -> StudyData:
    """ref and arm b, seeds 10..14, 2 problems × 2 samples, eval steps 1 and 2."""
    trials, samples = [], []
    for arm, base in (("ref", 0.5), ("b", 1.0)):
        for seed in (10, 11, 12, 13, 14):
            tid = f"{arm}{seed}"
            status, outcome = "FINISHED", "finished"
            if (arm, seed) == ("b", 11):
                outcome = "diverged"
            if (arm, seed) == ("ref", 12):
                status, outcome = "FAILED", "failed"
            if (arm, seed) == ("b", 14):
                status, outcome = "RUNNING", "unknown"
            complete = status == "FINISHED" and outcome == "finished"
            trials.append(dict(trial_id=tid, arm=arm, model="m", template="t", seed=seed,
                               status=status, outcome=outcome, complete=complete))  # fmt: skip
            for step in (1, 2):  # step 1: all wrong; step 2 (final) scores
                for problem, sample in ((0, 0), (0, 1), (1, 0), (1, 1)):
                    correct = float(step == 2 and (problem + sample) / 2 < base)
                    samples.append(dict(trial_id=tid, arm=arm, model="m", template="t",
                                        seed=seed, step=step, problem_id=problem, sample=sample,
                                        correct=correct))  # fmt: skip
    return StudyData(
        name="s",
        reference_arm="ref",
        trials=pd.DataFrame(trials),
        history=pd.DataFrame(),
        samples=pd.DataFrame(samples),
        passk=pd.DataFrame(),
        looks=looks,
        equivalence_margin=margin,
    )


def test_problem_scores_at_the_final_eval_survivors_only():
    data = _data()
    ref = sd.problem_scores(data, "ref", "m", "t")
    # ref (base 0.5): problem 0 → samples (0, 0.5) < 0.5: [1, 0] → 0.5; problem 1 → 0
    assert list(ref.index) == [10, 11, 13, 14]  # 12 failed
    assert ref.loc[10].tolist() == [0.5, 0.0]
    b = sd.problem_scores(data, "b", "m", "t")
    assert list(b.index) == [10, 12, 13] and b.loc[10].tolist() == [1.0, 0.5]  # 11 diverged
    d, ranks = sd.contrast_differences(data, "b", "m", "t")
    assert ranks.tolist() == [0, 3]  # seeds 10, 13 (11 diverged, 12 failed, 14 running)
    assert d.tolist() == [[0.5, 0.5], [0.5, 0.5]]


def test_looks_reached_stops_at_the_first_unsettled_seed():
    assert sd.looks_reached(_data(looks=(3, 4)), "b", "m", "t") == 2  # seed 14 is rank 4
    assert sd.looks_reached(_data(looks=(3, 5)), "b", "m", "t") == 1
    results = sd.replay_study(_data(looks=(3, 5)))
    (key, r), = results.items()  # fmt: skip
    assert key == ("b", "m", "t") and r.name == "b − ref" and len(r.history) == 1
    assert r.history[0].seeds == 1 and r.verdict == sq.CONTINUE  # seed 10 only: no test yet
