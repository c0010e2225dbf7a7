"""A trial's identity (`ablate/study/identity.py`): the study's trials with their base models'
weights hashes, which enter their ids. The runner ids the trials it trains this way and the
report the trials it reads, so both find the same runs."""

from __future__ import annotations

import pytest

from ablate.report.data import load
from ablate.study import Budget, Study, arm
from ablate.study.identity import identified_trials, with_weights
from ablate.testing import zoo_model_built


def two_models() -> Study:
    return Study(
        name="ids",
        base_models=["hopeless", "rl_ready"],
        arms=[arm("grpo", "grpo"), arm("dr_grpo", "dr_grpo")],
        seeds=[0, 1],
        budget=Budget(max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=8),
        passk=None,
    )


def test_the_weights_hash_enters_each_trials_spec_and_id():
    study = two_models()
    plain = study.trials()
    hashed = with_weights(plain, {"hopeless": "aa", "rl_ready": "bb"})
    assert [t.spec.model_weights for t in hashed] == [
        {"hopeless": "aa", "rl_ready": "bb"}[t.spec.model] for t in plain
    ]
    assert [(t.arm, t.spec.seed) for t in hashed] == [(t.arm, t.spec.seed) for t in plain]
    assert all(a.id != b.id for a, b in zip(hashed, plain, strict=True))
    rebuilt = with_weights(plain, {"hopeless": "aa", "rl_ready": "cc"})  # one model rebuilt
    changed = {t.spec.model for t, u in zip(hashed, rebuilt, strict=True) if t.id != u.id}
    assert changed == {"rl_ready"}


def test_each_base_model_is_hashed_once():
    asked = []

    def fake_hash(model: str) -> str:
        asked.append(model)
        return f"sha-{model}"

    trials = identified_trials(two_models(), fake_hash)
    assert asked == ["hopeless", "rl_ready"] and len(trials) == 8
    assert {t.spec.model_weights for t in trials} == {"sha-hopeless", "sha-rl_ready"}


@pytest.mark.skipif(
    not (zoo_model_built("hopeless") and zoo_model_built("rl_ready")),
    reason="zoo models hopeless and rl_ready not built",
)
def test_the_report_plans_the_trials_the_runner_trains():
    from ablate.study import runner

    study = two_models()
    assert runner.identified_trials is identified_trials  # one definition, the runner's ids
    expected = [t.id for t in identified_trials(study)]
    planned = load.planned_trials(study)
    assert planned["trial_id"].tolist() == expected
    assert planned["model_weights"].str.len().eq(64).all()  # sha256 hex of the weights


def test_a_model_folder_gone_plans_the_trials_without_hashes(monkeypatch):
    from ablate.base.errors import ConfigError

    def gone(study, chosen=None):
        raise ConfigError("model folder gone")

    monkeypatch.setattr(load, "identified_trials", gone)
    planned = load.planned_trials(two_models())
    assert planned["trial_id"].tolist() == [t.id for t in two_models().trials()]
    assert (planned["model_weights"] == "").all()
