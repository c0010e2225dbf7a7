"""A PPO arm appears in the report like any other arm, with its critic's cost visible."""

from __future__ import annotations

from ablate import tracking
from ablate.report.render.build import build_report
from ablate.study import Budget, EvalSpec, Study, arm


def test_ppo_arm_and_critic_cost_in_the_report(tmp_path):
    study = Study(
        name="with_ppo",
        base_models=["hopeless"],
        arms=[arm("grpo", "grpo"), arm("ppo", "ppo")],
        seeds=[0],
        budget=Budget(max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=16),
        eval=EvalSpec(every=1, n_samples=2, ks=(1,), max_problems=2),
        passk=None,
    )
    uri = tracking.default_uri(tmp_path / "results")
    store = tracking.open_store(uri)
    store.init()
    parent = store.open_study(study.name)
    for trial in study.trials():
        tags = {
            "ablate.arm": trial.arm,
            "ablate.seed": "0",
            "ablate.model": "hopeless",
            "ablate.template": "plain",
        }
        tracker = parent.trial_tracker(trial.id, run_name=trial.arm, tags=tags)
        for step in range(3):
            metrics = {"perf/step_seconds": 1.0, "eval/pass_at_1": 0.1 * step}
            if trial.arm == "ppo":
                metrics.update({"perf/critic_seconds": 0.25, "budget/critic_params": 129.0})
            tracker.log_metrics(metrics, step)
        tracker.set_tags({"ablate.outcome": "finished"})
        tracker.close("FINISHED")
    parent.close("FINISHED")
    folder = build_report(study, tmp_path / "results", tmp_path / "reports")
    dynamics = (folder / "tables" / "dynamics.md").read_text()
    header = next(line for line in dynamics.splitlines() if line.startswith("| arm"))
    assert "critic s/step" in header and "critic params" in header
    ppo_row = next(line for line in dynamics.splitlines() if line.startswith("| ppo"))
    assert "0.250" in ppo_row and "129" in ppo_row
    main = (folder / "tables" / "main.md").read_text()
    assert any(line.startswith("| ppo") for line in main.splitlines())
