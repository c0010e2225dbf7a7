"""`python -m devtools calibrate`: show, on simulated studies, that the report's intervals, marks
and power analysis keep their promises for a given seed count."""

from __future__ import annotations

import argparse
import textwrap
import time

from ablate.base.errors import ConfigError

PROG = "python -m devtools calibrate"
STUDIES, TASK_STUDIES = 2000, 600  # default studies per row: fixed-set, task-level tables


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


def _check(args: argparse.Namespace) -> None:
    if not args.seed_sd > 0:
        raise ConfigError(
            f"--seed-sd must be > 0 (the SD over seeds of pass@1, e.g. 0.035); got {args.seed_sd}"
        )
    if not 0 < args.base_pass < 1:
        raise ConfigError(
            f"--base-pass is a pass rate strictly between 0 and 1; got {args.base_pass}"
        )
    if args.studies is None:
        args.studies = (
            TASK_STUDIES if args.task_level or args.claims or args.adversarial else STUDIES
        )
    if args.studies < 10:
        raise ConfigError(f"--studies must be at least 10 to estimate a rate; got {args.studies}")
    if min(args.problems, args.samples) < 1:
        raise ConfigError("--problems and --samples must each be at least 1")
    if not 0 <= args.shared_fraction <= 1:
        raise ConfigError(f"--shared-fraction is a share in [0, 1]; got {args.shared_fraction}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Simulate whole studies and print how often the report's intervals cover, "
        "its marks fire on noise, and its 80%%-power effect sizes are detected.",
    )
    add = p.add_argument
    add("--seed-sd", type=float, default=0.035, help="SD over seeds of a run's expected pass@1")
    add("--seeds", default="3,5,10", help="comma-separated seed counts per arm (>= 2)")
    add("--arms", default="4,8", help="comma-separated arm counts, reference included (>= 2)")
    add(
        "--studies", type=int, default=None, help="simulated studies per row (2000; 600 task-level)"
    )
    add("--base-pass", type=float, default=0.5, help="pass@1 of a typical problem")
    add("--problem-sd", type=float, default=2.0, help="SD of problem difficulty, logit scale")
    add("--problems", type=int, default=64, help="eval problems")
    add("--samples", type=int, default=8, help="samples per eval problem")
    add("--shared-fraction", type=float, default=0.5, help="share of seed variance common to arms")
    noise = p.add_mutually_exclusive_group()
    noise.add_argument(
        "--shared-eval-noise",
        dest="shared_eval_noise",
        action="store_true",
        default=True,
        help="arms of a seed share eval draws (default)",
    )
    noise.add_argument(
        "--independent-eval-noise",
        dest="shared_eval_noise",
        action="store_false",
        help="each arm draws its own eval noise",
    )
    add("--seed", type=int, default=0, help="random seed of the simulation")
    add(
        "--sequential",
        action="store_true",
        help="also the sequential design on whole studies: old and new rule beside the fixed "
        "design (τ 0, 0.5, 1; Δ 0, 0.03, 0.04, 0.05)",
    )
    add(
        "--divergence",
        action="store_true",
        help="also divergence as its own outcome: survivors' Δ, hurdle Δ and the exact test",
    )
    add(
        "--task-level",
        action="store_true",
        help="calibrate the task-level (seeds × problems) inference on studies with fresh "
        "problems instead: τ × J × n grid and scenarios (--problems, --samples and --arms unused)",
    )
    add(
        "--claims",
        action="store_true",
        help="calibrate the claims and a paper's findings (the verdict rule, the crossed "
        "task-level contrast and the exact test) on studies with fresh problems, beside the old "
        "per-seed rule, and claim 6 (--arms and --problems unused)",
    )
    add(
        "--adversarial",
        action="store_true",
        help="every statistic's gates on scenarios unlike its default model (Beta-mixture "
        "problems, heavy-tailed seeds, divergence in one arm, drifting curves); exits 1 when a "
        "gate fails (--studies per scenario, default 600)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    from devtools.calibration import calibration
    from devtools.calibration.simulate import StudyModel

    args = parser().parse_args(argv)
    _check(args)
    ns = _counts(args.seeds, "--seeds", 2, "one seed has no spread")
    arm_counts = _counts(args.arms, "--arms", 2, "a reference arm and at least one other")
    if args.task_level:
        return _task_level(args, ns)
    if args.claims:
        return _claims(args, ns)
    if args.adversarial:
        return _adversarial(args)
    model = StudyModel(problems=args.problems, samples=args.samples, **_shared_settings(args))
    start = time.perf_counter()
    table = calibration.calibrate(model, ns, arm_counts, args.studies, args.seed)
    print(calibration.format_table(table, arm_counts))
    print()
    print(calibration.describe(table))
    print(f"({time.perf_counter() - start:.1f} s)")
    _extra_tables(args)
    return 0


def _extra_tables(args: argparse.Namespace) -> None:
    """The sequential design's and divergence's tables, when asked for."""
    if args.sequential:
        from devtools.calibration import sequential_task

        start = time.perf_counter()
        print()
        rows = sequential_task.table(args.studies, seed=args.seed)
        print(sequential_task.format_table(rows))
        print(sequential_task.LEGEND)
        print(f"({time.perf_counter() - start:.1f} s)")
    if args.divergence:
        from devtools.calibration import divergence

        start = time.perf_counter()
        print()
        print(divergence.format_table(divergence.table(args.studies, seed=args.seed)))
        print(divergence.LEGEND)
        print(f"({time.perf_counter() - start:.1f} s)")


def _shared_settings(args: argparse.Namespace) -> dict:
    """The simulation settings both study models take from the command line."""
    names = ("base_pass", "problem_sd", "seed_sd", "shared_fraction", "shared_eval_noise")
    return {name: getattr(args, name) for name in names}


def _task_level(args: argparse.Namespace, seeds: tuple[int, ...]) -> int:
    from devtools.calibration import task_calibration as tc
    from devtools.calibration.task_level import TaskModel

    base = TaskModel(**_shared_settings(args))
    start = time.perf_counter()
    grid = tc.run_cases(tc.grid_cases(base, seeds), args.studies, args.seed)
    print(tc.format_rows(grid, ("τ", "J", "n")))
    print()
    scenarios = tc.run_cases(tc.scenario_cases(base, seeds), args.studies, args.seed + 1000)
    print(f"Scenarios at τ = 0.5, {base.samples} samples unless named:")
    print(tc.format_rows(scenarios, ("scenario", "J", "n")))
    print()
    print(tc.LEGEND)
    print(textwrap.fill(tc.describe(base, args.studies), 100))
    print(f"({time.perf_counter() - start:.1f} s)")
    return 0


def _claims(args: argparse.Namespace, seeds: tuple[int, ...]) -> int:
    from devtools.calibration import claims_calibration as cc
    from devtools.calibration import claims_claim6 as c6
    from devtools.calibration import task_calibration as tc
    from devtools.calibration.task_level import TaskModel

    base = TaskModel(samples=args.samples, **_shared_settings(args))
    start = time.perf_counter()
    rows = cc.run_cases(cc.grid_cases(base, seeds), args.studies, args.seed)
    print(cc.format_rows(rows, ("τ", "J", "n")))
    print()
    print(cc.LEGEND)
    print(textwrap.fill(tc.describe(base, args.studies, cc.MARGIN), 100))
    print()
    six = c6.run(c6.cases(base, seeds=tuple(n for n in seeds if n >= 5) or seeds), args.studies)
    print(cc.format_rows(six, c6.HEADERS, c6.COLUMNS))
    print()
    print(c6.LEGEND)
    print(f"({time.perf_counter() - start:.1f} s)")
    return 0


def _adversarial(args: argparse.Namespace) -> int:
    from devtools.calibration import adversarial

    results = adversarial.run(args.studies, args.seed)
    print(adversarial.format_report(results))
    return 0 if all(g.passed for _, gates, _ in results for g in gates) else 1
