"""`ablate bench`: the benchmark suite (ablate vs TRL at forced and natural lengths, rollout
throughput, FLOP utilisation, harness overhead, how cost grows), written to bench.md and
bench.csv."""

from __future__ import annotations

import time
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)


def bench(
    sections: str = typer.Option(
        "all",
        help="comma-separated among trl,natural,rollout,flops,overhead,scaling,study (or 'all')",
    ),
    no_trl: bool = typer.Option(False, "--no-trl", help="skip the TRL comparison (needs trl)"),
    sizes: str = typer.Option(
        None, help="model sizes, e.g. 0.53M,4.2M (default: both; quick: 0.53M)"
    ),
    lengths: str = typer.Option(None, help="completion lengths T (default: 16,32; quick: 16)"),
    repeats: int = typer.Option(None, help="timed repeats per case (default: 10; quick: 3)"),
    warmup: int = typer.Option(None, help="untimed warm-up repeats (default: 2; quick: 1)"),
    threads: int = typer.Option(
        1, help="torch CPU threads (0: torch's default); 1 is stable on a shared machine"
    ),
    quick: bool = typer.Option(False, "--quick", help="few repeats, smallest cases (for tests)"),
    out: Path = typer.Option(Path("reports/bench"), help="folder for bench.md and bench.csv"),
) -> None:
    """Run the benchmark suite; every figure a median (min–max) over interleaved repeats."""
    from rich.console import Console

    from ablate.bench.options import options_from_cli

    options = options_from_cli(
        sections=sections,
        no_trl=no_trl,
        sizes=sizes,
        lengths=lengths,
        repeats=repeats,
        warmup=warmup,
        threads=threads,
        quick=quick,
    )
    if options.trl and {"trl", "natural"} & set(options.sections):
        from ablate.bench.trl_step import require_trl

        require_trl()  # before any compute: one clear line when trl is missing
    console = Console()
    started = time.perf_counter()

    def progress(what: str) -> None:
        console.print(f"[dim]{time.perf_counter() - started:6.0f} s[/dim]  {what}")

    from ablate.bench.report import Meta, target_summary, write_report
    from ablate.bench.suite import run_suite

    progress(f"ablate bench: {', '.join(options.sections)} ({options.repeats} repeats)")
    rows = run_suite(options, progress)
    seconds = time.perf_counter() - started
    meta = Meta(options.command(out), _threads(options.threads), seconds)
    md, csv = write_report(rows, meta, out)
    for line in target_summary(rows):
        console.print(line)
    console.print(f"wrote {md} and {csv} in {seconds:.0f} s")


def _threads(requested: int) -> int:
    import torch

    return requested or torch.get_num_threads()
