"""`ablate passk`: pass@k of base models under prompt templates, before any training."""

from __future__ import annotations

from pathlib import Path

import typer

from ablate.base.errors import ConfigError


def register(app: typer.Typer) -> None:
    app.command("passk")(passk)


def _split(text: str, what: str) -> list[str]:
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise ConfigError(f"--{what} needs at least one comma-separated value")
    return items


def _int_list(text: str) -> list[int]:
    try:
        return [int(k) for k in _split(text, "k")]
    except ValueError:
        raise ConfigError(f"--k must be comma-separated integers, got {text!r}") from None


def passk(
    models: str = typer.Option(..., help="comma-separated zoo names or local checkpoint folders"),
    templates: str = typer.Option("plain", help="comma-separated template names"),
    task: str = typer.Option("arithmetic", help="task name"),
    n: int = typer.Option(16, help="samples per problem"),
    k: str = typer.Option("1,4,8,16", help="comma-separated k values (each <= n)"),
    max_problems: int | None = typer.Option(None, help="use only the first eval problems"),
    max_new_tokens: int = typer.Option(80, help="completion budget in tokens (the zoo's)"),
    temperature: float = typer.Option(1.0, help="sampling temperature (0 = greedy)"),
    top_p: float = typer.Option(1.0, help="nucleus sampling mass (1 = off)"),
    seed: int = typer.Option(0, help="sampling seed (the same for every model and template)"),
    engine: str = typer.Option("hf", help="rollout engine: hf or vllm"),
    out: Path = typer.Option(Path("passk.csv"), help="CSV file for the tidy table"),
) -> None:
    """Sample n completions per problem for each model × template; print and save pass@k.
    Progress: a bar on a terminal, one line per batch of prompts otherwise."""
    from rich.console import Console

    from ablate.base.records import SamplingParams
    from ablate.base.threads import apply_threads
    from ablate.commands.progress import passk_display
    from ablate.study.preflight import check_results_dir
    from ablate.trial.passk_sweep import passk_sweep

    if engine not in ("hf", "vllm"):
        raise ConfigError(f"--engine must be 'hf' or 'vllm', got {engine!r}")
    if out.is_dir():
        raise ConfigError(f"--out {out} is a folder: give a CSV file name")
    check_results_dir(out.parent)
    apply_threads()
    sampling = SamplingParams(
        max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed
    )
    console = Console()
    with passk_display(console, "pass@k") as progress:
        table = passk_sweep(
            _split(models, "models"),
            _split(templates, "templates"),
            task,
            n=n,
            ks=_int_list(k),
            sampling=sampling,
            engine_factory=lambda name: _make_engine(name, engine),
            max_problems=max_problems,
            progress=progress,
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    console.print(_rich_table(table))
    console.print(f"wrote {out}")


def _make_engine(name: str, kind: str):
    from ablate.models import load_model
    from ablate.study.preflight import check_models

    check_models([name])  # a damaged folder as one line; the CSV is written only at the end
    model, tokenizer = load_model(name)
    if kind == "vllm":
        from ablate.rollout.vllm import VLLMEngine

        return VLLMEngine(model, tokenizer)
    from ablate.rollout.hf import HFEngine

    return HFEngine(model, tokenizer)


def _rich_table(frame):
    from rich.table import Table

    table = Table(title="pass@k (95% bootstrap CI over problems)")
    for column in ("model", "template", "k", "pass@k", "95% CI", "pass^k", "signal", "length"):
        table.add_column(column)
    for row in frame.itertuples(index=False):
        table.add_row(
            row.model,
            row.template,
            str(row.k),
            f"{row.pass_at_k:.3f}",
            f"[{row.ci_low:.3f}, {row.ci_high:.3f}]",
            f"{row.pass_hat_k:.3f}",
            f"{row.signal_fraction:.3f}",
            f"{row.mean_length:.1f}",
        )
    return table
