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

    from ablate.baselines import baseline, baseline_names

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

    from ablate.baselines import baseline
    from ablate.factors.algorithms import field_docs

    algo = baseline(name)
    docs = field_docs()
    table = Table(title=name)
    for col in ("field", "value", "meaning"):
        table.add_column(col)
    for key, value in algo.as_dict().items():
        table.add_row(key, repr(value), docs.get(key, ""))
    Console().print(table)


def demo(
    results: str = typer.Option("results", help="results folder (MLflow db, checkpoints)"),
    workers: int = typer.Option(2, min=1, help="local processes (one torch thread each)"),
    study: str = typer.Option("studies/quickstart.py", help="the study to run"),
) -> None:
    """Run the quickstart study on the CPU (zoo built if needed) and print its summary."""
    import time

    from rich.console import Console

    from ablate.base.threads import apply_threads
    from ablate.commands.run import echo_opening, print_summary, run_with_progress, write_report
    from ablate.study.preflight import check_results_dir, preflight_study
    from ablate.study.study import load_study

    console = Console()
    loaded = load_study(study)
    check_results_dir(results)  # before a zoo build that may take minutes
    _ensure_zoo(loaded.base_models, console)
    preflight_study(loaded, results)
    echo_opening(loaded, workers)
    apply_threads()
    start = time.perf_counter()
    outcomes = run_with_progress(loaded, results=results, workers=workers, tracking_uri=None)
    print_summary(loaded, outcomes, results)
    write_report(loaded, results, "reports", None)
    console.print(f"demo wall time: {time.perf_counter() - start:.0f} s")


def _ensure_zoo(models, console) -> None:
    """Build any zoo model the study needs that is neither shipped nor cached."""
    from ablate.base.errors import ConfigError
    from ablate.models import zoo_names, zoo_path
    from ablate.models.catalog import is_shipped

    for name in models:
        if name not in zoo_names():
            continue
        try:
            zoo_path(name)
        except ConfigError:
            if is_shipped(name):
                raise  # a shipped name means the shipped weights: a local build never stands in
            from ablate.models.catalog import recipe_of
            from ablate.models.store import cache_dir
            from ablate.zoo.build import build_recipe

            recipe = recipe_of(name)
            console.print(f"building zoo recipe {recipe.name!r} for {name!r} (minutes, once)")
            build_recipe(recipe, cache_dir(recipe))
