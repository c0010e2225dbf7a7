"""The benchmark suite for real: a TRL trainer interleaved with ablate steps, and `python -m
devtools bench --quick` end to end (slow: ~10 s and ~1 min)."""

from __future__ import annotations

import csv

import pytest

from devtools.__main__ import main
from devtools.bench.options import SECTIONS

pytestmark = pytest.mark.slow


def test_trl_and_ablate_steps_alternate_on_identical_work(tmp_path):
    pytest.importorskip("trl")
    from ablate.tracking import MemoryTracker
    from devtools.bench.models import model_dir
    from devtools.bench.step import StepCase
    from devtools.bench.trl_step import run_pair

    case = StepCase("0.53M", prompts=2, group=4, new_tokens=8)
    tracker = MemoryTracker()
    pair = run_pair(case, model_dir("0.53M", tmp_path), tracker, repeats=2, warmup=1)
    assert pair.order == ["trl", "ablate"] * 3 + ["trl"]
    assert len(pair.trl) == len(pair.ablate) == 2
    assert all(t > 0 for t in pair.trl) and all(r.wall > r.gen > 0 for r in pair.ablate)
    # 2 prompts x 4 samples: every prompt token once per group (or per row) + 8 x 8 completion
    assert all(r.update_tokens >= 64 for r in pair.ablate)


def test_quick_suite_writes_every_section(tmp_path, capsys):
    pytest.importorskip("trl")
    out = tmp_path / "bench"
    assert main(["bench", "--quick", "--out", str(out)]) == 0
    md = (out / "bench.md").read_text()
    with (out / "bench.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["section"] for r in rows} == set(SECTIONS)
    for title in (
        "1. RL step time",
        "1b. Natural lengths",
        "2. Rollout",
        "3. Train-step FLOP",
        "4. Harness",
        "5a.",
        "5b.",
    ):
        assert f"## {title}" in md
    targeted = [r for r in rows if r["target"]]
    # 4.2M not run: no FLOP target
    assert {r["section"] for r in targeted} == {"trl", "natural", "rollout", "overhead"}
    assert all(r["meets_target"] in ("true", "false") for r in targeted)
    measured = [r for r in rows if r["repeats"] != "0"]  # vllm_cpu is skipped without .venv-vllm
    assert all(float(r["min"]) <= float(r["median"]) <= float(r["max"]) for r in measured)
    assert "wrote" in capsys.readouterr().out
