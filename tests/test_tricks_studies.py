"""The Tricks-or-Traps studies load, share one schedule, declare the paper's findings they test,
and run every arm pair a finding needs."""

from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path

import pytest

from ablate.base.errors import StudyWarning
from ablate.factors.confounds import differing_fields
from ablate.study import load_study

STUDIES = Path(__file__).resolve().parents[1] / "studies"
TRICKS = [
    "tricks_or_traps",
    "tricks_or_traps_hard",
    "tricks_or_traps_short",
    "tricks_or_traps_long",
    "tricks_or_traps_length",
]
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


def _paper_findings():
    """The paper's findings as studies/tricks_or_traps.py declares them, in the paper's order."""
    sys.path.insert(0, str(STUDIES))
    try:
        return importlib.import_module("tricks_or_traps").FINDINGS
    finally:
        sys.path.remove(str(STUDIES))


def test_every_finding_of_the_paper_is_declared_by_the_study_it_names():
    declared = [f for name in TRICKS for f in _load(name).findings]
    assert sorted(f.id for f in declared) == sorted(f.id for f in _paper_findings())
    assert len(declared) == 14 and all(f in _load(f.study).findings for f in declared)


@pytest.mark.parametrize("finding", _paper_findings(), ids=lambda f: f.id)
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
