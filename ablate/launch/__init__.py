"""Where a study's trials run: `local` (this machine, in one or N processes: `ablate.study.runner`)
or `slurm` (one Slurm job array through submitit, one array task per trial:
`ablate.launch.slurm`, the only module that imports submitit). Either way a trial is trained by
`ablate.study.runner.run_trial` under its lease, resuming from its checkpoint."""
