"""Where a study's trials run, by launcher name (`ablate.launch.registry`): `local` (this machine,
in one or N processes: `ablate.launch.local`, the runner's own path) or `slurm` (one Slurm job
array through submitit, one array task per trial: `ablate.launch.slurm`, the only module that
imports submitit), or one of your own, registered the same way. Either way a trial is trained by
`ablate.study.runner.run_trial` under its lease, resuming from its checkpoint."""
