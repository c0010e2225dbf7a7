"""`ablate plan STUDY --pilot RESULTS`: seeds the full study needs, from a small pilot."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)


def plan(
    study: Path = typer.Argument(..., help="the full study file (studies/x.py)"),
    pilot: Path = typer.Option(..., help="results folder of the pilot run (holds mlflow.db)"),
    pilot_study: str = typer.Option("", help="the pilot's study name (default: STUDY's name)"),
    effect: float = typer.Option(0.0, help="Δ pass@1 to detect (default: effect_of_interest)"),
    tracking_uri: str = typer.Option(
        "", help="the pilot's results store, if not PILOT/mlflow.db (an MLflow URI or jsonl:///…)"
    ),
) -> None:
    """Per contrast of STUDY: the pilot's paired SD and the seeds needed for 80% power at the
    study's Holm family size; then one recommended seed count."""
    import math

    from rich.console import Console
    from rich.table import Table

    from ablate.errors import ConfigError
    from ablate.report.stats.plan import pilot_values, plan_rows, recommendation
    from ablate.study import load_study

    if effect < 0 or effect > 1:
        raise ConfigError(f"--effect={effect} must be a Δ pass@1 in (0, 1]")
    full = load_study(study)
    target = effect or full.effect_of_interest
    values = pilot_values(pilot, pilot_study or full.name, tracking_uri or None)
    rows = plan_rows(full, values, target)

    def num(x: float) -> str:
        return f"{x:.4f}" if math.isfinite(x) else "–"

    def count(n: int | None, wanted: bool) -> str:
        return "" if not wanted else ("> 1000" if n is None else str(n))

    table = Table(title=f"{full.name}: seeds for 80% power (pilot {pilot})")
    for col in ("arm vs " + full.reference_arm, "cell", "pilot seeds", "Δ", "SD", "SD 80% up"):
        table.add_column(col)
    for col in (f"seeds for {target:g}" if target else "seeds for effect", "(SD up)", "for Δ"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r.arm,
            r.cell,
            str(r.pilot_seeds),
            num(r.delta),
            num(r.sd),
            num(r.sd_upper),
            count(r.for_effect, bool(target) and r.pilot_seeds >= 2),
            count(r.for_effect_upper, bool(target) and r.pilot_seeds >= 2),
            count(r.for_delta, r.pilot_seeds >= 2 and math.isfinite(r.delta) and r.delta != 0),
        )
    console = Console()
    console.print(table)
    console.print(recommendation(rows, target))
