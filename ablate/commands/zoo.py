"""`ablate zoo list`, `ablate zoo build [NAME] [--check]`: the tiny base-model zoo."""

from __future__ import annotations

from pathlib import Path

import typer

from ablate.errors import ConfigError

zoo_app = typer.Typer(help="The tiny pretrained base-model zoo.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    zoo_app.command("list")(list_models)
    zoo_app.command("build")(build)
    app.add_typer(zoo_app, name="zoo")


def list_models() -> None:
    """Show every zoo model: where it is built, its recipe and its measured Pass@1 / Pass@8."""
    from rich.console import Console
    from rich.table import Table

    from ablate.models.catalog import EVAL_TEMPLATES, RECIPES
    from ablate.models.store import built_locations, is_current, read_meta

    table = Table(title="model zoo (Pass@1 / Pass@8, 64 eval problems x 8 samples, T=1)")
    table.add_column("model", no_wrap=True)
    for column in ("recipe", "size", "step", "built", *EVAL_TEMPLATES):
        table.add_column(column)
    for recipe in RECIPES.values():
        size = recipe.size
        size_text = f"h{size.hidden} L{size.layers} ff{size.intermediate}"
        for name in recipe.output_names():
            found = built_locations(recipe, name)
            if not found:
                table.add_row(name, recipe.name, size_text, "", "[dim]not built[/dim]")
                continue
            where, path = found[0]
            meta = read_meta(path) or {}
            stale = "" if is_current(path, recipe) else " [yellow](older recipe)[/yellow]"
            cells = [_passk_cell(meta.get("measured", {}).get(t)) for t in EVAL_TEMPLATES]
            step = str(meta.get("step", "?"))
            table.add_row(name, recipe.name, size_text, step, where + stale, *cells)
    Console().print(table)


def _passk_cell(measured: dict | None) -> str:
    if not measured:
        return "—"
    return f"{measured['pass1']:.3f} / {measured['pass8']:.2f}"


def build(
    name: str = typer.Argument("ladder", help="recipe (ladder, base-0.5m, …) or a model in one"),
    out: Path | None = typer.Option(None, help="folder to build into (default: the cache)"),
    check: bool = typer.Option(
        False, "--check", help="rebuild and confirm weights, measurements and bands match"
    ),
) -> None:
    """Pretrain a zoo recipe (the default ladder takes a few minutes on 2 CPU cores)."""
    from rich.console import Console

    from ablate.models.build import build_recipe, check_recipe
    from ablate.models.catalog import RECIPES, recipe_of
    from ablate.models.store import built_locations, cache_dir

    recipe = RECIPES.get(name) or recipe_of(name)
    console = Console()
    if check:
        reference = out or _reference_dir(recipe, built_locations)
        with _progress_bar(recipe, console) as progress:
            result, rows = check_recipe(recipe, reference, progress)
        _print_check(console, result, rows, reference)
        if not all(row.ok for row in rows):
            # SystemExit, not typer.Exit: cli.main runs Typer with standalone_mode=False, where
            # typer.Exit's code is swallowed; SystemExit's code becomes the exit status.
            raise SystemExit(1)
        return
    target = out or cache_dir(recipe)
    with _progress_bar(recipe, console) as progress:
        result = build_recipe(recipe, target, progress)
    _print_built(console, result)


def _reference_dir(recipe, built_locations) -> Path:
    first = recipe.output_names()[0]
    found = built_locations(recipe, first)
    if not found:
        raise ConfigError(f"nothing to check: {recipe.name!r} is not built (or pass --out DIR)")
    return found[0][1].parent


class _progress_bar:
    """A rich progress bar over pretraining steps, showing the last measured Pass@k."""

    def __init__(self, recipe, console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.total = recipe.pretrain.max_steps
        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            "{task.fields[status]}",
            console=console,
        )
        self.task = self.bar.add_task(f"pretrain {recipe.name}", total=self.total, status="")
        self.status = ""

    def __enter__(self):
        self.bar.__enter__()
        return self.update

    def __exit__(self, *exc) -> None:
        self.bar.__exit__(*exc)

    def update(self, step: int, total: int, loss: float, measured: dict | None) -> None:
        if measured:
            self.status = f"pass@1 {measured['pass1']:.3f} pass@8 {measured['pass8']:.2f}"
            # One line per checkpoint: stays in the scrollback and shows in non-terminal logs.
            self.bar.console.log(f"step {step}: loss {loss:.3f}, {self.status}")
        self.bar.update(self.task, completed=step, status=f"loss {loss:.3f} {self.status}")


def _print_built(console, result) -> None:
    from rich.table import Table

    templates = result.recipe.eval.templates
    table = Table(title=f"built {result.recipe.name} in {result.seconds:.0f} s → {result.out_dir}")
    for column in ("model", "step", "in band", *templates):
        table.add_column(column)
    for built in result.models:
        cells = [_passk_cell(built.measured.get(t)) for t in templates]
        table.add_row(built.name, str(built.step), "yes" if built.in_band else "NO", *cells)
    console.print(table)


def _print_check(console, result, rows, reference: Path) -> None:
    from rich.table import Table

    _print_built(console, result)
    table = Table(title=f"check against {reference}")
    for column in ("model", "same weights", "same Pass@k", "in band"):
        table.add_column(column)
    for row in rows:
        marks = [
            ("yes" if ok else "[red]NO[/red]")
            for ok in (row.same_weights, row.same_measurement, row.in_band)
        ]
        table.add_row(row.name, *marks)
    console.print(table)
