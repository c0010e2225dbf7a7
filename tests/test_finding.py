"""A paper's finding as data: the record's checks, a study's checks of the findings it declares,
and that declaring findings changes no trial id."""

from __future__ import annotations

import dataclasses

import pytest

import ablate
from ablate.base.errors import StudyError
from ablate.factors.finding import Finding
from ablate.study import Budget, Cells, Study, arm

GOOD = dict(
    id="std_easy",
    paper="Takeaway 2: remove the std on easy data",
    statement="no std − group std, pass@1: > 0",
    study="s",
    model="rl_ready",
    arm="no_std",
    reference="grpo",
    direction=+1,
    mechanism="policy/grad_norm",
)


def test_a_finding_is_keyword_only_and_exported_lazily():
    assert ablate.Finding is Finding and "Finding" in ablate.__all__
    with pytest.raises(TypeError):
        Finding("std_easy", "paper", "statement")  # type: ignore[misc]
    assert Finding(**GOOD).measure == "eval/pass_at_1"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"direction": 2}, "direction=2 must be +1, -1 or 0 (no effect)"),
        ({"direction": 0}, "margin=None: a finding of no effect needs a margin > 0"),
        ({"direction": 0, "margin": -0.1}, "margin=-0.1: a finding of no effect needs"),
        ({"margin": 0.03}, "margin=0.03 applies only to a finding of no effect"),
        ({"reference": "no_std"}, "arm and reference are both 'no_std'"),
        ({"measure": "pass@1"}, "measure='pass@1' must be a logged metric, namespace/name"),
        ({"mechanism": ""}, "mechanism='' must be a logged metric"),
        ({"study": "has space"}, "study='has space' must be a non-empty name"),
        ({"paper": " "}, "paper must say it in words"),
    ],
)
def test_a_bad_field_is_a_study_error_naming_it(change, message):
    with pytest.raises(StudyError) as info:
        Finding(**{**GOOD, **change})
    assert str(info.value).startswith("finding 'std_easy': ") and message in str(info.value)


def test_every_bad_field_is_reported_at_once():
    with pytest.raises(StudyError, match=r"measure='x' .*; direction=5 "):
        Finding(**{**GOOD, "direction": 5, "measure": "x"})


def _study(findings, **kw) -> Study:
    return Study(
        name="s",
        base_models=["rl_ready"],
        arms=[arm("grpo", "grpo", kl_coef=0.0), arm("no_std", "grpo", kl_coef=0.0, scale="none")],
        seeds=[0, 1, 2],
        budget=Budget(max_steps=2),
        passk=None,
        findings=findings,
        **kw,
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"study": "other"}, "finding 'std_easy': study='other', but study 's' declares it"),
        ({"arm": "dapo"}, "finding 'std_easy': arm='dapo' has no trials on base model 'rl_ready'"),
        ({"model": "aligned"}, "reference='grpo' has no trials on base model 'aligned'"),
        ({"template": "r1"}, "arm='no_std' has no trials on base model 'rl_ready' with template"),
    ],
)
def test_a_study_checks_the_findings_it_declares_against_its_own_grid(change, message):
    with pytest.raises(StudyError, match="study 's'") as info:
        _study([Finding(**{**GOOD, **change})])
    assert message in str(info.value)


def test_a_finding_on_an_extra_cell_and_duplicates():
    aligned = Finding(**{**GOOD, "id": "aligned", "model": "aligned"})
    extra = [Cells(arms=["grpo", "no_std"], base_models=["aligned"])]
    assert _study([aligned], extra=extra).findings == (aligned,)
    with pytest.raises(StudyError, match="finding 'std_easy' is declared twice"):
        _study([Finding(**GOOD), Finding(**GOOD)])
    with pytest.raises(StudyError, match="is not a Finding"):
        _study([dict(GOOD)])


def test_declaring_findings_changes_no_trial_id():
    with_findings = _study([Finding(**GOOD)])
    without = dataclasses.replace(with_findings, findings=())
    assert [t.id for t in with_findings.trials()] == [t.id for t in without.trials()]
    assert {t.spec.study for t in with_findings.trials()} == {"s"}
