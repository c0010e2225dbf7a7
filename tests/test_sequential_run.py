"""`ablate run --until-decided`: the look loop's selection, its stopping, its user errors; and the
sequential design's calibration (fast, small simulations)."""

from __future__ import annotations

import pytest

from ablate.commands import sequential as seqrun
from ablate.commands.cli import main
from ablate.report.stats import sequential as sq
from ablate.study import Study, arm
from devtools.calibration import sequential as calib

SEEDS = tuple(range(16))


def _study(**kw) -> Study:
    arms = [
        arm("ref", "grpo"),
        arm("b", "grpo", clip_high=0.28),
        arm("c", "grpo", clip_high=0.3),
        arm("ref_again", replicate_of="ref"),
    ]
    return Study(name="seq", base_models=["rl_ready"], arms=arms, seeds=SEEDS, **kw)


def test_until_decided_without_looks_is_one_clear_error(tmp_path, capsys):
    study = tmp_path / "study.py"
    study.write_text(
        "from ablate.study import Study, arm\n"
        "STUDY = Study(name='x', base_models=['rl_ready'], arms=[arm('a', 'grpo')], seeds=(0, 1))\n"
    )
    assert main(["run", str(study), "--results", str(tmp_path / "r"), "--until-decided"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: study 'x' has no `looks`") and "looks=(3, 5, 8, 12, 16)" in err
    assert not (tmp_path / "r").exists()  # raised before anything ran


def _selected(study, seeds, undecided):
    select = seqrun.look_selection(study, seeds, undecided)
    return {(t.arm, t.spec.seed) for t in study.trials() if select(t)}


def test_a_look_runs_the_reference_the_open_arms_and_the_controls():
    study = _study(looks=(3, 5, 8, 12, 16))
    keys = seqrun.primary_keys(study)
    assert keys == [("b", "rl_ready", "plain"), ("c", "rl_ready", "plain")]
    first = _selected(study, 3, set(keys))
    assert first == {(a, s) for a in ("ref", "b", "c") for s in range(3)} | {
        ("ref_again", s)
        for s in range(5)  # A/A: max(looks[0], 5) seeds
    }
    later = _selected(study, 8, {keys[1]})  # b decided
    assert {a for a, _ in later} == {"ref", "c", "ref_again"}
    assert {s for a, s in later if a == "c"} == set(range(8))
    assert _selected(study, 12, set()) == {("ref_again", s) for s in range(5)}


def test_selection_does_not_change_trial_ids():
    full = {(t.arm, t.spec.seed): t.id for t in _study().trials()}
    study = _study(looks=(3, 16))
    select = seqrun.look_selection(study, 3, set(seqrun.primary_keys(study)))
    assert all(full[(t.arm, t.spec.seed)] == t.id for t in study.trials() if select(t))


def _result(name, verdict, look):
    history = tuple(
        sq.Look(k + 1, 3, 3, 0.0, -1.0, 1.0, 0.5, 0.01, 0.01, sq.CONTINUE) for k in range(look - 1)
    )
    last = sq.Look(look, 3, 3, 0.1, 0.05, 0.15, 0.001, 0.01, 0.01, verdict)
    return sq.SequentialResult(name, (*history, last), 0.025, None)


def test_the_loop_stops_when_every_contrast_is_decided(monkeypatch, capsys):
    from ablate.report.data import load
    from ablate.report.stats import sequential_data

    study = _study(looks=(3, 5, 8, 12, 16))
    b, c = seqrun.primary_keys(study)
    verdicts = iter(
        [
            {b: _result("b − ref", sq.DIFFERENT, 1), c: _result("c − ref", sq.CONTINUE, 1)},
            {b: _result("b − ref", sq.DIFFERENT, 1), c: _result("c − ref", sq.EQUIVALENT, 2)},
        ]
    )
    monkeypatch.setattr(load, "load_study_data", lambda *a, **k: None)
    monkeypatch.setattr(sequential_data, "replay_study", lambda data: next(verdicts))
    looks = []

    def run_look(select):
        looks.append({(t.arm, t.spec.seed) for t in study.trials() if select(t)})
        return []

    seqrun.run_until_decided(study, run_look, results="r", tracking_uri=None)
    assert len(looks) == 2 and ("b", 4) not in looks[1] and ("c", 4) in looks[1]
    out = capsys.readouterr().out
    assert "c − ref: look 2 (3 seeds): equivalent" in out
    assert "every contrast has its verdict after look 2 (5 seeds)" in out


# --- calibration: simulated studies through the same replay -----------------------------------

STUDIES = 1500


@pytest.mark.parametrize("kind", sq.SPENDING)
def test_family_error_under_the_null_with_interaction(kind):
    out = calib.run_design(calib.SequentialModel(), calib.LOOKS, kind, 0.05, STUDIES, seed=1)
    assert out.family_error <= 0.05 + 2 * (0.05 * 0.95 / STUDIES) ** 0.5  # MC margin


def test_naive_repeated_testing_inflates_the_family_error():
    """The check can fail: 0.05 (Bonferroni'd) at every look is optional stopping."""
    levels = calib.naive_levels(calib.LOOKS, 3)
    out = calib.run_design(calib.SequentialModel(), calib.LOOKS, "pocock", 0.05, STUDIES, 1, levels)
    assert out.family_error > 0.09


@pytest.mark.parametrize("kind", sq.SPENDING)
def test_equivalence_at_the_margin_is_rare(kind):
    model = calib.SequentialModel(effects=(0.05,) * 3)
    out = calib.run_design(model, calib.LOOKS, kind, 0.05, STUDIES, seed=2)
    assert out.equivalent <= 0.05 + 2 * (0.05 * 0.95 / (3 * STUDIES)) ** 0.5
    naive = calib.run_design(
        model, calib.LOOKS, kind, 0.05, STUDIES, 2, calib.naive_levels(calib.LOOKS, 3)
    )
    assert naive.equivalent > 0.06  # repeated TOST at 0.05 is not a valid sequential claim


def test_a_real_effect_is_found_with_fewer_seeds():
    model = calib.SequentialModel(effects=(0.07,) * 3)
    seq = calib.run_design(model, calib.LOOKS, "obrien_fleming", 0.05, STUDIES, seed=3)
    fixed = calib.run_design(model, (16,), "obrien_fleming", 0.05, STUDIES, seed=3)
    assert seq.different >= fixed.different - 0.05 and seq.mean_seeds < 14
