"""`ablate presets`, `ablate show`, `ablate demo`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("presets")(presets)
    app.command("show")(show)
    app.command("demo")(demo)


def presets() -> None:
    """List the published presets and the fields where each differs from GRPO."""
    from rich.console import Console
    from rich.table import Table

    from ablate.presets import baseline, baseline_names

    grpo = baseline("grpo")
    table = Table(title="presets (differences from grpo)")
    table.add_column("preset")
    table.add_column("differs from grpo in")
    for name in baseline_names():
        diff = grpo.diff(baseline(name))
        table.add_row(name, ", ".join(f"{k}={v[1]!r}" for k, v in diff.items()) or "—")
    Console().print(table)


def show(name: str = typer.Argument(..., help="preset name, e.g. dapo")) -> None:
    """Print every field of a preset with its one-line documentation."""
    from rich.console import Console
    from rich.table import Table

    from ablate.algorithms import field_docs
    from ablate.presets import baseline

    algo = baseline(name)
    docs = field_docs()
    table = Table(title=name)
    for col in ("field", "value", "meaning"):
        table.add_column(col)
    for key, value in algo.as_dict().items():
        table.add_row(key, repr(value), docs.get(key, ""))
    Console().print(table)


def demo() -> None:
    """Run the quickstart study on the CPU and write its report."""
    from rich.console import Console

    console = Console()
    console.print("[bold]ablate demo[/bold]: the quickstart study arrives with the studies issue.")
    console.print("Available now: `ablate presets`, `ablate show <preset>`.")
