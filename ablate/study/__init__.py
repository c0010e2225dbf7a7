"""Floor 8: studies and how they run. A study file imports everything it needs from here
(`from ablate.study import Budget, Study, arm, ...`; defined in `study.study`, `arms` and
`ablate.factors.spec`). Beside the definition: its `checks` (and `design_checks`), `preflight`
and `resources`, the `runner`, one trial under its lease (`trial_run`), the process `pool`,
trial `lease`s, `distributed` workers, the Slurm launcher (`slurm`, and what an array task
does: `slurm_array`; the launcher records and registry sit below, in `ablate.launch`), `tune`,
and the phases a study runs before RL (`passk_phase`, `elicit_phase`)."""

from ablate.study import study as _definition
from ablate.study.study import *  # noqa: F403  (the study-file API, listed once: study.__all__)

__all__ = list(_definition.__all__)
