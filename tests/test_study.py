"""Studies: grid builders, expansion with stable ids, and validation that lists every problem."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import textwrap
import warnings

import pytest

import ablate
from ablate.base.errors import StudyError, StudyWarning
from ablate.commands.cli import main
from ablate.study import (
    Budget,
    Cells,
    EvalSpec,
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
    ({"arms": [arm("x", "grpo", clip_low=1.5)]}, "clip_low=1.5 must be a number in [0, 1)"),
    ({"arms": [arm("x", "no_preset")]}, "unknown preset 'no_preset'"),
    ({"arms": []}, "arms is empty"),
    ({"task": "chess"}, "unknown task 'chess'"),
    ({"task_options": {"layout": "sideways"}}, "layout"),
    ({"reference": "ppo"}, "reference arm 'ppo' is not one of the arms"),
    ({"seeds": [0, 0]}, "duplicate seeds"),
    ({"passk": PassKSpec(n=4, ks=(1, 8))}, "ks=(1, 8) must lie in 1..n=4"),
    ({"extra": [Cells(arms=["nope"])]}, "extra[0] names unknown arm 'nope'"),
    ({"search": {"lr2": SearchSpace(low=1e-5, high=1e-4, target="optim")}}, "'lr2' is not a field"),
    ({"name": "has space"}, "name='has space' must be letters, digits"),
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


MISSPELT = [
    (
        'arms=[arm("a", "grpo"), arm("b", "grpo", scael="none")]',
        3,
        "'scael' is not a factor (did you mean scale?)",
    ),
    (
        'arms=one_at_a_time("grpo", clip_hihg=[0.28])',
        3,
        "'clip_hihg' is not a factor (did you mean clip_high?)",
    ),
    (
        'arms=[arm("a", "grpo")], base_modles=["rl_ready"]',
        2,
        "argument 'base_modles' (did you mean base_models?)",
    ),
    (
        'arms=[arm("a", "grpo")],\n    budget=Budget(group_szie=4)',
        4,
        "'group_szie' (did you mean group_size?)",
    ),
    ('arms=[arm("a", "grpo", zzz=1)]', 3, "'zzz' is not a factor; `ablate show grpo` lists"),
]


@pytest.mark.parametrize(("text", "line", "message"), MISSPELT, ids=[m for *_, m in MISSPELT])
def test_a_misspelt_name_in_a_study_file_is_one_line_with_its_line_and_the_closest_name(
    tmp_path, capsys, text, line, message
):
    study = tmp_path / "typo.py"
    study.write_text(
        "from ablate.study import Budget, Study, arm, one_at_a_time\n"
        "STUDY = Study(name='typo', base_models=['rl_ready'], seeds=[0],\n"
        f"    {text})\n"
    )
    results = tmp_path / "results"
    assert main(["run", str(study), "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {study}:{line}:") and message in err
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert not results.exists()  # refused before the results folder was made


def test_arm_refuses_a_field_that_is_no_factor_when_written():
    with pytest.raises(StudyError, match=r"arm 'x': 'not_a_field' is not a factor"):
        arm("x", "grpo", not_a_field=1)
    with pytest.raises(StudyError, match=r"full_factorial\('grpo'\): 'sacle' .*did you mean scale"):
        full_factorial("grpo", sacle=["none"])


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
    from ablate.factors.spec import TrialSpec

    a = TrialSpec(algorithm=ablate.baseline("grpo"), model="rl_ready")
    explicit = TrialSpec(algorithm=ablate.baseline("grpo"), model="rl_ready", engine="hf")
    assert a.id == explicit.id  # a field left at its default does not enter the hash
    assert dataclasses.replace(a, template="plain_q").id != a.id
    changed = dataclasses.replace(a, algorithm=dataclasses.replace(a.algorithm, clip_high=0.28))
    assert changed.id != a.id


# --- replicates, confound warnings, named paths ------------------------------------------------
def test_a_replicate_copies_its_original_with_rollouts_of_its_own():
    s = make(
        arms=[arm("grpo", "grpo", minibatches=4), arm("again", replicate_of="grpo")],
        seeds=[0, 1, 2],
    )
    assert s.arm("again").algorithm == s.arm("grpo").algorithm
    trials = {(t.arm, t.spec.seed): t for t in s.trials()}
    assert trials[("again", 0)].spec.replicate == "again"
    assert trials[("grpo", 0)].spec.replicate == ""
    assert trials[("again", 0)].id != trials[("grpo", 0)].id
    # common random numbers (data order, eval samples) shared; rollouts drawn apart
    assert trials[("again", 0)].spec.rng_seed == trials[("grpo", 0)].spec.rng_seed
    assert trials[("again", 0)].spec.rollout_seed != trials[("grpo", 0)].spec.rollout_seed
    assert [a.name for a in s.compared_arms] == ["grpo"]


@pytest.mark.parametrize(
    ("arms", "message"),
    [
        ([arm("grpo", "grpo"), arm("again", replicate_of="nope")], "replicate_of='nope'"),
        ([arm("grpo", "grpo"), arm("again", "dapo", replicate_of="grpo")], "differs in"),
        ([arm("again", replicate_of="again")], "replicate_of='again'"),
    ],
)
def test_bad_replicates_are_refused_before_compute(arms, message):
    with pytest.raises(StudyError, match=re.escape(message)):
        make(arms=arms)


def test_the_reference_cannot_be_a_replicate_and_effect_must_be_a_delta():
    with pytest.raises(StudyError, match="must not be a replicate"):
        make(arms=[arm("grpo", "grpo"), arm("b", replicate_of="grpo")], reference="b")
    with pytest.raises(StudyError, match="effect_of_interest=2"):
        make(effect_of_interest=2)


def test_undeclared_schedule_and_kl_differences_warn_with_the_fix():
    with pytest.warns(StudyWarning) as caught:
        make(arms=[arm("grpo", "grpo"), arm("dapo", "dapo")])
    messages = [str(w.message) for w in caught]
    schedule = next(msg for msg in messages if "update schedule" in msg)
    assert "16 updates" in schedule and "minibatches=1 on 'dapo'" in schedule
    assert "arm('dapo', ..., minibatches=16)" in schedule
    assert any("KL term" in msg and "kl_coef=0.0" in msg for msg in messages)


def test_declared_differences_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", StudyWarning)
        make(
            arms=[
                arm("grpo", "grpo", minibatches=4, kl_coef=0.0),
                arm("dapo", "dapo", minibatches=16, kl_coef=0.0),
                arm("dr", "dr_grpo", minibatches=4),
            ]
        )


def test_cli_prints_a_study_warning_as_one_line(tmp_path, capsys):
    study = tmp_path / "s.py"
    study.write_text(
        "from ablate.study import Study, arm\n"
        "STUDY = Study(name='s', base_models=['rl_ready'], arms=[arm('grpo','grpo'), "
        "arm('dapo','dapo')], seeds=[0])\n"
    )
    assert main(["plan", str(study), "--pilot", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    warning_lines = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warning_lines) == 2 and "Traceback" not in err
    assert "error: no pilot results" in err


def test_path_between_named_algorithms_and_one_at_a_time_base_name():
    base = dataclasses.replace(ablate.baseline("grpo"), minibatches=4, kl_coef=0.0)
    end = dataclasses.replace(ablate.baseline("dapo"), minibatches=4)
    arms = path(base, end, start_name="grpo4", end_name="dapo4")
    assert arms[0].name == "grpo4" and arms[-1].name == "dapo4"
    assert arms[-1].algorithm == end and arms[1].name == "grpo4+clip_high"
    assert {a.algorithm.minibatches for a in arms} == {4}
    with pytest.raises(StudyError, match="start_name"):
        path(base, "dapo")
    assert one_at_a_time(base, base_name="grpo4", scale=["none"])[1].name == "grpo4[scale='none']"
    for build in (one_at_a_time, full_factorial):
        with pytest.raises(StudyError, match="an Algorithm base needs base_name="):
            build(base, scale=["none"])


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"engine": "tpu"}, "engine='tpu' must be 'hf' or 'vllm'"),
        ({"checkpoint_every": -1}, "checkpoint_every=-1 must be an integer >= 0"),
        ({"budget": Budget(max_steps=0)}, "max_steps"),
    ],
)
def test_study_and_trial_refuse_bad_settings_by_the_same_rule(changes, problem):
    from ablate.base.errors import ConfigError
    from ablate.factors.spec import TrialSpec

    with pytest.raises(StudyError, match=re.escape(problem)):
        Study(**{**OK, **changes})
    with pytest.raises(ConfigError, match=re.escape(problem)):
        TrialSpec(algorithm=ablate.baseline("grpo"), model="rl_ready", **changes)


def test_few_eval_problems_and_a_short_aa_check_warn_but_the_whole_split_does_not():
    with pytest.warns(StudyWarning, match="each eval reads 64 problems of arithmetic"):
        make(eval=EvalSpec(max_problems=64))
    with pytest.warns(StudyWarning, match="A/A replicate 'again' runs 2 seeds"):
        make(arms=[arm("grpo", "grpo"), arm("again", replicate_of="grpo")])
    with warnings.catch_warnings():
        warnings.simplefilter("error", StudyWarning)
        make(eval=EvalSpec(max_problems=None))  # the whole split: 256 problems
        make(eval=EvalSpec(max_problems=10_000))  # capped at the split's 256


def test_design_fields_are_checked_before_compute():
    with pytest.raises(StudyError) as err:
        make(looks=(2, 9), primary="tokens", equivalence_margin=2, positive_control="nope")
    text = str(err.value)
    assert "looks=(2, 9)" in text and "primary='tokens'" in text
    assert "equivalence_margin=2" in text and "positive_control='nope'" in text


def test_runs_carry_their_cell_and_the_parent_the_arms_in_declared_order():
    import json

    from ablate.base.store import tags as tag
    from ablate.study.trial_run import study_tags, trial_tags

    study = make(arms=[arm("grpo", "grpo"), arm("nostd", "grpo", scale="none")], seeds=[3])
    trial = next(t for t in study.trials() if t.arm == "nostd")
    assert trial_tags(study, trial)[tag.CELL] == "nostd | rl_ready | plain"
    assert json.loads(study_tags(study)[tag.ARMS]) == ["grpo", "nostd"]
    assert study_tags(study)[tag.REFERENCE_ARM] == "grpo"
