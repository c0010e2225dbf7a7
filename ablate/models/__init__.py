"""Base models: the offline character tokenizer, the tiny pretrained zoo, and `load_model`.

`load_model("rl_ready")` loads a zoo model (a ladder rung or a size); `load_model(path)` loads
any local Hugging Face checkpoint folder. Both go through AutoModelForCausalLM /
AutoTokenizer with the hub switched off, so nothing is ever downloaded.

Floor 3, below the rollout engines, which run the fused decoder (`fast_llama`, `decode_cache`);
building a zoo model measures it with an engine, so the build is `ablate.zoo`, above them."""

from __future__ import annotations

import os
from pathlib import Path

from ablate.base.errors import ConfigError
from ablate.models.store import SHIPPED_DIR, built_locations, cache_root, weights_sha256


def zoo_names() -> list[str]:
    """Every zoo model name (built or not): the ladder rungs, then the sizes."""
    from ablate.models.catalog import model_names

    return model_names()


def zoo_path(name: str) -> Path:
    """The folder zoo model `name` means; ConfigError when unknown or not built yet. A shipped
    recipe's name is always its shipped folder: a local build of it is used only by path."""
    from ablate.models.catalog import SHIPPED_RECIPES, recipe_of

    recipe = recipe_of(name)
    found = built_locations(recipe, name)
    if recipe.name in SHIPPED_RECIPES:
        found = [(where, path) for where, path in found if where == "shipped"]
        if not found:
            raise ConfigError(
                f"shipped zoo model {name!r} is missing from this install ({SHIPPED_DIR / name}):"
                f" reinstall ablate; a local build of {recipe.name!r} loads only by its folder path"
            )
    if not found:
        raise ConfigError(
            f"zoo model {name!r} is not built yet: run `ablate zoo build {recipe.name}`"
        )
    return found[0][1]


def resolve_model_path(path_or_zoo_name: str | os.PathLike) -> Path:
    """A zoo name's folder, or a local checkpoint folder (it must hold a config.json)."""
    text = os.fspath(path_or_zoo_name)
    if text in zoo_names():
        return zoo_path(text)
    path = Path(text).expanduser()
    if (path / "config.json").is_file():
        return path
    raise ConfigError(
        f"{text!r} is neither a zoo model nor a local Hugging Face checkpoint folder "
        f"(with a config.json); zoo models: {', '.join(zoo_names())}"
    )


def model_location(path_or_zoo_name: str | os.PathLike) -> tuple[str, Path]:
    """(where, folder): where is "shipped" or "cache" (the zoo folders, by name or by path) or
    "path" (any other local checkpoint)."""

    path = resolve_model_path(path_or_zoo_name).resolve()
    for where, root in (("shipped", SHIPPED_DIR), ("cache", cache_root())):
        if path.is_relative_to(root.resolve()):
            return where, path
    return "path", path


def weights_hash(path_or_zoo_name: str | os.PathLike) -> str:
    """sha256 (hex) of the weights a zoo name or checkpoint folder resolves to: its
    `*.safetensors` files in name order (else its `*.bin` files). Computed once per process
    per folder while the files' sizes and mtimes stay the same; ConfigError when the name or
    folder is unknown or holds no weights."""

    return weights_sha256(resolve_model_path(path_or_zoo_name))


def load_model(path_or_zoo_name: str | os.PathLike):
    """(model, tokenizer) for a zoo name or a local checkpoint folder, loaded offline, in
    eval mode, fp32 on the CPU."""
    path = resolve_model_path(path_or_zoo_name)
    # local_files_only already forbids downloads; the variable also covers code it calls.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    model.eval()
    return model, tokenizer


def load_tokenizer(path_or_zoo_name: str | os.PathLike):
    """The tokenizer of a zoo name or a local checkpoint folder alone (no weights), offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        resolve_model_path(path_or_zoo_name), local_files_only=True
    )


__all__ = [
    "load_model",
    "load_tokenizer",
    "model_location",
    "resolve_model_path",
    "weights_hash",
    "zoo_names",
    "zoo_path",
]
