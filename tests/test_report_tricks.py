"""The Tricks-or-Traps claims on in-memory studies with known effects."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ablate.algorithms import Algorithm
from ablate.report.claims import rules as rules
from ablate.report.claims.paper import FINDINGS, NO_EFFECT_MARGIN, claims_table, tricks_claims
from ablate.testing import study_data

GRPO4 = Algorithm(minibatches=4, kl_coef=0.0)
ARMS = {
    "grpo4": GRPO4,
    "no_std": dataclasses.replace(GRPO4, scale="none"),
    "clip_higher": dataclasses.replace(GRPO4, clip_high=0.28),
}


def _study(effects: dict[str, float], model="rl_ready", seeds=5, noise=0.01, seed=0):
    """Final pass@1 = 0.5 + seed effect + arm effect + noise; clip fraction logged per step."""
    rng = np.random.default_rng(seed)
    runs = []
    for s in range(seeds):
        seed_effect = rng.normal(0, 0.05)
        for arm in ARMS:
            final = 0.5 + seed_effect + effects.get(arm, 0.0) + rng.normal(0, noise)
            curves = {
                "eval/pass_at_1": {0: 0.5, 50: final},
                "policy/clip_frac_high": [0.002 if arm == "grpo4" else 0.004] * 3,
                "policy/grad_norm": [1.0] * 3,
            }
            runs.append((arm, model, s, curves))
    return study_data(runs, algorithms=ARMS, reference="grpo4")


def _claim(claims, finding_id):
    return next(c for c in claims if c.id == finding_id)


def test_a_clear_effect_in_the_papers_direction_is_supported_and_mechanism_is_read():
    data = _study({"no_std": 0.1})
    claims = tricks_claims({"tricks_or_traps": data})
    c = _claim(claims, "std_easy")
    assert c.verdict == rules.SUPPORTED and c.n == 5
    assert c.value == pytest.approx(0.1, abs=0.03) and c.low < c.value < c.high
    assert c.p_holm >= c.p_value  # Holm over all the directional findings tested
    assert "policy/grad_norm: 1 vs 1" in c.note


def test_the_opposite_direction_is_contradicted():
    claims = tricks_claims({"tricks_or_traps": _study({"no_std": -0.1})})
    assert _claim(claims, "std_easy").verdict == rules.CONTRADICTED


def test_no_effect_findings_need_the_whole_interval_inside_the_margin():
    tiny = tricks_claims({"tricks_or_traps": _study({}, noise=0.002)})
    c = _claim(tiny, "clip_higher_base")
    assert c.verdict == rules.SUPPORTED
    assert c.low >= -NO_EFFECT_MARGIN and c.high <= NO_EFFECT_MARGIN
    assert "policy/clip_frac_high: 0.004 vs 0.002" in c.note
    big = tricks_claims({"tricks_or_traps": _study({"clip_higher": 0.15})})
    assert _claim(big, "clip_higher_base").verdict == rules.CONTRADICTED
    noisy = tricks_claims({"tricks_or_traps": _study({}, noise=0.08, seeds=3)})
    assert _claim(noisy, "clip_higher_base").verdict == rules.INCONCLUSIVE


def test_missing_studies_and_arms_are_reported_not_guessed():
    claims = tricks_claims({"tricks_or_traps": _study({"no_std": 0.1})})
    assert _claim(claims, "std_hard").verdict == rules.NOT_TESTED  # no hard study
    assert "no results" in _claim(claims, "std_hard").note
    # the aligned rung was not run in this study: no seeds to compare
    assert _claim(claims, "clip_higher_aligned").verdict == rules.NOT_TESTABLE
    table = claims_table(claims)
    assert list(table["finding"]) == [f.id for f in FINDINGS]
    assert table.loc[table["finding"] == "std_easy", "verdict"].item() == rules.SUPPORTED
