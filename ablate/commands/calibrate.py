"""`ablate calibrate`: show, on simulated studies, that the report's intervals, marks and power
analysis keep their promises for a given seed count."""

from __future__ import annotations

import typer

from ablate.errors import ConfigError


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)


def _counts(text: str, option: str, minimum: int, why: str) -> tuple[int, ...]:
    try:
        values = tuple(dict.fromkeys(int(v) for v in text.split(",") if v.strip()))
    except ValueError:
        raise ConfigError(
            f"{option} takes comma-separated integers, e.g. 3,5,10; got {text!r}"
        ) from None
    if not values or min(values) < minimum:
        raise ConfigError(f"{option} values must each be at least {minimum} ({why}); got {text!r}")
    return values


def _check(seed_sd: float, base_pass: float, studies: int, problems: int, samples: int) -> None:
    if not seed_sd > 0:
        raise ConfigError(
            f"--seed-sd must be > 0 (the SD over seeds of pass@1, e.g. 0.035); got {seed_sd}"
        )
    if not 0 < base_pass < 1:
        raise ConfigError(f"--base-pass is a pass rate strictly between 0 and 1; got {base_pass}")
    if studies < 10:
        raise ConfigError(f"--studies must be at least 10 to estimate a rate; got {studies}")
    if min(problems, samples) < 1:
        raise ConfigError("--problems and --samples must each be at least 1")


def calibrate(
    seed_sd: float = typer.Option(0.035, help="SD over seeds of a run's expected pass@1"),
    seeds: str = typer.Option("3,5,10", help="comma-separated seed counts per arm (>= 2)"),
    arms: str = typer.Option("4,8", help="comma-separated arm counts, reference included (>= 2)"),
    studies: int = typer.Option(2000, help="simulated studies per row"),
    base_pass: float = typer.Option(0.5, help="pass@1 of a typical problem"),
    problem_sd: float = typer.Option(2.0, help="SD of problem difficulty on the logit scale"),
    problems: int = typer.Option(64, help="eval problems"),
    samples: int = typer.Option(8, help="samples per eval problem"),
    shared_fraction: float = typer.Option(0.5, help="share of seed variance common to arms"),
    shared_eval_noise: bool = typer.Option(
        True, "--shared-eval-noise/--independent-eval-noise", help="arms of a seed share eval draws"
    ),
    seed: int = typer.Option(0, help="random seed of the simulation"),
) -> None:
    """Simulate whole studies and print how often the report's intervals cover, its marks fire
    on noise, and its 80%-power effect sizes are detected."""
    import time

    from ablate.report import calibration
    from ablate.report.simulate import StudyModel

    _check(seed_sd, base_pass, studies, problems, samples)
    ns = _counts(seeds, "--seeds", 2, "one seed has no spread")
    arm_counts = _counts(arms, "--arms", 2, "a reference arm and at least one other")
    if not 0 <= shared_fraction <= 1:
        raise ConfigError(f"--shared-fraction is a share in [0, 1]; got {shared_fraction}")
    model = StudyModel(
        problems=problems,
        samples=samples,
        base_pass=base_pass,
        problem_sd=problem_sd,
        seed_sd=seed_sd,
        shared_fraction=shared_fraction,
        shared_eval_noise=shared_eval_noise,
    )
    start = time.perf_counter()
    table = calibration.calibrate(model, ns, arm_counts, studies, seed)
    typer.echo(calibration.format_table(table, arm_counts))
    typer.echo()
    typer.echo(calibration.describe(table))
    typer.echo(f"({time.perf_counter() - start:.1f} s)")
