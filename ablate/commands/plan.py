"""`ablate plan STUDY [--pilot RESULTS] --effect 0.03 --cpu-hours 1`: the seeds × eval problems ×
samples per problem that detect the effect within the budget, from a pilot or from defaults."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)


def plan(
    study: Path = typer.Argument(..., help="the full study file (studies/x.py)"),
    pilot: Path = typer.Option(
        None, help="results folder of a pilot run (holds mlflow.db); without it, defaults"
    ),
    pilot_study: str = typer.Option("", help="the pilot's study name (default: STUDY's name)"),
    effect: float = typer.Option(0.0, help="Δ pass@1 to detect (default: effect_of_interest)"),
    cpu_hours: float = typer.Option(1.0, help="the budget: hours of the whole study's trials"),
    workers: int = typer.Option(1, help="trials run in parallel (one core each)"),
    tracking_uri: str = typer.Option(
        "", help="the pilot's results store, if not PILOT/mlflow.db (an MLflow URI or jsonl:///…)"
    ),
    simulate: int = typer.Option(
        2000, min=0, help="simulated studies checking the recommended design's power (0: off)"
    ),
) -> None:
    """Recommend the cheapest design whose minimum detectable effect (80% power, Bonferroni
    over the primary family, seed SD at its 80% upper bound) reaches the effect within the
    budget; print the best few designs, the variance components they rest on, and the power at
    the recommendation of every contrast and declared control, by formula and by simulation."""
    from rich.console import Console

    from ablate.base.errors import ConfigError
    from ablate.report.stats.plan import (
        control_lines,
        load_pilot,
        make_plan,
        recommendation,
        tuning_line,
    )
    from ablate.study.study import load_study

    full = load_study(study)
    loaded = None
    if pilot is not None:
        loaded = load_pilot(pilot, pilot_study or full.name, tracking_uri or None)
    target = effect or full.effect_of_interest or 0.0
    if not 0 < target <= 1:
        raise ConfigError(
            f"the effect to detect must be a Δ pass@1 in (0, 1]: pass --effect (got {target:g}) "
            "or set Study(effect_of_interest=...)"
        )
    if not cpu_hours > 0:
        raise ConfigError(f"--cpu-hours={cpu_hours:g} must be > 0")
    result = make_plan(full, target, cpu_hours, loaded, workers, studies=simulate)
    console = Console()
    console.print(_components_table(result))
    console.print(_designs_table(result, full.name))
    for label in result.untested:
        console.print(f"no pilot data (2+ seeds in both arms) for {label}: planned from the others")
    if full.tune is not None:
        console.print(tuning_line(full, result.cost))
    console.print(recommendation(result))
    if result.checks:
        console.print(_power_table(result.checks, result.best, "the recommended", simulate))
    if result.own_checks:
        console.print(_power_table(result.own_checks, result.own, "the study's own", simulate))
    for line in control_lines(result):
        console.print(line)


def _components_table(result):
    import math

    from rich.table import Table

    from ablate.report.stats.design import at_upper_bound

    def sd(x: float) -> str:
        return f"{math.sqrt(x):.4f}" if math.isfinite(x) else "–"

    table = Table(title=f"variance components of Δ pass@1 (SDs), from {result.source}")
    for col in ("contrast", "seed", "seed, 80% up", "arm × problem", "seed × problem"):
        table.add_column(col)
    table.add_column("per sample, Δ (shared draws)")
    table.add_column("per sample, arms apart")
    for label, c in result.components.items():
        upper = at_upper_bound(c)
        table.add_row(
            label,
            sd(c.seed_var),
            sd(upper.seed_var),
            sd(c.problem_var),
            sd(c.sp_var),
            sd(c.sample_var),
            sd(c.independent_var),
        )
    return table


def _power_table(checks, d, which: str, simulate: int):
    from rich.table import Table

    title = (
        f"power at {which} design, {d.seeds} seeds × {d.problems} problems × {d.samples} "
        f"samples: by formula and by {simulate} simulated studies, seed SD at its 80% upper bound "
        "(and at the point estimate)"
    )
    table = Table(title=title)
    for col in ("", "kind", "Δ", "alpha", "power", "simulated", "at point estimate", "note"):
        table.add_column(col, justify="left" if col in ("", "kind", "note") else "right")
    for c in checks:
        simulated = f"{c.simulated:.3f}" if c.simulated == c.simulated else "–"
        table.add_row(
            c.label,
            c.kind,
            f"{c.effect:+.3g}",
            f"{c.alpha:.3g}",
            f"{c.power:.3f}",
            simulated,
            f"{c.point:.3f}",
            c.note,
        )
    return table


def _designs_table(result, name: str):
    from rich.table import Table

    c = result.cost
    title = (
        f"{name}: designs for |Δ| = {result.effect:g} within {result.budget_hours:g} h "
        f"(trial = {c.train_seconds:.0f} s training + {c.evals:g} evals × J × K × "
        f"{1000 * c.eval_sample_seconds:.2f} ms)"
    )
    table = Table(title=title)
    for col in ("seeds n", "problems J", "samples K", "hours", "MDE"):
        table.add_column(col, justify="right")
    for d in result.table:
        table.add_row(
            str(d.seeds), str(d.problems), str(d.samples), f"{d.hours:.2f}", f"{d.mde:.4f}"
        )
    return table
