"""Write ablate/tasks/data/arithmetic_subsets.json: the arithmetic problems the rl_ready rung
solves often ("easy": rewards concentrated on 1) and rarely ("hard"), for the Tricks-or-Traps
study's easy and hard data.

    OMP_NUM_THREADS=1 .venv/bin/python -m devtools arithmetic-subsets

Each problem of the first 4,000 train problems and of 2,000 eval problems is sampled 8 times
(temperature 1) and kept as easy at 7 or 8 correct, as hard at 0 or 1. The subsets'
pass rates are then measured again with fresh samples (another seed), so the recorded figures
are not inflated by the selection (regression to the mean).
"""

from __future__ import annotations

import argparse
import json

from ablate.base import seeding
from ablate.base.passk import mean_pass_at_k
from ablate.base.records import SamplingParams
from ablate.models import load_model
from ablate.rollout.hf import HFEngine
from ablate.rollout.sample import correct_matrix, sample_and_verify
from ablate.tasks import get_task
from ablate.tasks.arithmetic import SUBSETS_FILE
from ablate.tasks.templates import get_template

OPTIONS = {"layout": "pre", "difficulty": "medium", "seed": 0, "n_train": 20_000, "n_eval": 2000}
POOL = {"train": 4000, "eval": 2000}
SAMPLES, EASY_MIN, HARD_MAX = 8, 7, 1


def correct(engine, problems, template, task, seed_name: str):
    sampling = SamplingParams(
        max_new_tokens=80, stop=tuple(template.stop), seed=seeding.derive_seed(0, seed_name)
    )
    batch = sample_and_verify(engine, problems, template, task, sampling, n=SAMPLES)
    return correct_matrix(batch, SAMPLES)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m devtools arithmetic-subsets", description=__doc__.splitlines()[0]
    ).parse_args(argv)
    model, tokenizer = load_model("rl_ready")
    engine, task = HFEngine(model, tokenizer), get_task("arithmetic", **OPTIONS)
    template = get_template("plain")
    subsets = {"easy": {}, "hard": {}}
    held_out = {}
    for split, size in POOL.items():
        problems = task.problems(split)[:size]
        solved = correct(engine, problems, template, task, f"subsets-select-{split}").sum(1)
        easy = [p for p, c in zip(problems, solved, strict=True) if c >= EASY_MIN]
        hard = [p for p, c in zip(problems, solved, strict=True) if c <= HARD_MAX]
        for name, chosen in (("easy", easy), ("hard", hard)):
            subsets[name][split] = [p.id for p in chosen]
            again = correct(engine, chosen, template, task, f"subsets-remeasure-{split}")
            held_out[f"{name}/{split}"] = {
                "problems": len(chosen),
                "pass1": round(mean_pass_at_k(again, 1), 4),
                f"pass{SAMPLES}": round(mean_pass_at_k(again, SAMPLES), 4),
            }
        print(split, {k: v for k, v in held_out.items() if k.endswith(split)}, flush=True)
    record = {
        "task_options": OPTIONS,
        "selected_by": f"rl_ready, {SAMPLES} samples at T=1: easy {EASY_MIN}+, hard {HARD_MAX}-",
        "pool": POOL,
        "measured_again": held_out,
        "subsets": subsets,
    }
    SUBSETS_FILE.parent.mkdir(parents=True, exist_ok=True)
    SUBSETS_FILE.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {SUBSETS_FILE}")
    return 0
