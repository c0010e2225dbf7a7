"""Floor 0, the bottom: the records an RL step hands on (`records`), typed errors, the one
registry, seeding, file locks and durable writes, devices and threads, the pass@k estimators,
the results-store port (`base.store`), and the presets' folder for a checkout run uninstalled
(`checkout`). Nothing here imports anything of ablate above it."""
