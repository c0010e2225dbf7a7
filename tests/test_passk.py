"""pass@k, pass^k and signal probability against brute-force enumeration; CIs; the sweep."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ablate.base.errors import ConfigError
from ablate.base.passk import bootstrap_ci, pass_at_k, pass_hat_k, signal_probability
from ablate.base.records import SamplingParams
from ablate.testing import ScriptedEngine, ToyTask, ToyTemplate
from ablate.trial.passk_sweep import SWEEP_COLUMNS, passk_sweep


def brute_force(n: int, c: int, k: int) -> tuple[float, float]:
    """(P(some of k drawn samples correct), P(all k correct)) by enumerating every k-subset."""
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    return (
        sum(any(s) for s in subsets) / len(subsets),
        sum(all(s) for s in subsets) / len(subsets),
    )


CASES = [(n, c, k) for n in range(1, 9) for c in range(n + 1) for k in range(1, n + 1)]


def test_estimators_equal_enumeration_over_all_k_subsets():
    n, c, k = (np.array(col) for col in zip(*CASES, strict=True))
    for kk in np.unique(k):
        pick = k == kk
        expected = [brute_force(a, b, int(kk)) for a, b in zip(n[pick], c[pick], strict=True)]
        some, every = (np.array(col) for col in zip(*expected, strict=True))
        np.testing.assert_allclose(pass_at_k(n[pick], c[pick], int(kk)), some, atol=1e-12)
        np.testing.assert_allclose(pass_hat_k(n[pick], c[pick], int(kk)), every, atol=1e-12)
        np.testing.assert_allclose(
            signal_probability(n[pick], c[pick], int(kk)), some - every, atol=1e-12
        )


def test_matches_binomial_closed_form_for_large_n():
    n, c, k = 200, 37, 50
    expected = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k([n], [c], k)[0] == pytest.approx(expected, rel=1e-12)
    assert pass_hat_k([n], [c], 3)[0] == pytest.approx(math.comb(c, 3) / math.comb(n, 3))


def test_pass_at_1_is_the_mean_correctness_rate():
    c = np.array([0, 3, 7, 10, 5])
    np.testing.assert_allclose(pass_at_k(np.full(5, 10), c, 1), c / 10)


def test_edge_counts():
    n = np.array([6, 6, 6])
    np.testing.assert_array_equal(pass_at_k(n, [0, 6, 1], 6), [0.0, 1.0, 1.0])
    np.testing.assert_array_equal(pass_at_k(n, [0, 0, 0], 3), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(pass_hat_k(n, [6, 5, 0], 6), [1.0, 0.0, 0.0])
    assert pass_at_k(np.array([], dtype=int), np.array([], dtype=int), 1).shape == (0,)


@pytest.mark.parametrize(
    ("n", "c", "k", "words"),
    [
        ([4], [1], 5, "at least k=5"),
        ([4], [5], 1, "[0, n]"),
        ([4], [-1], 1, "[0, n]"),
        ([4], [1], 0, "k must be"),
        ([4.5], [1], 1, "integers"),
    ],
)
def test_invalid_counts_raise_config_error(n, c, k, words):
    with pytest.raises(ConfigError, match=words.replace("[", r"\[").replace("]", r"\]")):
        pass_at_k(n, c, k)


def test_bootstrap_ci_brackets_the_mean_and_is_seeded():
    values = np.random.default_rng(1).random(200)
    low, high = bootstrap_ci(values, reps=2000, seed=3)
    assert low < values.mean() < high
    # The CI of a mean of 200 uniforms has half-width about 1.96 * sqrt(1/12 / 200) = 0.04.
    assert 0.05 < high - low < 0.11
    assert bootstrap_ci(values, reps=500, seed=3) == bootstrap_ci(values, reps=500, seed=3)
    assert bootstrap_ci([0.5] * 10) == (0.5, 0.5)
    assert all(math.isnan(x) for x in bootstrap_ci([]))


# -- the sweep ------------------------------------------------------------------------------------

TEMPLATE = ToyTemplate()
# Problems of ToyTask: 1+2=3, 3+4=7, 5+6=11; correct counts 3/4, 1/4, 0/4 (one verifier error).
SCRIPT = {
    TEMPLATE.render("1+2"): [" =3\n", " =4\n", " =3\n", " =3\n"],
    TEMPLATE.render("3+4"): [" =7\n", " =0\n", " =0\n", "boom"],
    TEMPLATE.render("5+6"): [" =1\n"] * 4,
}


def test_sweep_table_matches_hand_computed_rates():
    made = []

    def factory(name):
        made.append(name)
        return ScriptedEngine(SCRIPT)

    table = passk_sweep(
        ["m1", "m2"],
        [TEMPLATE],
        ToyTask(),
        n=4,
        ks=[1, 2, 4],
        sampling=SamplingParams(max_new_tokens=16),
        engine_factory=factory,
    )
    assert made == ["m1", "m2"]
    assert list(table.columns) == list(SWEEP_COLUMNS)
    assert len(table) == 6
    row = table[(table.model == "m2") & (table.k == 1)].iloc[0]
    assert row.pass_at_k == pytest.approx((3 / 4 + 1 / 4 + 0) / 3)
    assert row.ci_low <= row.pass_at_k <= row.ci_high
    at4 = table[(table.model == "m1") & (table.k == 4)].iloc[0]
    assert at4.pass_at_k == pytest.approx(2 / 3)
    assert at4.pass_hat_k == 0
    assert at4.signal_fraction == pytest.approx(2 / 3)
    # pass@2 of 3/4 correct: 1 - C(1,2)/C(4,2) = 1; of 1/4: 1 - C(3,2)/C(4,2) = 1/2.
    at2 = table[(table.model == "m1") & (table.k == 2)].iloc[0]
    assert at2.pass_at_k == pytest.approx((1 + 0.5 + 0) / 3)
    assert (table.n_problems == 3).all() and (table.n_samples == 12).all()
    assert (table.verifier_errors == 1).all()
    # " =3\n" is 4 characters + no EOS (stopped by "\n"); "boom" is 4 characters + EOS.
    expected_length = (4 * 11 + 5) / 12
    assert table.mean_length.iloc[0] == pytest.approx(expected_length)


def test_sweep_rejects_k_above_n_before_building_engines():
    def factory(name):
        raise AssertionError("no engine should be built")

    with pytest.raises(ConfigError, match="raise --n"):
        passk_sweep(
            ["m"],
            [TEMPLATE],
            ToyTask(),
            n=4,
            ks=[1, 8],
            sampling=SamplingParams(max_new_tokens=8),
            engine_factory=factory,
        )


def test_sweep_batches_prompts_reports_progress_and_calls_the_cell_hook():
    seen, cells = [], []
    table = passk_sweep(
        ["m"],
        [TEMPLATE],
        ToyTask(),
        n=4,
        ks=[1],
        sampling=SamplingParams(max_new_tokens=16),
        engine_factory=lambda name: ScriptedEngine(SCRIPT),
        max_problems=2,
        prompts_per_batch=1,
        progress=lambda label, done, total: seen.append((label, done, total)),
        on_cell=cells.append,
    )
    assert [s[1:] for s in seen] == [(0, 2), (1, 2), (2, 2)]  # the cell announced, then batches
    assert len(cells) == 1 and cells[0][0]["pass_at_k"] == table.pass_at_k.iloc[0]
    assert table.pass_at_k.iloc[0] == pytest.approx((3 / 4 + 1 / 4) / 2)
