"""The Tricks-or-Traps studies load, share one schedule, and run every arm pair a finding needs."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from ablate.confounds import differing_fields
from ablate.errors import StudyWarning
from ablate.report.claims.paper import FINDINGS
from ablate.study import load_study

STUDIES = Path(__file__).resolve().parents[1] / "studies"
#: the factor each single-technique finding isolates (the recipes differ in several)
FACTORS = {
    "no_std": {"scale"},
    "batch_std": {"scale"},
    "clip_higher": {"clip_high"},
    "token_agg": {"loss_agg"},
    "overlong_filter": {"mask_truncated"},
}


def _load(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("error", StudyWarning)  # no undeclared confound
        return load_study(STUDIES / f"{name}.py")


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.id)
def test_each_finding_has_its_pair_on_its_rung_with_five_seeds(finding):
    study = _load(finding.study)
    cells = {(t.arm, t.spec.model, t.spec.seed) for t in study.trials()}
    for arm in (finding.arm, finding.reference):
        assert {s for a, mdl, s in cells if a == arm and mdl == finding.model} == set(range(5))
    algos = {a.name: a.algorithm for a in study.arms}
    diff = set(differing_fields(algos[finding.arm], algos[finding.reference]))
    assert diff == FACTORS.get(finding.arm, diff)
    schedules = {(a.minibatches, a.ppo_epochs, a.kl_coef) for a in algos.values()}
    assert schedules == {(4, 1, 0.0)}  # one update schedule, no KL, in every arm
