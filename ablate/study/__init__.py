"""Floor 6: studies and how they run. A study file imports everything it needs from here
(`from ablate.study import Budget, Study, arm, ...`; defined in `study.study`, `arms` and
`ablate.factors.spec`). Beside the definition: its `checks` (and `design_checks`), `preflight`
and `resources`, the `runner`, one trial under its lease (`trial_run`), the process `pool`,
trial `lease`s, `distributed` workers, `tune`, and the phases a study runs before RL
(`passk_phase`, `elicit_phase`)."""

from ablate.study.study import (
    Arm,
    Budget,
    Cells,
    Control,
    CurveSpec,
    ElicitSpec,
    EvalSpec,
    Launch,
    Optim,
    PassKSpec,
    SearchSpace,
    SlurmOptions,
    Study,
    Trial,
    arm,
    full_factorial,
    load_study,
    one_at_a_time,
    path,
)

__all__ = [
    "Arm",
    "Budget",
    "Cells",
    "Control",
    "CurveSpec",
    "ElicitSpec",
    "EvalSpec",
    "Launch",
    "Optim",
    "PassKSpec",
    "SearchSpace",
    "SlurmOptions",
    "Study",
    "Trial",
    "arm",
    "full_factorial",
    "load_study",
    "one_at_a_time",
    "path",
]
