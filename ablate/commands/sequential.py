"""`ablate run STUDY --until-decided`: a group-sequential design's look loop.

At look k the trials of the first looks[k] seeds run for the reference arm and for every arm whose
contrast is still undecided; A/A replicates and the positive control (checks of the design, not
in the primary family) run CONTROL_SEEDS seeds at the first look. After each look the results are
read back and the whole design is replayed from them (`report.stats.sequential_data`), so the
runner keeps no state of its own: the report shows the very decisions taken here. A contrast
whose remaining seeds would lower its standard error by less than 5% (its arm × problem term
dominates: `report.stats.information`) gets its final analysis at that look and no more seeds;
its line says so and recommends more eval problems or samples instead. This lives with the
commands because the runner (floor 8) must not import the report (floor 9).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ablate.base.errors import ConfigError
from ablate.commands.progress import say

if TYPE_CHECKING:
    from ablate.study.study import Study, Trial

#: Seeds of the A/A replicate arms and of the positive control (at least looks[0]).
CONTROL_SEEDS = 5
Key = tuple[str, str, str]  # (arm, model, template) of a primary contrast


def check_design(study: Study) -> None:
    """A sequential run needs the study's looks (checked before any compute)."""
    if not study.looks:
        raise ConfigError(
            f"study {study.name!r} has no `looks`: --until-decided runs a sequential design; "
            "declare its seed counts in the Study, e.g. looks=(3, 5, 8, 12, 16), with at least "
            "looks[-1] seeds"
        )


def primary_keys(study: Study) -> list[Key]:
    """Compared arms × the (model, template) cells where the reference has trials."""
    trials = study.trials()
    ref = study.reference_arm
    cells = dict.fromkeys((t.spec.model, t.spec.template) for t in trials if t.arm == ref)
    have = {(t.arm, t.spec.model, t.spec.template) for t in trials}
    arms = [a.name for a in study.compared_arms if a.name != ref]
    return [(a, m, t) for (m, t) in cells for a in arms if (a, m, t) in have]


def control_seeds(study: Study) -> int:
    return min(max(study.looks[0], CONTROL_SEEDS), len(study.seeds))


def look_selection(study: Study, seeds: int, undecided: set[Key]) -> Callable[[Trial], bool]:
    """The trials of one look: the first `seeds` seeds of the reference (in cells with an open
    contrast) and of each undecided arm; controls at `control_seeds`. A seed outside the
    study's `seeds` (an extra grid's own) is outside the design and runs at every look."""
    rank = {s: i for i, s in enumerate(study.seeds)}
    controls = {a.name for a in study.arms if a.replicate_of} | {study.positive_control}
    keys = set(primary_keys(study))
    open_cells = {(m, t) for _, m, t in undecided}

    def select(trial: Trial) -> bool:
        r = rank.get(trial.spec.seed)
        key = (trial.arm, trial.spec.model, trial.spec.template)
        if r is None:
            return True
        if trial.arm in controls:
            return r < control_seeds(study)
        if trial.arm == study.reference_arm:
            return r < seeds and key[1:] in open_cells
        return r < seeds and (key in undecided or key not in keys)

    return select


def run_until_decided(
    study: Study,
    run_look: Callable[[Callable[[Trial], bool]], list],
    *,
    results: str,
    tracking_uri: str | None,
) -> list:
    """Look by look until every primary contrast is decided or the looks are spent; the
    outcomes of every trial run (or skipped as already finished) on the way. `run_look(select)`
    runs the selected trials (`ablate run`'s progress display around `runner.run_study`)."""
    from ablate.report.data.load import load_study_data
    from ablate.report.stats.sequential import look_line
    from ablate.report.stats.sequential_data import replay_study

    check_design(study)
    undecided = set(primary_keys(study))
    outcomes: dict[str, object] = {}
    for k, seeds in enumerate(study.looks):
        say(f"look {k + 1}/{len(study.looks)}: {seeds} seeds, {len(undecided)} contrast(s) open")
        done = run_look(look_selection(study, seeds, undecided))
        outcomes.update({o.trial_id: o for o in done})
        replayed = replay_study(load_study_data(study, results, tracking_uri))
        for result in replayed.values():
            say(look_line(result))
        undecided = {key for key, r in replayed.items() if not r.decided}
        if not undecided:
            say(f"every contrast has its verdict after look {k + 1} ({seeds} seeds)")
            break
    else:
        say(f"looks spent; {len(undecided)} contrast(s) still open (trials not settled)")
    return list(outcomes.values())
