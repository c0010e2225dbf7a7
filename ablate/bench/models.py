"""The model folders both tools load, so that the weights they compare on are literally the same.

0.53M is the shipped zoo model `rl_ready`. No 4.2M zoo model is built by default (pretraining it
is slow on a CPU), so the 4.2M model is the zoo's 4.2M size (recipe `base-4m`) at its seeded
initialisation, with the zoo tokenizer, saved into a scratch folder. Completion lengths are forced
to a fixed T in every benchmark, so random weights cost exactly what trained ones would.
"""

from __future__ import annotations

from pathlib import Path

from ablate.errors import ConfigError

#: Benchmark size -> zoo model shipped at that size (None: built from the zoo recipe's size).
SIZES: dict[str, str | None] = {"0.53M": "rl_ready", "4.2M": None}
#: The zoo recipe whose ModelSize a size without a shipped model is built with.
RECIPE_OF_SIZE = {"4.2M": "base-4m"}
SEED = 0


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
