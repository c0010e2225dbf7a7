"""FLOP utilisation: model FLOPs per second against a matmul peak measured in the same run.

A train step's useful work is ~6 × params × tokens (forward 2×, backward 4×; attention's own
FLOPs are left out, small at these lengths). The peak is the best fp32 `a @ b` rate over a few
square sizes at the benchmark's thread count, so "70%" means 70% of what this machine, under
today's load, demonstrably does.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

PEAK_SIZES = (512, 1024, 2048)
MIN_SECONDS = 0.5


def train_flops(params: int, tokens: float) -> float:
    """Forward + backward FLOPs of `tokens` tokens through a `params`-parameter model."""
    return 6.0 * params * tokens


def step_flops(params: int, tokens: float) -> float:
    """A whole RL step's model FLOPs: the update (6×) plus sampling, where each token passes
    forward once through the KV-cached sampler (~2×)."""
    return 8.0 * params * tokens


def utilisation(flops: float, seconds: float, peak_flops_per_s: float) -> float:
    """Achieved FLOP/s as a fraction of the peak."""
    if seconds <= 0 or peak_flops_per_s <= 0:
        raise ValueError("seconds and peak must be > 0")
    return flops / seconds / peak_flops_per_s


def matmul_gflops(n: int, min_seconds: float = MIN_SECONDS) -> float:
    """GFLOP/s of fp32 n×n @ n×n, warmed up, timed over >= `min_seconds`."""
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2):  # warm-up: allocation, thread pool, caches
        a @ b
    reps, start = 0, time.perf_counter()
    while True:
        a @ b
        reps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return 2.0 * n**3 * reps / elapsed / 1e9


def matmul_peak(
    sizes: Sequence[int] = PEAK_SIZES, rounds: int = 3, min_seconds: float = MIN_SECONDS
) -> dict[int, list[float]]:
    """GFLOP/s per matrix size, one value per round (sizes interleaved round by round); the
    peak is the best size's median."""
    out: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            out[n].append(matmul_gflops(n, min_seconds))
    return out
