"""Floor 5: the stages of one RL step, each one call that returns a record: the sampling loop
(`batch`), the forward passes, `shaping`, the advantage `estimators`, the `update`, compute
accounting, `diagnostics`, and the `checkpoint` a trial resumes from. `ablate.trial.step`
composes them top to bottom."""
