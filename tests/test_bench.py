"""The benchmark harness: summaries, interleaving, TRL step-time bookkeeping, FLOP arithmetic,
report rendering and the command's errors (fast; the real suite is in test_bench_slow.py)."""

from __future__ import annotations

import sys

import pytest

from ablate.base.errors import ConfigError
from devtools.__main__ import main
from devtools.bench.flops import step_flops, train_flops, utilisation
from devtools.bench.harness import (
    Row,
    Summary,
    Target,
    interleave,
    ratio_summary,
    summarize,
)
from devtools.bench.options import SECTIONS, SuiteOptions, options_from_cli
from devtools.bench.report import MET, MISSED, Meta, render_csv, render_markdown
from devtools.bench.scaling import sweep_cases
from devtools.bench.step import LengthError, StepCase, StepRecord, check_lengths
from devtools.bench.suite import overhead_share, utilisation_rows
from devtools.bench.trl_step import (
    ABLATE_BEGIN,
    ABLATE_END,
    TRL_BEGIN,
    StepClock,
    event_order,
    trl_step_seconds,
)


def record(wall: float, diagnostics: float = 0.0, tracking: float = 0.0) -> StepRecord:
    return StepRecord(wall, 0.0, 0.0, diagnostics, tracking, 100.0)


# -- summaries ----------------------------------------------------------------------------------


def test_summary_is_median_min_max():
    assert summarize([3.0, 1.0, 2.0, 10.0]) == Summary(2.5, 1.0, 10.0, 4)
    assert summarize([5.0]) == Summary(5.0, 5.0, 5.0, 1)
    with pytest.raises(ValueError):
        summarize([])


def test_ratio_is_ratio_of_medians_with_per_pair_extremes():
    ours, theirs = [1.0, 2.0, 9.0], [4.0, 4.0, 3.0]
    s = ratio_summary(ours, theirs)
    assert s.median == pytest.approx(2.0 / 4.0)  # not the median of the pair ratios (0.5)
    assert (s.min, s.max, s.n) == (pytest.approx(0.25), pytest.approx(3.0), 3)
    with pytest.raises(ValueError, match="unpaired"):
        ratio_summary([1.0], [1.0, 2.0])


def test_targets_compare_the_median():
    assert Target("<=", 0.5).met(0.5) and not Target("<=", 0.5).met(0.51)
    assert Target(">=", 1.3).met(1.4) and not Target(">=", 1.3).met(1.2)
    assert str(Target("<=", 0.5)) == "≤ 0.5" and str(Target(">=", 70.0)) == "≥ 70"
    assert Row("s", "c", "m", "x", Summary(1, 1, 1, 1)).meets_target is None
    with pytest.raises(ValueError):
        Target("<", 1.0)


def test_interleave_runs_a_b_a_b_and_drops_warmup():
    calls: list[str] = []

    def runner(name: str):
        def run():
            calls.append(name)
            return len(calls)

        return run

    out = interleave({"A": runner("A"), "B": runner("B")}, repeats=3, warmup=1)
    assert calls == ["A", "B"] * 4 and out.order == calls
    assert len(out.seconds["A"]) == len(out.seconds["B"]) == 3
    assert out.results["A"] == [3, 5, 7]  # the warm-up round's results are not kept


# -- TRL step bookkeeping ---------------------------------------------------------------------


def test_trl_step_time_subtracts_the_ablate_step_inside_it():
    events = [
        (TRL_BEGIN, 0.0),
        (ABLATE_BEGIN, 1.0),
        (ABLATE_END, 1.5),
        (TRL_BEGIN, 2.0),
        (ABLATE_BEGIN, 3.2),
        (ABLATE_END, 4.0),
        (TRL_BEGIN, 4.5),
        (TRL_BEGIN, 5.0),  # a step with no ablate step inside
    ]
    assert trl_step_seconds(events) == pytest.approx([1.5, 1.7, 0.5])
    assert event_order(events) == ["trl", "ablate", "trl", "ablate", "trl", "trl"]
    with pytest.raises(ValueError):
        trl_step_seconds([(TRL_BEGIN, 0.0), (ABLATE_END, 1.0)])


def test_step_clock_interleaves_and_caps_the_ablate_steps():
    ran: list[int] = []
    clock = StepClock(lambda: ran.append(1) or record(0.1), ablate_steps=2)
    for _ in range(3):  # three TRL steps: the last only closes the second one's interval
        clock.on_step_begin()
        clock.on_step_end()
    assert event_order(clock.events) == ["trl", "ablate", "trl", "ablate", "trl"]
    assert len(ran) == len(clock.records) == 2
    assert len(trl_step_seconds(clock.events)) == 2


# -- FLOPs and overhead -------------------------------------------------------------------------


def test_flop_formulas_and_utilisation():
    assert train_flops(1_000, 10) == 60_000
    assert step_flops(1_000, 10) == 80_000
    # 6e9 FLOPs in 0.5 s against a 20 GFLOP/s peak: 60%
    assert utilisation(train_flops(1_000_000, 1_000), 0.5, 20e9) == pytest.approx(0.6)
    with pytest.raises(ValueError):
        utilisation(1.0, 0.0, 1.0)


def test_utilisation_rows_use_update_phase_and_whole_step_times():
    steps = [StepRecord(1.0, 0.5, 0.5, 0.0, 0.0, 1_000.0)] * 3
    rows = {r.metric: r for r in utilisation_rows(StepCase("4.2M"), steps, 1_000_000, 20e9)}
    train, whole = rows["train-step utilisation"], rows["whole-step utilisation"]
    assert train.summary.median == pytest.approx(60.0)  # 6e9 FLOPs / 0.5 s / 20e9
    assert whole.summary.median == pytest.approx(40.0)  # 8e9 FLOPs / 1.0 s / 20e9
    assert train.target == Target(">=", 70.0) and train.meets_target is False
    assert whole.target is None
    small = utilisation_rows(StepCase("0.53M"), steps, 1_000, 20e9)
    assert all(r.target is None for r in small)


def test_overhead_share_sums_over_steps():
    steps = [record(1.0, 0.01, 0.01), record(1.0, 0.01, 0.01), record(2.0, 0.02, 0.34)]
    assert overhead_share(steps) == pytest.approx(100 * 0.4 / 4.0)


def test_lengths_must_all_equal_t():
    check_lengths([16, 16], 16, "x")
    with pytest.raises(LengthError, match="15"):
        check_lengths([16, 15], 16, "trl")
    with pytest.raises(LengthError):
        check_lengths([], 16, "trl")


def test_sweep_cases_vary_g_then_t_without_duplicates():
    cases, base = sweep_cases("0.53M", (4, 8, 16), (16, 32, 64))
    assert (base.group, base.new_tokens) == (8, 16)
    assert [(c.group, c.new_tokens) for c in cases] == [
        (4, 16),
        (8, 16),
        (16, 16),
        (8, 32),
        (8, 64),
    ]
    assert StepCase("0.53M").label == "0.53M P=8 G=8 T=16"


# -- report -------------------------------------------------------------------------------------


def _rows() -> list[Row]:
    ratio, share = Summary(0.45, 0.4, 0.6, 10), Summary(3.0, 2.0, 4.0, 2)
    return [
        Row("trl", "0.53M T=16", "ablate step", "s", Summary(0.2, 0.19, 0.3, 10)),
        Row("trl", "0.53M T=16", "ablate / trl", "ratio", ratio, Target("<=", 0.5)),
        Row(
            "trl",
            "4.2M T=16",
            "ablate / trl",
            "ratio",
            Summary(0.9, 0.8, 1.1, 10),
            Target("<=", 0.8),
        ),
        Row("overhead", "0.53M T=16", "harness share", "%", share, Target("<=", 5.0)),
    ]


def test_markdown_has_header_targets_and_marks():
    command = "python -m devtools bench --quick"
    md = render_markdown(_rows(), Meta(command, threads=1, seconds=12.0))
    assert "torch threads: 1" in md and f"`{command}`" in md and "torch " in md
    assert "## 1. RL step time" in md and "## 4. Harness overhead" in md
    assert "≤ 0.5" in md and "≤ 0.8" in md and "≤ 5" in md
    assert md.count(MET) == 2 * 2 and md.count(MISSED) == 1 * 2  # summary list + tables
    assert "| 0.53M T=16 | **ablate / trl** | 0.450 | 0.400 – 0.600 | ratio | 10 | ≤ 0.5 |" in md
    assert "gradient checkpointing" in md and "forced to T" in md


def test_csv_is_long_format_with_targets():
    lines = render_csv(_rows()).splitlines()
    assert lines[0] == ("section,case,metric,unit,median,min,max,repeats,target,meets_target,note")
    assert lines[1] == "trl,0.53M T=16,ablate step,s,0.2,0.19,0.3,10,,,"
    assert lines[2].endswith(",10,<= 0.5,true,")
    assert lines[3].endswith(",10,<= 0.8,false,")
    assert len(lines) == 5


# -- options and the command --------------------------------------------------------------------


def test_options_defaults_quick_and_overrides():
    full = options_from_cli()
    assert full.sizes == ("0.53M", "4.2M") and full.lengths == (16, 32) and full.repeats == 10
    assert full.sections == SECTIONS
    quick = options_from_cli(quick=True, repeats=2, no_trl=True)
    assert quick.quick_mode and quick.sizes == ("0.53M",) and quick.repeats == 2
    assert "trl" not in quick.sections
    assert options_from_cli(sections="study,rollout").sections == ("rollout", "study")
    command = SuiteOptions.quick().command(__import__("pathlib").Path("x"))
    assert command.startswith("python -m devtools bench --sections ") and "--quick" in command


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"sizes": "0.53M,7B"}, "--sizes"),
        ({"sizes": ""}, "--sizes"),
        ({"lengths": "16,abc"}, "--lengths"),
        ({"lengths": "0"}, "--lengths"),
        ({"sections": "trl,nope"}, "unknown nope"),
        ({"sections": "trl", "no_trl": True}, "no section left"),
        ({"repeats": 0}, "--repeats"),
        ({"threads": -1}, "--threads"),
    ],
)
def test_bad_options_are_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        options_from_cli(**kwargs)


def test_bad_sizes_on_the_command_line_is_one_line(capsys, tmp_path):
    assert main(["bench", "--sizes", "0.53M,9M", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --sizes") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bench.md").exists()


def test_bench_without_trl_says_how_to_install_it(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "trl", None)  # as if trl were not installed
    assert main(["bench", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "make bench" in err and ".[bench]" in err and "--no-trl" in err
