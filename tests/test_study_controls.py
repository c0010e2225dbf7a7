"""Declared controls (`Study(positive_control=Control(...), graded_control=Control(...))`): the
record, its checks as one-line errors before any compute, and the warning for a control off the
contrasts' seeds."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

from ablate.base.errors import StudyError, StudyWarning
from ablate.commands.cli import main
from ablate.study import Cells, Control, Study, arm, load_study
from ablate.study.controls import declared

M = {"minibatches": 4, "kl_coef": 0.0}
ARMS = [
    arm("grpo", "grpo", **M),
    arm("dr", "dr_grpo", **M),
    arm("again", replicate_of="grpo"),
    arm("rnd", "grpo", reward_control="random", **M),
    arm("noisy", "grpo", reward_control="noisy", reward_noise_fraction=0.5, **M),
]
POSITIVE, GRADED = Control(arm="rnd", effect=-0.25), Control(arm="noisy", effect=-0.07)


def make(**changes) -> Study:
    fields = dict(name="s", base_models=["rl_ready"], arms=ARMS, seeds=range(5), passk=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        return Study(**{**fields, **changes})


def test_controls_are_read_back_as_names_with_their_declared_effects():
    s = make(positive_control=POSITIVE, graded_control=GRADED)
    assert (s.positive_control, s.graded_control) == ("rnd", "noisy")
    assert s.control_effects == {"rnd": -0.25, "noisy": -0.07}
    assert [a.name for a in s.compared_arms] == ["grpo", "dr"]  # controls, replicates out
    assert declared(s) == [
        Control("rnd", -0.25, "positive"),
        Control("noisy", -0.07, "graded"),
    ]
    # a replace keeps the effects; the old spelling (a name) still works, without an effect
    assert dataclasses.replace(s, seeds=range(6)).control_effects == s.control_effects
    legacy = make(positive_control="rnd")
    assert legacy.positive_control == "rnd" and declared(legacy) == [
        Control("rnd", None, "positive")
    ]


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(positive_control=Control("nope", -0.2)), "positive_control='nope' names no arm"),
        (
            dict(graded_control=Control("again", -0.1)),
            "graded_control='again' must be an arm other",
        ),
        (dict(graded_control="noisy"), "graded_control='noisy' needs its declared effect"),
        (dict(positive_control=Control("rnd", 0.0)), "effect must be the expected Δ pass@1"),
        (dict(positive_control=Control("rnd", -1.5)), "effect=-1.5): effect must be"),
        (dict(graded_control=Control("noisy", float("nan"))), "effect=nan): effect must be"),
        (dict(graded_control=Control("noisy", "big")), "effect='big'): effect must be"),
        (
            dict(positive_control=POSITIVE, graded_control=Control("noisy", 0.05)),
            "have opposite signs",
        ),
        (
            dict(positive_control=POSITIVE, graded_control=Control("noisy", -0.3)),
            "graded_control effect=-0.3 must be smaller in size than the positive control's -0.25",
        ),
        (
            dict(positive_control=POSITIVE, graded_control=Control("rnd", -0.1)),
            "graded_control and positive_control both name 'rnd'",
        ),
    ],
)
def test_a_wrong_declaration_is_one_line_before_any_compute(changes, message):
    with pytest.raises(StudyError) as err:
        make(**changes)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_study_file_with_a_wrong_declaration_is_refused_by_run(tmp_path, capsys):
    path = tmp_path / "bad.py"
    path.write_text(
        "from ablate.study import Control, Study, arm\n"
        "STUDY = Study(name='bad', base_models=['rl_ready'], passk=None, seeds=[0, 1, 2],\n"
        "    arms=[arm('grpo', 'grpo'), arm('rnd', 'grpo', reward_control='random')],\n"
        "    positive_control=Control(arm='rnd', effect=0))\n"
    )
    with pytest.raises(StudyError, match=r"bad\.py:2: study 'bad': positive_control="):
        load_study(path)
    assert main(["run", str(path), "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "effect must be the expected Δ pass@1" in err
    assert not (tmp_path / "r").exists()  # nothing ran, nothing was written


def test_a_control_off_the_contrasts_seeds_warns():
    fields = dict(name="s", base_models=["rl_ready"], arms=[*ARMS[:2], ARMS[3]], passk=None)
    with pytest.warns(
        StudyWarning, match=r"positive control 'rnd' runs 5 seed\(s\) \[0, 1, 2, 3, 4\]"
    ):
        Study(
            **fields,
            seeds=[0, 1, 2],
            positive_control=POSITIVE,
            extra=[Cells(arms=["rnd"], seeds=[3, 4])],
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error", StudyWarning)
        Study(**fields, seeds=[0, 1, 2], positive_control=POSITIVE)  # on the contrasts' seeds
