"""CLI command groups, one module each. Each module defines `register(app: typer.Typer)` and
imports heavy libraries (torch, transformers, mlflow) only inside its command functions."""

#: Modules under ablate.commands that cli.py registers, in help order.
COMMAND_MODULES = (
    "core",
    "train",
    "run",
    "status",
    "repair",
    "serve",
    "worker",
    "tune",
    "zoo",
    "passk",
    "report",
    "plan",
    "peers",
    "aliases",
)
