"""The model folders both tools load, so that the weights they compare on are literally the same.

0.53M is the shipped zoo model `rl_ready`. No 4.2M zoo model is built by default (pretraining it
is slow on a CPU), so the 4.2M model is the zoo's 4.2M size (recipe `base-4m`) at its seeded
initialisation, with the zoo tokenizer, saved into a scratch folder: where completion lengths are
forced to a fixed T, random weights cost exactly what trained ones would.

Natural-length cases need a model whose completions end at EOS where the zoo's do: there the
4.2M size is warm-started, `WARM_START` steps of the zoo's own pretraining on its corpus (the
answer format, EOS included; measured mean completion length 38.9 tokens against rl_ready's 38.8
on the same prompts). It is built once, deterministically, and cached under
$ABLATE_CACHE/bench (default ~/.cache/ablate/bench).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from ablate.base.errors import ConfigError

#: Benchmark size -> zoo model shipped at that size (None: built from the zoo recipe's size).
SIZES: dict[str, str | None] = {"0.53M": "rl_ready", "4.2M": None}
#: The zoo recipe whose ModelSize a size without a shipped model is built with.
RECIPE_OF_SIZE = {"4.2M": "base-4m"}
SEED = 0
#: The 4.2M warm start for natural lengths: pretraining steps, batch, warm-up steps, lr.
WARM_START = {"steps": 60, "batch_size": 32, "warmup_steps": 10, "lr": 1e-3, "seed": SEED}


def check_sizes(sizes: list[str]) -> list[str]:
    """`sizes` if every one is a benchmark size, else a ConfigError naming the valid ones."""
    unknown = [s for s in sizes if s not in SIZES]
    if unknown or not sizes:
        raise ConfigError(
            f"--sizes must name sizes among {', '.join(SIZES)} (got {','.join(sizes) or 'none'})"
        )
    return sizes


def model_dir(size: str, scratch: Path) -> Path:
    """The folder holding `size`'s model and tokenizer (built under `scratch` when needed)."""
    from ablate.models import zoo_path

    check_sizes([size])
    zoo_name = SIZES[size]
    if zoo_name is not None:
        return zoo_path(zoo_name)
    folder = Path(scratch) / f"model-{size}"
    if not (folder / "config.json").is_file():
        _build_random(size, folder)
    return folder


def _build_random(size: str, folder: Path) -> None:
    """Seeded initialisation of the zoo recipe's size, with the zoo tokenizer, saved to `folder`."""
    from ablate.models import load_model
    from ablate.models.catalog import get_recipe
    from ablate.models.pretrain import build_model

    _, tokenizer = load_model(SIZES["0.53M"])  # the zoo tokenizer every zoo model shares
    model = build_model(get_recipe(RECIPE_OF_SIZE[size]).size, tokenizer, SEED)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def natural_model_dir(size: str) -> Path:
    """The folder of `size`'s model for natural-length cases: the shipped zoo model where there
    is one, else the cached warm start of the size (built here the first time)."""
    from ablate.models import zoo_path

    check_sizes([size])
    if SIZES[size] is not None:
        return zoo_path(SIZES[size])
    key = json.dumps({"size": size, **WARM_START, "torch": _torch_version()}, sort_keys=True)
    folder = bench_cache() / f"warm-{size}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    if not (folder / "config.json").is_file():
        building = folder.with_name(folder.name + f".building-{os.getpid()}")
        _build_warm(size, building)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(building, folder)
    return folder


def bench_cache() -> Path:
    """$ABLATE_CACHE/bench, else ~/.cache/ablate/bench."""
    base = os.environ.get("ABLATE_CACHE") or Path.home() / ".cache" / "ablate"
    return Path(base) / "bench"


def _torch_version() -> str:
    import torch

    return torch.__version__


def _build_warm(size: str, folder: Path) -> None:
    """The size's seeded initialisation after `WARM_START` steps of the zoo's pretraining
    (its corpus, template and loss), at one thread (the weights depend on the thread count)."""
    import torch

    from ablate.models import load_model
    from ablate.models.catalog import get_recipe
    from ablate.models.pretrain import build_model, train_steps
    from ablate.models.recipe import PretrainSpec
    from ablate.tasks import get_task
    from ablate.tasks.templates import get_template

    w = WARM_START
    spec = PretrainSpec(
        max_steps=w["steps"],
        batch_size=w["batch_size"],
        warmup_steps=w["warmup_steps"],
        lr=w["lr"],
        seed=w["seed"],
    )
    _, tokenizer = load_model(SIZES["0.53M"])
    model = build_model(get_recipe(RECIPE_OF_SIZE[size]).size, tokenizer, w["seed"])
    task = get_task(spec.task, **dict(spec.task_options))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in train_steps(model, tokenizer, task, get_template(spec.template), spec):
            pass
    finally:
        torch.set_num_threads(threads)
    folder.mkdir(parents=True, exist_ok=True)
    model.eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
