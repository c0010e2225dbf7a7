"""`ablate run`: a study, with progress (bars on a terminal, plain lines otherwise) and resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ablate.commands import launch_flags
from ablate.commands.progress import LOG_EVERY

UNTIL_DECIDED_HELP = (
    "sequential design: run the study's `looks` one at a time, adding seeds only to the "
    "contrasts still undecided"
)
TUNE_ONLY_HELP = "run only the study's tuning phase (`ablate worker` reads its tuning.csv)"


def register(app: typer.Typer) -> None:
    app.command("run")(run)


def run(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="study file, e.g. studies/quickstart.py"),
    workers: int = typer.Option(1, min=1, help="local processes (each gets cores/N threads)"),
    results: str = typer.Option("results", help="results folder (MLflow db, checkpoints)"),
    tracking_uri: str = typer.Option(
        "", help="results store: an MLflow URI (default sqlite in --results) or jsonl:///abs/dir"
    ),
    out: str = typer.Option("reports", help="the report is written to OUT/<study>/"),
    log_every: int = typer.Option(
        LOG_EVERY, min=1, help="when output is not a terminal: one progress line every N steps"
    ),
    until_decided: bool = typer.Option(False, "--until-decided", help=UNTIL_DECIDED_HELP),
    launcher: str = launch_flags.LAUNCHER,
    launcher_opt: list[str] | None = launch_flags.LAUNCHER_OPT,
    slurm_partition: str = launch_flags.PARTITION,
    slurm_gpus_per_task: int | None = launch_flags.GPUS,
    slurm_cpus_per_task: int | None = launch_flags.CPUS,
    slurm_time: int | None = launch_flags.TIME,
    slurm_array_parallelism: int | None = launch_flags.PARALLEL,
    detach: bool = launch_flags.DETACH,
    tune_only: bool = typer.Option(False, "--tune-only", help=TUNE_ONLY_HELP),
) -> None:
    """Run a study: the Pass@G phase, then every trial not yet FINISHED (resumes), then report."""
    from ablate.base.threads import apply_threads
    from ablate.commands.sequential import check_design, run_until_decided
    from ablate.study.preflight import check_output_dir, preflight_study
    from ablate.study.study import load_study

    loaded = load_study(study)  # first: a launcher of the study's own registers on import
    launch = launch_flags.resolve_launch(loaded, **ctx.params)  # checked before anything is made
    check_output_dir(Path(out) / loaded.name)  # the report comes last: a bad --out fails first
    if until_decided:
        check_design(loaded)
    check_tunes(loaded, tune_only, until_decided)
    preflight_study(loaded, results, tracking_uri or None)
    echo_opening(loaded, workers)
    apply_threads()  # this process runs the Pass@G phase (and the trials when workers == 1)
    where = dict(results=results, workers=workers, tracking_uri=tracking_uri or None)
    where["launch"] = launch_flags.runner_launch(study, loaded, launch)
    where["tune_only"] = tune_only

    def run_look(select=None):
        return run_with_progress(loaded, **where, log_every=log_every, select=select)

    if until_decided:
        outcomes = run_until_decided(
            loaded, run_look, results=results, tracking_uri=where["tracking_uri"]
        )
    else:
        outcomes = run_look()
    if tune_only:
        typer.echo(
            f"tuned: each arm's chosen setting is in {Path(results) / loaded.name}/tuning.csv"
        )
        return
    if launch.detach:
        typer.echo(f"detached: `ablate status {study} --results {results}` shows every trial")
        return
    summarise_and_report(loaded, outcomes, results, out, tracking_uri or None)


def check_tunes(study, tune_only: bool, until_decided: bool) -> None:
    """--tune-only needs a study with `tune=`, and tunes here (checked before compute)."""
    from ablate.base.errors import ConfigError

    if not tune_only:
        return
    if study.tune is None:
        raise ConfigError(f"--tune-only: study {study.name!r} declares no tune=TuneSpec(...)")
    if until_decided:
        raise ConfigError("--tune-only tunes once: leave out --until-decided")


def echo_opening(study, workers: int) -> None:
    """What the study will run and about how long it takes, before anything runs."""
    from ablate.commands.opening import opening_lines

    for line in opening_lines(study, workers):
        typer.echo(line)


def summarise_and_report(study, outcomes, results: str, out: str, tracking_uri: str | None):
    """The summary table, the report (when a trial finished), exit 1 when trials failed."""
    from ablate import tracking
    from ablate.study.store_failures import store_errors

    store = tracking.open_store(tracking_uri or tracking.default_uri(results))
    with store_errors(store):  # the store can also fail after the last trial
        print_summary(study, outcomes, results, tracking_uri)
        runs = store.runs(study.name).runs
        if not runs.empty and (runs["status"] == "FINISHED").any():
            write_report(study, results, out, tracking_uri)
        else:
            typer.echo("no report: no trial of the study has finished")
    if failed := failed_trials(outcomes):
        typer.secho(f"error: {failed}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)  # as `ablate train` does: a script sees that trials are missing


def failed_trials(outcomes) -> str:
    """One line naming the trials that failed (not diverged: that is a result), or ""."""
    failed = [o for o in outcomes if o.outcome == "failed"]
    if not failed:
        return ""
    names = "; ".join(f"{o.arm} | {o.model} | {o.template} | seed {o.seed}" for o in failed)
    return (
        f"{len(failed)} of {len(outcomes)} trials failed ({names}): their reasons are printed "
        "above and kept in the results store; a rerun retries them"
    )


def write_report(study, results: str, out: str, tracking_uri: str | None) -> None:
    from rich.console import Console

    from ablate.report.render.build import build_report

    folder = build_report(study, results, out, tracking_uri)
    Console().print(f"report: {folder / 'report.md'}  and  {folder / 'report.html'}")


def run_with_progress(
    study,
    *,
    results: str,
    workers: int,
    tracking_uri: str | None,
    log_every: int = LOG_EVERY,
    select=None,
    launch=None,
    tune_only: bool = False,
):
    """`run_study` with rich bars on a terminal, or plain lines every `log_every` steps;
    `select` and `launch` as in `run_study` (a look of a sequential design; another launcher)."""
    from rich.console import Console

    from ablate.commands.progress import wants_bars
    from ablate.commands.run_display import study_bars, study_lines
    from ablate.study.runner import run_study

    console = Console()
    bars = wants_bars(console) and launch is None  # a launcher's progress: its own lines
    display = study_bars(console, workers) if bars else study_lines(log_every, workers)
    with display as hooks:
        return run_study(
            study,
            results_dir=results,
            workers=workers,
            tracking_uri=tracking_uri,
            hooks=hooks,
            select=select,
            launch=launch,
            tune_only=tune_only,
        )


def print_summary(study, outcomes, results: str, tracking_uri: str | None = None) -> None:
    from pathlib import Path

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ablate import tracking
    from ablate.study.runner import LEASED_ELSEWHERE

    console = Console()
    root = Path(results).resolve()
    uri = tracking_uri or tracking.default_uri(root)
    store = tracking.open_store(uri)
    title = (
        f"{study.name}: final eval pass@1 (a diverged seed counts 0), mean [min, max] over seeds"
    )
    table = Table(title=escape(title))
    for col in ("arm", "model", "template", "seeds", "pass@1", "diverged"):
        table.add_column(col)
    for r in summary_rows(store.runs(study.name)):
        diverged = f"[red]{r['diverged']}/{r['n']} diverged[/red]" if r["diverged"] else "-"
        table.add_row(
            r["arm"],
            r["model"],
            r["template"],
            str(r["n"]),
            escape(f"{r['mean']:.3f} [{r['min']:.3f}, {r['max']:.3f}]"),
            diverged,
        )
    console.print(table)
    for o in outcomes:
        if o.outcome in ("failed", "diverged"):
            console.print(
                f"[red]{o.outcome}[/red] {escape(f'{o.arm} {o.model} seed {o.seed}: {o.message}')}"
            )
        elif o.message.startswith(LEASED_ELSEWHERE):  # not ours: another runner finishes it
            console.print(f"skipped {escape(f'{o.arm} {o.model} seed {o.seed}: {o.message}')}")
    where = f"{store.kind}: {uri}  (browse: {browse_hint(results, tracking_uri)})"
    # paths cut over lines cannot be copied
    console.print(where, soft_wrap=True, markup=False, highlight=False)
    checkpoints = f"trial checkpoints: {root / study.name / 'trials'}"
    console.print(checkpoints, soft_wrap=True, markup=False, highlight=False)


def browse_hint(results: str, tracking_uri: str | None = None) -> str:
    """The command that opens these results in a UI (`ablate report` for a store without one)."""
    import shlex

    from ablate import tracking

    if not tracking_uri:
        return f"ablate ui --results {shlex.quote(str(results))}"
    if tracking.ui_of(tracking.open_store(tracking_uri)) is None:
        if tracking_uri.startswith(("http://", "https://")):  # a server serves its own UI
            return f"open {tracking_uri}"
        return f"no UI for this store; ablate report --tracking-uri {shlex.quote(tracking_uri)}"
    return f"ablate ui --tracking-uri {shlex.quote(tracking_uri)}"


def summary_rows(runs, metric: str = "eval/pass_at_1") -> list[dict[str, Any]]:
    """Mean and range over seeds of a trial's final eval metric, per arm × model × template,
    from a `RunTable` of the study's runs (so trials finished by earlier invocations count too).
    A diverged trial counts as 0, the report's rule (`ablate.report.measures.DIVERGED_RULE`): its
    last eval may be from before it broke; `diverged` says how many of the `n` seeds did."""
    if runs.empty or metric not in runs.metrics:
        return []
    frame = runs.runs
    value = runs.metric(metric)
    diverged = frame["outcome"].fillna("").eq("diverged")
    keep = (frame["status"] == "FINISHED") & (value.notna() | diverged)
    done = frame[keep].assign(_value=value.where(~diverged, 0.0)[keep], _diverged=diverged[keep])
    rows = []
    for (a, m, t), g in done.groupby(["arm", "model", "template"], sort=False):
        v = g["_value"]
        rows.append(
            {
                "arm": a,
                "model": m,
                "template": t,
                "n": len(v),
                "diverged": int(g["_diverged"].sum()),
                "mean": v.mean(),
                "min": v.min(),
                "max": v.max(),
            }
        )
    return rows
