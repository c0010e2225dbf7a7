"""Floor 7, below the studies: where a study's trials run, by launcher name
(`ablate.launch.registry`), and what a study file says about it: the `Launch` record
(`options`), each shipped launcher's options (`SlurmOptions`) and their command-line values
(`option_values`). Launchers: `local` (this machine, in one or N processes:
`ablate.launch.local`, the runner's own path) or `slurm` (one Slurm job array through submitit,
one array task per trial: `ablate.study.slurm`, the only module that imports submitit), or one
of your own, registered the same way. Either way a trial is trained by
`ablate.study.runner.run_trial` under its lease, resuming from its checkpoint.

Why the Slurm launcher lives in `ablate/study/`: it trains trials through the runner, and a study
holds its `Launch` record; with the records here and the launcher beside the runner, every arrow
points down (study -> launch). The registry names each shipped launcher's module instead of
importing it (`BUILT_IN`): the one lookup by name, as a launcher of your own is found."""
