"""`ablate train`: one trial from the command line, with a progress bar on a terminal and plain
lines otherwise; with `--results`, logged to MLflow as the one trial of an ad-hoc study."""

from __future__ import annotations

import contextlib

import typer

from ablate.commands.progress import LOG_EVERY

SET_HELP = (
    "override a setting: NAME=VALUE, repeatable. NAME is an Algorithm field (ablate show "
    "grpo), an optimiser setting (lr, grad_clip, weight_decay, warmup_steps, betas), a budget "
    "field (max_steps, prompts_per_step, group_size, max_new_tokens, temperature, top_p, top_k, "
    "max_generated_tokens) or eval.FIELD (eval.max_problems=16); wins over --lr/--steps"
)


def register(app: typer.Typer) -> None:
    app.command("train")(train)


def _parse_overrides(items: list[str]) -> dict:
    """`field=value` pairs → typed values (ints, floats, bools, None, strings)."""
    from ablate.factors.overrides import parse_pairs

    return parse_pairs(items)


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
    results: str = typer.Option(
        "",
        help="log to MLflow in this results folder, as the one trial of study --study "
        "(checkpoints in RESULTS/STUDY/trials/; a rerun resumes it)",
    ),
    study: str = typer.Option("train", help="the ad-hoc study's name (with --results)"),
    log_every: int = typer.Option(
        LOG_EVERY, min=1, help="when output is not a terminal: one progress line every N steps"
    ),
    set_: list[str] = typer.Option([], "--set", metavar="NAME=VALUE", help=SET_HELP),
) -> None:
    """Train one algorithm from one base model and print the final evaluation."""
    from rich.console import Console

    from ablate.base.errors import ConfigError
    from ablate.factors.overrides import describe

    if run_dir and results:
        raise ConfigError("give --run-dir or --results, not both (--results keeps checkpoints)")
    spec = _trial_spec(
        algo, model, task, template, seed, steps, lr, eval_every, eval_problems, set_
    )
    title = f"{algo}" + (f" [{describe(set_)}]" if set_ else "")
    console = Console()
    if results:
        result = _train_in_study(spec, title, results, study, console, log_every)
    else:
        result = _train_alone(spec, title, run_dir, console, log_every)
    if result is not None:
        outcome, final_eval, message = result
        table_title = f"{title} on {model} ({template}), seed {seed}: {outcome}"
        _print_result(console, table_title, final_eval, message if outcome != "finished" else "")


def _trial_spec(algo, model, task, template, seed, steps, lr, eval_every, eval_problems, set_):
    """The trial the options and `--set` overrides describe (checked, nothing loaded)."""
    import dataclasses

    from ablate.base.errors import ConfigError
    from ablate.baselines import baseline
    from ablate.factors.eval_spec import EvalSpec
    from ablate.factors.overrides import split_overrides
    from ablate.factors.spec import Budget, Optim, TrialSpec

    changes = split_overrides(set_)
    try:
        algorithm = dataclasses.replace(baseline(algo), **changes["algorithm"])
    except TypeError as exc:  # split_overrides knows every field: a safety net only
        raise ConfigError(f"--set: {exc}") from None
    return TrialSpec(
        algorithm=algorithm,
        model=model,
        task=task,
        template=template,
        seed=seed,
        budget=Budget(**{"max_steps": steps, **changes["budget"]}),
        optim=Optim(**{"lr": lr, **changes["optim"]}),
        eval=EvalSpec(**{"every": eval_every, "max_problems": eval_problems, **changes["eval"]}),
    )


def _train_alone(spec, title: str, run_dir: str, console, log_every: int):
    """The trial in this process, no MLflow; checkpoints in `run_dir` when given."""
    import dataclasses

    from ablate.base.threads import apply_threads
    from ablate.models import weights_hash
    from ablate.study.preflight import check_models, check_results_dir, check_sizes, check_task_data
    from ablate.trial import train as run_trial

    check_models([spec.model])
    check_task_data(spec.task)
    check_sizes(
        spec.budget, {"EvalSpec: n_samples": spec.eval.n_samples}, [spec.model], spec.device
    )
    if run_dir:
        check_results_dir(run_dir)
    # the weights are part of the trial: a run_dir never resumes a rebuilt model's checkpoint
    spec = dataclasses.replace(spec, model_weights=weights_hash(spec.model))
    apply_threads()
    label = f"{title} seed {spec.seed}"
    with _step_display(console, label, spec.budget.max_steps, log_every) as on_step:
        result = run_trial(spec, run_dir=run_dir or None, progress=on_step)
    return result.outcome, result.final_eval, result.message


def _train_in_study(spec, title: str, results: str, name: str, console, log_every: int):
    """The trial as the one trial of study `name`, through the runner: the same MLflow layout,
    tags, leases, checkpoints and resume as a study's trial. Returns (outcome, final eval,
    message), or None when it was already FINISHED."""
    from ablate.base.threads import apply_threads
    from ablate.commands.run import browse_hint
    from ablate.study.runner import RunHooks, run_study
    from ablate.study.study import Study, arm

    s = spec
    adhoc = Study(
        name=name,
        base_models=[s.model],
        templates=[s.template],
        arms=[arm(title.replace(" ", ""), s.algorithm)],
        seeds=[s.seed],
        task=s.task,
        budget=s.budget,
        optim=s.optim,
        eval=s.eval,
        passk=None,
    )
    apply_threads()
    label = f"{title} seed {s.seed}"
    with _step_display(console, label, s.budget.max_steps, log_every) as on_step:
        (out,) = run_study(adhoc, results_dir=results, hooks=RunHooks(on_step=on_step))
    hint = f"MLflow: study {name!r} in {results}  (browse: {browse_hint(results)})"
    console.print(hint, soft_wrap=True, markup=False, highlight=False)  # paths stay copyable
    if out.outcome == "skipped":
        console.print(f"trial {out.trial_id} was {out.message}: nothing to train")
        return None
    return out.outcome, out.final_eval or {}, out.message


@contextlib.contextmanager
def _step_display(console, label: str, steps: int, log_every: int):
    """A step callback: a rich bar on a terminal, plain lines every `log_every` steps otherwise."""
    import math

    from ablate.commands.progress import StepLines, wants_bars

    if not wants_bars(console):
        lines = StepLines(log_every)
        lines.start(label)
        yield lines
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

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

        yield on_step


def _print_result(console, title: str, final_eval: dict, failure: str) -> None:
    """The final eval as a table; a failure (`failure`, the reason) exits 1."""
    from rich.markup import escape
    from rich.table import Table

    console.print(escape(title), soft_wrap=True, highlight=False)  # a table title would wrap
    table = Table()
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in sorted(final_eval.items()):
        table.add_row(key, f"{value:.4g}")
    console.print(table)
    if failure:
        console.print(f"[red]{escape(failure)}[/red]")
        raise typer.Exit(1)
