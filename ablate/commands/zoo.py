"""`ablate zoo list`, `ablate zoo show NAME`, `ablate zoo build [NAME] [--out DIR] [--check]`.

A zoo name means one set of weights: the shipped ladder's names always load the shipped
folders, so a local rebuild (which is bit-identical only in the environment the shipped one was
built in) can never train other weights under the same name."""

from __future__ import annotations

from pathlib import Path

import typer

from ablate.base.errors import ConfigError

zoo_app = typer.Typer(help="The tiny pretrained base-model zoo.", no_args_is_help=True)

SHORT_HASH = 12
LIST_HASH = 8  # `zoo list` is one screen wide; `zoo show` prints the full hash
NOT_BUILT = "[dim]not built[/dim]"
#: `zoo list` marks beside where a name resolves, each explained in a line under the table
OLDER = "!"  # built from an older version of its recipe
ALSO = "*"  # another build of the same name exists (loadable by its path only)

BUILD_HELP = (
    "Pretrain a zoo recipe (the default ladder: 12 min on 2 idle CPU cores, more when shared). "
    "A rebuild of the shipped ladder never replaces it: the names hopeless, mid, rl_ready and "
    "saturated always load the shipped weights, and the rebuild loads only by its folder path. "
    "The output says whether it reproduced the shipped weights bit for bit: that holds only in "
    "the environment they were built in (torch version, CPU instruction set, threads)."
)


def register(app: typer.Typer) -> None:
    zoo_app.command("list")(list_models)
    zoo_app.command("show")(show)
    zoo_app.command("build", help=BUILD_HELP)(build)
    app.add_typer(zoo_app, name="zoo")


def list_models() -> None:
    """Show every zoo model: where its name resolves, its weights hash, its recipe and its
    measured Pass@1 / Pass@8; then what the models not built are and how to build them."""
    from rich.console import Console

    from ablate.models.catalog import RECIPES

    table = _list_table()
    missing, notes = [], []
    for recipe in RECIPES.values():
        for name in recipe.output_names():
            cells, model_notes = _list_cells(recipe, name)
            table.add_row(name, recipe.name, *cells)
            notes.extend(model_notes)
            if cells[1] == NOT_BUILT and recipe not in missing:
                missing.append(recipe)
    console = Console()
    console.print(table)
    for note in notes:  # under the table: a path in a cell would wrap it over many lines
        console.print(note, soft_wrap=True, highlight=False, markup=False)
    for recipe in missing:
        console.print(
            f"{recipe.name} (not built): {recipe.description}; build it into the cache with "
            f"`ablate zoo build {recipe.name}`",
            soft_wrap=True,
            highlight=False,
        )


def _list_table():
    """The empty `zoo list` table: every cell on one line, 80 terminal columns wide."""
    from rich.table import Table

    from ablate.models.catalog import EVAL_TEMPLATES

    table = Table(
        title="model zoo: Pass@1/Pass@8 per template (64 eval problems x 8 samples, T=1)",
        box=None,  # no borders, one space between columns: 80 terminal columns suffice
        padding=(0, 1, 0, 0),
        header_style="bold underline",
    )
    for column in ("model", "recipe", "step"):
        table.add_column(column, no_wrap=True)
    # short words and a mark; what a mark means is a line under the table
    table.add_column("where", no_wrap=True, min_width=len("not built"))
    table.add_column("weights", no_wrap=True)
    for template in EVAL_TEMPLATES:  # full names: a cut one would be another template's
        table.add_column(template, no_wrap=True, min_width=len(template))
    return table


def _list_cells(recipe, name: str) -> tuple[list[str], list[str]]:
    """The row's cells after model and recipe, and the notes its marks in `where` refer to."""
    from ablate.models import zoo_path
    from ablate.models.catalog import EVAL_TEMPLATES
    from ablate.models.store import built_locations, is_current, read_meta, weights_sha256

    try:
        path = zoo_path(name)
    except ConfigError:
        return ["", NOT_BUILT], []
    found = built_locations(recipe, name)
    where, notes = next(w for w, p in found if p == path), []
    if not is_current(path, recipe):
        where += f"[yellow]{OLDER}[/yellow]"
        notes.append(f"{OLDER} {name}: built from an older version of recipe {recipe.name}")
    for other_where, other in found:
        if other != path:
            where += f"[dim]{ALSO}[/dim]"
            notes.append(
                f"{ALSO} {name}: a {other_where} build at {other} loads only by that path; "
                f"the name {name} loads the {where.split('[')[0]} weights"
            )
    meta = read_meta(path) or {}
    cells = [_passk_cell(meta.get("measured", {}).get(t), sep="/") for t in EVAL_TEMPLATES]
    return [str(meta.get("step", "?")), where, weights_sha256(path)[:LIST_HASH], *cells], notes


def _passk_cell(measured: dict | None, sep: str = " / ") -> str:
    if not measured:
        return "—"
    return f"{measured['pass1']:.3f}{sep}{measured['pass8']:.2f}"


def show(
    model: str = typer.Argument(..., help="zoo name (rl_ready, base-4m, …) or checkpoint folder"),
) -> None:
    """Where a model resolves (shipped / cache / path), its full weights sha256, and what its
    zoo.json records: step, recipe, build environment, measured Pass@k."""
    from rich.console import Console

    from ablate.models import model_location, weights_hash
    from ablate.models.store import read_meta

    where, path = model_location(model)
    meta = read_meta(path) or {}
    console = Console(soft_wrap=True)  # a hash or path broken over lines cannot be copied
    console.print(f"{model}: {where} {path}")
    console.print(f"  weights sha256  {weights_hash(model)}")
    if not meta:
        console.print("  [dim]no zoo.json: not a zoo build[/dim]")
        return
    console.print(f"  step            {meta.get('step', '?')}")
    recipe_hash = str(meta.get("recipe_hash", "?"))[:SHORT_HASH]
    console.print(f"  recipe          {meta.get('recipe_name', '?')} ({recipe_hash})")
    env = meta.get("build_env")
    env_text = ", ".join(f"{k} {v}" for k, v in env.items()) if env else "not recorded"
    console.print(f"  built under     {env_text}")
    for template, measured in meta.get("measured", {}).items():
        console.print(f"  {template:<15} pass@1 / pass@8 {_passk_cell(measured)}")


def build(
    name: str = typer.Argument("ladder", help="recipe (ladder, base-0.5m, …) or a model in one"),
    out: Path | None = typer.Option(
        None, help="folder to build into (default: the cache, $ABLATE_CACHE/zoo)"
    ),
    check: bool = typer.Option(
        False, "--check", help="rebuild in a scratch folder and compare with --out or the zoo"
    ),
) -> None:
    """Pretrain a zoo recipe (see BUILD_HELP)."""
    from rich.console import Console

    from ablate.models.catalog import RECIPES, SHIPPED_RECIPES, recipe_of
    from ablate.models.store import SHIPPED_DIR, cache_dir
    from ablate.zoo.build import build_recipe, check_recipe, compare_with
    from ablate.zoo.build import environment_differences as env_diff

    recipe = RECIPES.get(name) or recipe_of(name)
    console = Console()
    if check:
        reference = out or _reference_dir(recipe)
        with _progress_bar(recipe, console) as progress:
            result, rows, differences = check_recipe(recipe, reference, progress)
        _print_built(console, result)
        _print_comparison(console, rows, differences, reference)
        if not all(row.ok for row in rows):
            # SystemExit, not typer.Exit: cli.main runs Typer with standalone_mode=False, where
            # typer.Exit's code is swallowed; SystemExit's code becomes the exit status.
            raise SystemExit(1)
        return
    target = out or cache_dir(recipe)
    with _progress_bar(recipe, console) as progress:
        result = build_recipe(recipe, target, progress)
    _print_built(console, result)
    if recipe.name in SHIPPED_RECIPES:
        shipped = ", ".join(recipe.output_names())
        console.print(
            f"[bold]The shipped {recipe.name} still wins under the names {shipped}[/bold]: "
            f"they load {SHIPPED_DIR}/<name>. Load this build by its path, e.g. "
            f"--model {result.out_dir / recipe.output_names()[-1]}"
        )
        rows = compare_with(result, SHIPPED_DIR)
        _print_comparison(console, rows, env_diff(result, SHIPPED_DIR), SHIPPED_DIR)


def _reference_dir(recipe) -> Path:
    from ablate.models import zoo_path

    try:
        return zoo_path(recipe.output_names()[0]).parent
    except ConfigError:
        raise ConfigError(
            f"nothing to check: {recipe.name!r} is not built (or pass --out DIR)"
        ) from None


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
    for column in ("model", "step", "in band", "weights", *templates):
        table.add_column(column)
    for built in result.models:
        cells = [_passk_cell(built.measured.get(t)) for t in templates]
        digest = built.weights_sha256[:SHORT_HASH]
        table.add_row(built.name, str(built.step), "yes" if built.in_band else "NO", digest, *cells)
    console.print(table)


def _print_comparison(console, rows, differences: dict, reference: Path) -> None:
    """Per model: same weights / Pass@k / step as the reference; then, unless every model is
    bit-identical, a plain statement that it is not and which environment fields differ."""
    from rich.table import Table

    table = Table(title=f"compared with {reference}")
    for column in ("model", "step (reference)", "same weights", "same Pass@k", "in band"):
        table.add_column(column)
    for row in rows:
        marks = [
            ("yes" if ok else "[red]NO[/red]")
            for ok in (row.same_weights, row.same_measurement, row.in_band)
        ]
        table.add_row(row.name, f"{row.step} ({row.reference_step})", *marks)
    console.print(table)
    if all(row.same_weights for row in rows):
        console.print(f"bit-identical to {reference}")
        return
    differ = sum(not row.same_weights for row in rows)
    console.print(
        f"[yellow]NOT bit-identical[/yellow]: {differ} of {len(rows)} models differ from "
        f"{reference} (other weights, so other Pass@k and possibly other steps)."
    )
    if "build_env" in differences:
        console.print(
            "  the reference did not record its build environment (torch, CPU, threads), so "
            f"this cannot tell a different machine from a bug; this build: "
            f"{differences['build_env'][1]}"
        )
    elif differences:
        for key, (theirs, ours) in differences.items():
            console.print(f"  environment {key}: reference {theirs}, this build {ours}")
    else:
        console.print("  the recorded build environment is the same: this is a reproducibility bug")
