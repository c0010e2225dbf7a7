"""`ablate train`: one trial from the command line, with a progress bar."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("train")(train)


def _parse_overrides(items: list[str]) -> dict:
    """`field=value` pairs → typed values (ints, floats, bools, None, strings)."""
    import ast

    from ablate.errors import ConfigError

    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects field=value, got {item!r}")
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key] = raw
    return out


def train(
    algo: str = typer.Option("grpo", help="preset name (ablate presets)"),
    model: str = typer.Option("rl_ready", help="zoo name or local checkpoint folder"),
    task: str = typer.Option("arithmetic"),
    template: str = typer.Option("plain"),
    steps: int = typer.Option(50, min=1),
    seed: int = typer.Option(0),
    lr: float = typer.Option(3e-5),
    eval_every: int = typer.Option(0, help="evaluate every N steps (0 = start and end)"),
    eval_problems: int = typer.Option(64),
    run_dir: str = typer.Option("", help="checkpoint folder (resumes when it holds one)"),
    set_: list[str] = typer.Option([], "--set", help="override an Algorithm field: field=value"),
) -> None:
    """Train one algorithm from one base model and print the final evaluation."""
    import dataclasses

    from rich.console import Console
    from rich.table import Table

    from ablate.errors import ConfigError
    from ablate.models import weights_hash
    from ablate.preflight import check_models, check_results_dir, check_task_data
    from ablate.presets import baseline
    from ablate.threads import apply_threads
    from ablate.trial import Budget, EvalSpec, Optim, TrialSpec

    base = baseline(algo)
    try:
        algorithm = dataclasses.replace(base, **_parse_overrides(set_))
    except TypeError as exc:
        raise ConfigError(f"--set: {exc}") from None
    spec = TrialSpec(
        algorithm=algorithm,
        model=model,
        task=task,
        template=template,
        seed=seed,
        budget=Budget(max_steps=steps),
        optim=Optim(lr=lr),
        eval=EvalSpec(every=eval_every, max_problems=eval_problems),
    )
    check_models([model])
    check_task_data(task)
    if run_dir:
        check_results_dir(run_dir)
    # the weights are part of the trial: a run_dir never resumes a rebuilt model's checkpoint
    spec = dataclasses.replace(spec, model_weights=weights_hash(model))
    apply_threads()
    console = Console()
    result = _run_with_bar(spec, console, label=f"{algo} seed {seed}", run_dir=run_dir or None)
    table = Table(title=f"{algo} on {model} ({template}), seed {seed}: {result.outcome}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in sorted(result.final_eval.items()):
        table.add_row(key, f"{value:.4g}")
    console.print(table)
    if result.outcome != "finished":
        console.print(f"[red]{result.message}[/red]")
        raise typer.Exit(1)


def _run_with_bar(spec, console, *, label: str, run_dir: str | None):
    import math

    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from ablate.trainer import train as run_trial

    steps = spec.budget.max_steps
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[info]}"),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=console) as bar:
        job = bar.add_task(label, total=steps, info="")

        def on_step(step: int, total: int, m: dict) -> None:
            reward, length = m.get("reward/mean", math.nan), m.get("length/mean", math.nan)
            bar.update(job, completed=step, info=f"reward {reward:.3f}  len {length:.1f}")

        return run_trial(spec, run_dir=run_dir, progress=on_step)
