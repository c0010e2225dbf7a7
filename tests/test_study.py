"""Studies: grid builders, expansion with stable ids, and validation that lists every problem."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest

import ablate
from ablate.cli import main
from ablate.errors import StudyError
from ablate.study import (
    Budget,
    Cells,
    PassKSpec,
    SearchSpace,
    Study,
    arm,
    full_factorial,
    load_study,
    one_at_a_time,
    path,
)

OK = dict(name="s", base_models=["rl_ready"], arms=[arm("grpo", "grpo")], seeds=[0, 1])


def make(**changes) -> Study:
    return Study(**{**OK, **changes})


def test_one_at_a_time_changes_one_field_per_arm():
    arms = one_at_a_time("grpo", scale=["none", "batch_std"], clip_high=[0.28])
    assert [a.name for a in arms] == [
        "grpo",
        "grpo[scale='none']",
        "grpo[scale='batch_std']",
        "grpo[clip_high=0.28]",
    ]
    grpo = ablate.baseline("grpo")
    assert [set(grpo.diff(a.algorithm)) for a in arms] == [
        set(),
        {"scale"},
        {"scale"},
        {"clip_high"},
    ]


def test_full_factorial_is_the_product():
    arms = full_factorial(
        "grpo", scale=["none", "group_std"], loss_agg=["token_mean", "seq_mean_token_mean"]
    )
    assert len(arms) == 4 and len({a.algorithm for a in arms}) == 4


def test_path_adds_one_differing_field_at_a_time_and_ends_at_the_target():
    arms = path(
        "grpo",
        "dapo",
        order=[
            "overlong_buffer",
            "clip_high",
            "loss_agg",
            "dynamic_sampling",
            "kl_coef",
            "minibatches",
        ],
    )
    grpo, dapo = ablate.baseline("grpo"), ablate.baseline("dapo")
    assert arms[0].algorithm == grpo and arms[-1].algorithm == dapo and arms[-1].name == "dapo"
    sizes = [len(grpo.diff(a.algorithm)) for a in arms]
    assert sizes == list(range(7))
    assert set(grpo.diff(arms[1].algorithm)) == {"overlong_buffer"}
    with pytest.raises(StudyError, match="exactly the differing fields"):
        path("grpo", "dapo", order=["clip_high"])


def test_expansion_gives_stable_distinct_ids_and_extra_cells():
    s = make(
        arms=one_at_a_time("grpo", scale=["none"]),
        extra=[Cells(arms=["grpo"], base_models=["mid", "hopeless"], seeds=[0])],
    )
    trials = s.trials()
    assert len(trials) == 2 * 2 + 2
    assert len({t.id for t in trials}) == len(trials)
    assert [t.id for t in trials] == [
        t.id
        for t in make(
            arms=one_at_a_time("grpo", scale=["none"]),
            extra=[Cells(arms=["grpo"], base_models=["mid", "hopeless"], seeds=[0])],
        ).trials()
    ]
    code = (
        "from ablate.study import *; print(Study(name='s', base_models=['rl_ready'], "
        "arms=[arm('grpo','grpo')], seeds=[0,1]).trials()[1].id)"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == make().trials()[1].id  # same id in another process


def test_identical_arms_from_several_builders_collapse():
    s = make(arms=one_at_a_time("grpo", scale=["none"]) + path("grpo", "dr_grpo"))
    assert [a.name for a in s.arms].count("grpo") == 1


MALFORMED = [
    ({"seeds": []}, "seeds is empty"),
    ({"budget": Budget(group_size=1)}, "group_size=1 must be >= 2"),
    ({"arms": [arm("a", "grpo"), arm("a", "dapo")]}, "duplicate arm names ['a']"),
    ({"base_models": ["no_such_model"]}, "unknown base model 'no_such_model'"),
    ({"templates": ["chat"]}, "unknown template 'chat'"),
    ({"arms": [arm("x", "grpo", clip_low=1.5)]}, "clip_low=1.5 must be < 1"),
    ({"arms": [arm("x", "grpo", not_a_field=1)]}, "unexpected keyword argument 'not_a_field'"),
    ({"arms": [arm("x", "no_preset")]}, "unknown preset 'no_preset'"),
    ({"arms": []}, "arms is empty"),
    ({"task": "chess"}, "unknown task 'chess'"),
    ({"task_options": {"layout": "sideways"}}, "layout"),
    ({"reference": "ppo"}, "reference arm 'ppo' is not one of the arms"),
    ({"seeds": [0, 0]}, "duplicate seeds"),
    ({"passk": PassKSpec(n=4, ks=(1, 8))}, "ks=(1, 8) must lie in 1..n=4"),
    ({"extra": [Cells(arms=["nope"])]}, "extra[0] names unknown arm 'nope'"),
    ({"search": {"lr2": SearchSpace(low=1e-5, high=1e-4, target="optim")}}, "'lr2' is not a field"),
    ({"name": "has space"}, "name 'has space'"),
    ({"arms": [arm("x", "dapo", overlong_buffer=500)]}, "overlong_buffer=500 must be smaller"),
]


@pytest.mark.parametrize(("changes", "message"), MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_study_is_rejected_naming_the_problem(changes, message):
    with pytest.raises(StudyError) as err:
        make(**changes)
    assert message in str(err.value)


def test_every_problem_is_listed_at_once():
    with pytest.raises(StudyError) as err:
        make(seeds=[], templates=["chat"], base_models=["nope"])
    assert "3 problem(s)" in str(err.value)


def test_bad_study_file_creates_no_mlflow_runs(tmp_path, capsys):
    study = tmp_path / "bad.py"
    study.write_text(
        textwrap.dedent("""
        from ablate.study import Study, arm
        STUDY = Study(name="bad", base_models=["rl_ready"], arms=[arm("a", "grpo")], seeds=[])
    """)
    )
    results = tmp_path / "results"
    assert main(["run", str(study), "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert "seeds is empty" in err and "Traceback" not in err
    assert not results.exists()


def test_load_study_requires_a_STUDY(tmp_path):
    f = tmp_path / "empty.py"
    f.write_text("x = 1\n")
    with pytest.raises(StudyError, match="must define STUDY"):
        load_study(f)
    with pytest.raises(StudyError, match="no study file"):
        load_study(tmp_path / "missing.py")


def test_trials_share_budget_and_seeds_across_arms():
    s = make(arms=[arm("grpo", "grpo"), arm("dapo", "dapo")])
    by_seed = {}
    for t in s.trials():
        by_seed.setdefault(t.spec.seed, []).append(t.spec)
    for specs in by_seed.values():
        assert len({(sp.budget, sp.optim, sp.eval, sp.model, sp.template) for sp in specs}) == 1
    assert dataclasses.replace(s.trials()[0].spec, seed=5).id != s.trials()[0].id


def test_trial_id_ignores_defaults_so_new_factors_keep_old_ids():
    from ablate.trial import TrialSpec

    a = TrialSpec(algorithm=ablate.baseline("grpo"), model="rl_ready")
    explicit = TrialSpec(algorithm=ablate.baseline("grpo"), model="rl_ready", engine="hf")
    assert a.id == explicit.id  # a field left at its default does not enter the hash
    assert dataclasses.replace(a, template="plain_q").id != a.id
    changed = dataclasses.replace(a, algorithm=dataclasses.replace(a.algorithm, clip_high=0.28))
    assert changed.id != a.id
