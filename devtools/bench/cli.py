"""`python -m devtools bench`: the benchmark suite (ablate vs TRL at forced and natural lengths,
rollout throughput, FLOP utilisation, harness overhead, how cost grows), written to bench.md and
bench.csv."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from devtools.bench.options import SECTIONS

PROG = "python -m devtools bench"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Run the benchmark suite; every figure a median (min–max) over interleaved "
        "repeats.",
    )
    p.add_argument(
        "--sections",
        default="all",
        help=f"comma-separated among {','.join(SECTIONS)} (or 'all')",
    )
    p.add_argument("--no-trl", action="store_true", help="skip the TRL comparison (needs trl)")
    p.add_argument("--sizes", help="model sizes, e.g. 0.53M,4.2M (default: both; quick: 0.53M)")
    p.add_argument("--lengths", help="completion lengths T (default: 16,32; quick: 16)")
    p.add_argument("--repeats", type=int, help="timed repeats per case (default: 10; quick: 3)")
    p.add_argument("--warmup", type=int, help="untimed warm-up repeats (default: 2; quick: 1)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (0: torch's default); 1 is stable on a shared machine",
    )
    p.add_argument("--quick", action="store_true", help="few repeats, smallest cases (for tests)")
    p.add_argument(
        "--out", type=Path, default=Path("reports/bench"), help="folder for bench.md and bench.csv"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    from devtools.bench.options import options_from_cli

    args = parser().parse_args(argv)
    options = options_from_cli(
        sections=args.sections,
        no_trl=args.no_trl,
        sizes=args.sizes,
        lengths=args.lengths,
        repeats=args.repeats,
        warmup=args.warmup,
        threads=args.threads,
        quick=args.quick,
    )
    if options.trl and {"trl", "natural"} & set(options.sections):
        from devtools.bench.trl_step import require_trl

        require_trl()  # before any compute: one clear line when trl is missing
    console = Console()
    started = time.perf_counter()

    def progress(what: str) -> None:
        console.print(f"[dim]{time.perf_counter() - started:6.0f} s[/dim]  {what}")

    from devtools.bench.report import Meta, target_summary, write_report
    from devtools.bench.suite import run_suite

    progress(f"devtools bench: {', '.join(options.sections)} ({options.repeats} repeats)")
    rows = run_suite(options, progress)
    seconds = time.perf_counter() - started
    meta = Meta(options.command(args.out), _threads(options.threads), seconds)
    md, csv = write_report(rows, meta, args.out)
    for line in target_summary(rows):
        console.print(line)
    console.print(f"wrote {md} and {csv} in {seconds:.0f} s")
    return 0


def _threads(requested: int) -> int:
    import torch

    return requested or torch.get_num_threads()
