"""What a benchmark run measures (`SuiteOptions`), and turning `python -m devtools bench`'s text
options into it, with every mistake reported as one `ConfigError` before any compute."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ablate.base.errors import ConfigError

SECTIONS = (
    "trl",
    "natural",
    "profile",
    "rollout",
    "flops",
    "overhead",
    "scaling",
    "study",
    "batching",
    "vllm_cpu",
)
#: Longest completion allowed (the zoo models have 192 positions; prompts take ~25).
MAX_LENGTH = 128


@dataclass(frozen=True)
class SuiteOptions:
    """What to run and how often; `quick()` is the smallest suite that still runs every path."""

    sizes: tuple[str, ...] = ("0.53M", "4.2M")
    lengths: tuple[int, ...] = (16, 32)
    sections: tuple[str, ...] = SECTIONS
    repeats: int = 10
    warmup: int = 2
    threads: int = 1
    trl: bool = True  # whether sections compare with TRL (`--no-trl`: natural runs rollouts only)
    quick_mode: bool = False
    rollout_shapes: tuple[tuple[int, int], ...] = ((8, 8), (32, 8))
    rollout_tokens: int = 32
    vllm_shapes: tuple[tuple[int, int], ...] = ((8, 8), (64, 1), (32, 8))  # prompts x samples
    peak_sizes: tuple[int, ...] = (512, 1024, 2048)
    peak_rounds: int = 3
    peak_seconds: float = 0.5
    overhead_windows: int = 2
    scaling_groups: tuple[int, ...] = (4, 8, 16)
    scaling_lengths: tuple[int, ...] = (16, 32, 64)
    study_trials: tuple[int, ...] = (1, 2, 4)
    study_workers: tuple[int, ...] = (1, 2)
    study_repeats: int = 3
    study_steps: int = 5
    batch_trials: tuple[int, ...] = (3, 5)  # seeds per arm: trials stacked, and the study's seeds
    batch_workers: int = 2
    batch_steps: int | None = None  # None: the quickstart's budget (50 steps)
    batch_eval_problems: int | None = None  # None: the quickstart's eval (256 problems)
    batch_new_tokens: int = 40

    @classmethod
    def quick(cls, **overrides: Any) -> SuiteOptions:
        small = cls(
            sizes=("0.53M",),
            lengths=(16,),
            repeats=3,
            warmup=1,
            quick_mode=True,
            rollout_shapes=((8, 8),),
            rollout_tokens=16,
            vllm_shapes=((8, 8),),
            peak_sizes=(512, 1024),
            peak_rounds=1,
            peak_seconds=0.2,
            overhead_windows=1,
            scaling_groups=(4, 8),
            scaling_lengths=(16, 32),
            study_trials=(1, 2),
            study_repeats=1,
            study_steps=2,
            batch_trials=(2,),
            batch_steps=2,
            batch_eval_problems=4,
            batch_new_tokens=8,
        )
        return replace(small, **overrides)

    def command(self, out: Path) -> str:
        """A `python -m devtools bench` command line that reruns exactly this suite."""
        args = ["python", "-m", "devtools", "bench", "--sections", ",".join(self.sections)]
        args += ["--sizes", ",".join(self.sizes), "--lengths", ",".join(map(str, self.lengths))]
        args += ["--repeats", str(self.repeats), "--warmup", str(self.warmup)]
        args += ["--threads", str(self.threads), *(["--quick"] if self.quick_mode else [])]
        args += [] if self.trl else ["--no-trl"]
        return shlex.join([*args, "--out", str(out)])


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_sections(text: str, no_trl: bool) -> tuple[str, ...]:
    names = list(SECTIONS) if text.strip() in ("", "all") else _items(text)
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        raise ConfigError(
            f"--sections: unknown {', '.join(unknown)}; choose among {', '.join(SECTIONS)} or 'all'"
        )
    chosen = tuple(n for n in SECTIONS if n in names and not (no_trl and n == "trl"))
    if not chosen:
        raise ConfigError("no section left to run (--no-trl removed the only one)")
    return chosen


def parse_lengths(text: str) -> tuple[int, ...]:
    try:
        lengths = tuple(int(x) for x in _items(text))
    except ValueError:
        lengths = ()
    if not lengths or any(not 1 <= t <= MAX_LENGTH for t in lengths):
        raise ConfigError(
            f"--lengths must be comma-separated integers in 1..{MAX_LENGTH} (got {text!r})"
        )
    return lengths


def options_from_cli(
    *,
    sections: str = "all",
    no_trl: bool = False,
    sizes: str | None = None,
    lengths: str | None = None,
    repeats: int | None = None,
    warmup: int | None = None,
    threads: int = 1,
    quick: bool = False,
) -> SuiteOptions:
    """SuiteOptions from the command's options: explicit values win over the (quick) defaults."""
    from devtools.bench.models import check_sizes

    changes: dict[str, Any] = {
        "sections": parse_sections(sections, no_trl),
        "threads": threads,
        "trl": not no_trl,
    }
    if sizes is not None:
        changes["sizes"] = tuple(check_sizes(_items(sizes)))
    if lengths is not None:
        changes["lengths"] = parse_lengths(lengths)
    if repeats is not None:
        changes["repeats"] = repeats
    if warmup is not None:
        changes["warmup"] = warmup
    problems = [
        f"--repeats must be >= 1 (got {repeats})" if repeats is not None and repeats < 1 else "",
        f"--warmup must be >= 0 (got {warmup})" if warmup is not None and warmup < 0 else "",
        f"--threads must be >= 0 (0: torch's default; got {threads})" if threads < 0 else "",
    ]
    problems = [p for p in problems if p]
    if problems:
        raise ConfigError("; ".join(problems))
    return SuiteOptions.quick(**changes) if quick else replace(SuiteOptions(), **changes)
