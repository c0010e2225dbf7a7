"""`ablate aliases`: what each framework's "grpo" is as an ablate factor vector."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("aliases")(aliases)


def aliases(
    format_: str = typer.Option("table", "--format", help="table or markdown"),
) -> None:
    """Each framework's "grpo" (TRL, verl, NeMo-RL, AReaL, prime-rl, SkyRL, slime, the Tinker
    cookbook, nanochat) as ablate's factor vector, read from its source at a named commit.
    `arm(name, "grpo@nemo_rl")` and `ablate export grpo@nemo_rl --to verl` load the vector; `?`
    marks a field not checked in the source (ablate's default)."""
    from ablate.base.errors import ConfigError
    from ablate.commands.peers import markdown_table
    from ablate.peers.aliases import rows

    header = ("spelling", "factor vector", "approximate / notes", "source")
    if format_ == "markdown":
        typer.echo(markdown_table(header, rows()))
    elif format_ == "table":
        from rich.console import Console
        from rich.table import Table

        table = Table(title='what "grpo" means where', show_lines=True)
        for col in header:
            table.add_column(col, overflow="fold")
        for row in rows():
            table.add_row(*row)
        Console().print(table)
    else:
        raise ConfigError(f"--format={format_!r} must be one of table, markdown")
