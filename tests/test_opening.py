"""`ablate run` and `ablate demo` open with what the study will run and about how long it takes
(the trials and cells, one trial's budget, the Pass@G phase, the time from `ablate plan`'s cost
model), before anything runs."""

from __future__ import annotations

from ablate.commands.cli import main
from ablate.commands.opening import opening_lines
from ablate.study import Budget, Cells, EvalSpec, PassKSpec, Study, arm

BUDGET = Budget(max_steps=10, prompts_per_step=4, group_size=4, max_new_tokens=40)


def small(**changes) -> Study:
    fields = dict(
        name="small",
        base_models=["rl_ready"],
        arms=[arm("grpo", "grpo"), arm("nostd", "grpo", scale="none")],
        seeds=[0, 1, 2],
        budget=BUDGET,
        eval=EvalSpec(max_problems=16, n_samples=2, every=5, ks=(1, 2)),
        passk=PassKSpec(n=4, ks=(1, 4), max_problems=8),
        extra=[Cells(arms=["grpo"], base_models=["mid"], seeds=[0])],
    )
    return Study(**(fields | changes))


def test_the_opening_counts_trials_cells_and_states_the_budget():
    lines = opening_lines(small(), workers=2)
    assert lines[0] == (
        "small: 7 trials in 3 cells (2 arms × 1 base model × 1 template at 3 seeds, + 1 extra cell)"
    )
    assert lines[1] == (
        "each trial: up to 10 steps of 4 prompts × 4 samples × up to 40 new tokens, lr 3e-05; "
        "evals of 16 problems × 2 samples"
    )
    assert lines[2] == (
        "first the Pass@G phase: 2 base models × 1 template, 8 problems × 4 samples each"
    )


def test_the_estimate_is_the_cost_models_by_hand():
    # a step: 0.58 s × (4 × 4 × 40) / (8 × 8 × 80) = 0.0725 s; 10 steps = 0.725 s; evals at
    # start, step 5 and the end: 3 × 16 × 2 samples × 2.4 ms × 40/80 = 0.1152 s; a trial 0.8402 s,
    # 7 trials 5.8814 s of CPU: 3 s on two workers (rounded), 6 s of CPU
    line = opening_lines(small(), workers=2)[3]
    assert line.startswith("estimated: about 3s of trials with 2 workers (6s of CPU at 0.58 s")
    one = opening_lines(small(), workers=1)[3]
    assert one.startswith("estimated: about 6s of trials with 1 worker (6s of CPU")


def test_no_passk_phase_no_line_and_a_longer_study_in_minutes():
    lines = opening_lines(small(passk=None, budget=Budget(max_steps=2000)), workers=1)
    assert not any(line.startswith("first the Pass@G phase") for line in lines)
    # default sizes: 2000 steps × 0.58 s = 1160 s a trial before its evals; 7 trials > 2 h
    assert lines[-1].startswith("estimated: about 2h")


def test_ablate_run_prints_the_opening_before_any_phase(tmp_path, capsys):
    study = tmp_path / "tiny.py"
    study.write_text(
        "from ablate.study import Budget, EvalSpec, Study, arm\n"
        "STUDY = Study(name='tiny', base_models=['rl_ready'], arms=[arm('grpo', 'grpo')],\n"
        "    seeds=[0], passk=None, budget=Budget(max_steps=2, prompts_per_step=2, group_size=2,\n"
        "    max_new_tokens=8), eval=EvalSpec(max_problems=4, n_samples=1, ks=(1,)))\n"
    )
    args = ["run", str(study), "--results", str(tmp_path / "r"), "--out", str(tmp_path / "out")]
    assert main(args) == 0
    out = capsys.readouterr().out
    first = out.index("tiny: 1 trial in 1 cell (1 arm × 1 base model × 1 template at 1 seed)")
    assert first < out.index("estimated: about") < out.index("study: 0 of 1 trials done")
