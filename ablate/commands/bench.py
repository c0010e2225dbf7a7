"""`ablate bench`: rollout throughput of our sampler against `model.generate`."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)


def bench(
    repeats: int = typer.Option(5, help="timed runs per engine and shape (interleaved A B A B)"),
    new_tokens: int = typer.Option(32, help="tokens sampled per sequence"),
    configs: str = typer.Option("0.53M,4.2M", help="comma-separated tiny model sizes"),
    threads: int = typer.Option(
        1, help="torch CPU threads (0: torch's default); 1 is stable on a shared machine"
    ),
    out: Path = typer.Option(Path("reports/bench/rollout.csv"), help="CSV output"),
) -> None:
    """Tokens/s of HFEngine (with log-probs) vs model.generate on tiny random Llama models."""
    import torch
    from rich.console import Console
    from rich.table import Table

    from ablate.bench.rollout import bench_rollout
    from ablate.errors import ConfigError
    from ablate.testing import TINY_CONFIGS

    names = [c.strip() for c in configs.split(",") if c.strip()]
    unknown = [c for c in names if c not in TINY_CONFIGS]
    if unknown or not names or repeats < 1 or new_tokens < 1:
        raise ConfigError(
            f"--configs must name sizes among {', '.join(TINY_CONFIGS)} (got {configs!r}); "
            "--repeats and --new-tokens must be >= 1"
        )
    if threads:
        torch.set_num_threads(threads)
    console = Console()
    frame = bench_rollout(
        configs=names,
        new_tokens=new_tokens,
        repeats=repeats,
        progress=lambda what: console.print(f"[dim]benchmarking {what}[/dim]"),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out, index=False)
    table = Table(
        title=f"rollout tokens/s, {new_tokens} new tokens, {torch.get_num_threads()} threads"
    )
    for column in ("config", "shape", "engine", "median tok/s", "min–max", "vs generate"):
        table.add_column(column)
    for row in frame.itertuples(index=False):
        ratio = "" if row.engine == "generate" else f"{row.ratio_vs_generate:.2f}×"
        span = f"{row.min_tok_s:.0f}–{row.max_tok_s:.0f}"
        table.add_row(row.config, row.shape, row.engine, f"{row.median_tok_s:.0f}", span, ratio)
    console.print(table)
    console.print(f"wrote {out}")
