"""`ablate matrix` (which factor values TRL and verl can express) and `ablate export` (a preset as
a TRL GRPOConfig or verl overrides)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("matrix")(matrix)
    app.command("export")(export)


def matrix(
    format_: str = typer.Option("table", "--format", help="table, markdown or csv"),
) -> None:
    """Every Algorithm field and value: how TRL's GRPOConfig and verl's config express it
    (exact keys, approximate with the difference, or cannot with the reason)."""
    from ablate.base.errors import ConfigError
    from ablate.peers import export as peers

    rows = peers.matrix_rows()
    header = ("field", "value", f"TRL {peers.trl.VERSION}", f"verl {peers.verl.VERSION}")
    if format_ == "table":
        from rich.console import Console
        from rich.table import Table

        table = Table(title="supported factors: ablate → TRL, verl", show_lines=True)
        for col in header:
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*row)
        Console().print(table)
    elif format_ == "markdown":
        typer.echo(markdown_table(header, rows))
    elif format_ == "csv":
        import csv
        import sys

        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerows([header, *rows])
    else:
        raise ConfigError(f"--format={format_!r} must be one of table, markdown, csv")


def markdown_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", "<br>")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def export(
    preset: str = typer.Argument(..., help="preset name (ablate presets)"),
    to: str = typer.Option(..., "--to", help="trl or verl"),
    set_: list[str] = typer.Option([], "--set", help="override an Algorithm field: field=value"),
    prompts: int = typer.Option(None, min=1, help="prompts per step (default: ablate's budget)"),
    group: int = typer.Option(None, min=2, help="completions per prompt (default: ablate's)"),
    max_new_tokens: int = typer.Option(None, min=1, help="generation limit (default: ablate's)"),
) -> None:
    """Print the config that runs PRESET in TRL or verl; approximations are comments, and what
    the target cannot express is refused, field by field."""
    import dataclasses

    from ablate.base.errors import ConfigError
    from ablate.baselines import baseline
    from ablate.commands.train import _parse_overrides
    from ablate.peers import PeerBudget, export_config, render

    try:
        algo = dataclasses.replace(baseline(preset), **_parse_overrides(set_))
    except TypeError as exc:
        raise ConfigError(f"--set: {exc}") from None
    given = {"prompts": prompts, "group": group, "max_new_tokens": max_new_tokens}
    budget = PeerBudget(**{k: v for k, v in given.items() if v is not None})
    typer.echo(render(export_config(algo, to, name=preset, budget=budget)))
