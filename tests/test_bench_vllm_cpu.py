"""The vllm_cpu bench section without vLLM (the main venv): the skip path, the child's command
line and failure, and the rows, bench.md lines and side-by-side table of hand-built results.
The measurement itself runs in `.venv-vllm` (`python -m devtools bench --sections vllm_cpu`)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from devtools.__main__ import main
from devtools.bench import vllm_cpu
from devtools.bench.harness import Summary
from devtools.bench.options import SECTIONS, SuiteOptions
from devtools.bench.report import Meta, render_csv, render_markdown
from devtools.bench.suite import Bench

#: What the child writes (`vllm_cpu.measure`): seconds per engine and shape, 2048 tokens each.
RESULT = {
    "vllm": "0.32.0",
    "torch": "2.13.0+cpu",
    "threads": 1,
    "tokens": 32,
    "repeats": 3,
    "warmup": 1,
    "sizes": {
        "0.53M": {
            "build_s": 12.5,
            "first_s": 3.0,
            "cases": {"8x8": {"tokens": 2048, "hf": [0.1, 0.2, 0.4], "vllm": [0.5, 0.8, 4.0]}},
        }
    },
}
CASE = "0.53M 8x8 T=32"


def no_models(self, size):
    raise AssertionError(f"a skipped section built the {size} model")


def test_without_the_vllm_venv_the_section_is_one_row_saying_why(tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_cpu, "VLLM_PYTHON", tmp_path / "no-venv" / "bin" / "python")
    monkeypatch.setattr(Bench, "folder", no_models)
    out = tmp_path / "bench"
    assert main(["bench", "--sections", "vllm_cpu", "--threads", "0", "--out", str(out)]) == 0
    with (out / "bench.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    assert (row["section"], row["metric"], row["repeats"]) == ("vllm_cpu", "skipped", "0")
    assert row["median"] == "nan"  # nothing measured, not a zero
    assert row["note"].endswith("no-venv/bin/python not found: make install-vllm first")
    md = (out / "bench.md").read_text()
    assert "## 7. vLLM's CPU build vs `HFEngine`" in md
    reason = f"{tmp_path}/no-venv/bin/python not found: make install-vllm first"
    assert f"| — | skipped ({reason}) | — | — |  | 0 |  |  |" in md


def test_the_child_command_parses_back_to_the_suites_settings(tmp_path):
    options = SuiteOptions(repeats=7, warmup=2, threads=1)
    folders = {"0.53M": tmp_path / "a", "4.2M": tmp_path / "b"}
    command = vllm_cpu.child_command(Path("py"), tmp_path / "r.json", folders, options)
    assert command[:3] == ["py", "-m", "devtools.bench.vllm_cpu"]
    args = vllm_cpu.parser().parse_args(command[3:])
    assert args.json == tmp_path / "r.json" and dict(args.model) == folders
    assert args.shapes == [(8, 8), (64, 1), (32, 8)] and args.tokens == options.rollout_tokens == 32
    assert (args.repeats, args.warmup, args.threads) == (7, 2, 1)
    assert SuiteOptions.quick().vllm_shapes == ((8, 8),) and SECTIONS[-1] == "vllm_cpu"
    assert vllm_cpu.child_env(1)["OMP_NUM_THREADS"] == "1"
    assert vllm_cpu.child_env(1)["VLLM_LOGGING_LEVEL"] == "WARNING"


def fake_python(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "python"
    script.write_text(f"#!{sys.executable}\nimport sys, json\n{body}\n")
    script.chmod(0o755)
    return script


def test_the_section_runs_the_child_and_reads_back_its_json(tmp_path, monkeypatch):
    body = (
        "out = sys.argv[sys.argv.index('--json') + 1]\n"
        "print('progress: measuring', flush=True)\n"
        f"open(out, 'w').write({json.dumps(json.dumps(RESULT))})"
    )
    monkeypatch.setattr(vllm_cpu, "VLLM_PYTHON", fake_python(tmp_path, body))
    monkeypatch.setattr(Bench, "folder", lambda self, size: tmp_path / size)
    said: list[str] = []
    bench = Bench(SuiteOptions.quick(), tmp_path, said.append)
    rows = vllm_cpu.section_vllm_cpu(bench)
    assert said[1] == "measuring" and said[2:] == vllm_cpu.side_by_side(RESULT)
    assert rows == vllm_cpu.result_rows(RESULT)


def test_a_failing_child_raises_with_its_last_lines(tmp_path):
    script = fake_python(tmp_path, "print('progress: one', flush=True); print('boom'); sys.exit(3)")
    said: list[str] = []
    with pytest.raises(RuntimeError, match=r"exited 3; its last lines:\nboom"):
        vllm_cpu.run_child([str(script)], {}, said.append)
    assert said == ["one"]


def test_rows_are_tokens_per_second_and_the_ratio_of_medians():
    rows = {(r.case, r.metric): r for r in vllm_cpu.result_rows(RESULT)}
    # 2048 tokens ÷ seconds: HF 20480, 10240, 5120; vLLM 4096, 2560, 512
    assert rows[CASE, "HFEngine tok/s"].summary == Summary(10240, 5120, 20480, 3)
    assert rows[CASE, "VLLMEngine tok/s"].summary == Summary(2560, 512, 4096, 3)
    ratio = rows[CASE, "VLLMEngine / HFEngine"].summary
    assert ratio.median == pytest.approx(0.25)  # of the medians; per pair 0.2, 0.25, 0.1
    assert (ratio.min, ratio.max) == (pytest.approx(0.1), pytest.approx(0.25))
    build = rows["0.53M", "vLLM engine build"]
    assert build.summary == Summary(12.5, 12.5, 12.5, 1) and build.unit == "s"
    assert build.note == "vllm 0.32.0, torch 2.13.0+cpu, 1 torch thread"
    assert rows["0.53M", "first generate"].summary.median == 3.0
    assert all(r.target is None for r in rows.values())  # a measurement: no speed goal
    assert len(rows) == 5


def test_bench_md_and_the_side_by_side_table():
    rows = vllm_cpu.result_rows(RESULT)
    md = render_markdown(rows, Meta("cmd", 1, 1.0, date="today"))
    assert f"| {CASE} | HFEngine tok/s | 10,240 | 5,120 – 20,480 | tok/s | 3 |  |  |" in md
    assert f"| {CASE} | VLLMEngine / HFEngine | 0.250 | 0.100 – 0.250 | ratio | 3 |  |  |" in md
    assert (
        "| 0.53M | vLLM engine build (vllm 0.32.0, torch 2.13.0+cpu, 1 torch thread) | 12.5 |" in md
    )
    assert "vllm_cpu,0.53M 8x8 T=32,VLLMEngine tok/s,tok/s,2560,512,4096,3,,," in render_csv(rows)
    table = vllm_cpu.side_by_side(RESULT)
    assert table[0].startswith("| size | prompts × samples, T=32 | HFEngine tok/s | VLLMEngine")
    assert table[2:] == ["| 0.53M | 8 × 8 | 10,240 | 2,560 | 0.25 | 12.5 | 3.00 |"]
