"""Where zoo models live on disk and what each folder records. A built model is an ordinary
Hugging Face checkpoint folder (config.json, model.safetensors, tokenizer files) plus
`zoo.json`: its recipe, recipe hash, training step, weights hash and measured Pass@k."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ablate.models.recipe import ZooRecipe

#: The default ladder ships here, one folder per rung.
SHIPPED_DIR = Path(__file__).parent / "zoo"
ZOO_META = "zoo.json"
WEIGHTS_FILE = "model.safetensors"


def cache_root() -> Path:
    """$ABLATE_CACHE/zoo, else ~/.cache/ablate/zoo."""
    base = os.environ.get("ABLATE_CACHE") or Path.home() / ".cache" / "ablate"
    return Path(base) / "zoo"


def cache_dir(recipe: ZooRecipe) -> Path:
    """The cache folder of one recipe, named by its content hash."""
    return cache_root() / f"{recipe.name}-{recipe.content_hash()[:16]}"


def weights_sha256(model_dir: Path) -> str:
    return hashlib.sha256((Path(model_dir) / WEIGHTS_FILE).read_bytes()).hexdigest()


def read_meta(model_dir: Path) -> dict | None:
    path = Path(model_dir) / ZOO_META
    return json.loads(path.read_text()) if path.is_file() else None


def write_meta(model_dir: Path, meta: dict) -> None:
    (Path(model_dir) / ZOO_META).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def save_checkpoint(model, tokenizer, model_dir: Path, meta: dict) -> None:
    """Save weights (safetensors), config, tokenizer and `zoo.json` into `model_dir`."""
    from transformers.utils import logging as hf_logging

    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    hf_logging.disable_progress_bar()  # the build reports its own progress
    model.save_pretrained(model_dir, safe_serialization=True)
    tokenizer.save_pretrained(model_dir)
    write_meta(model_dir, {**meta, "weights_sha256": weights_sha256(model_dir)})


def built_locations(recipe: ZooRecipe, model_name: str) -> list[tuple[str, Path]]:
    """(where, folder) for each existing build of `model_name`: a cache build of the current
    recipe first (it is what the code now builds), then the shipped copy."""
    found = []
    cached = cache_dir(recipe) / model_name
    if (cached / ZOO_META).is_file():
        found.append(("cache", cached))
    shipped = SHIPPED_DIR / model_name
    if (read_meta(shipped) or {}).get("recipe_name") == recipe.name:
        found.append(("shipped", shipped))
    return found


def is_current(model_dir: Path, recipe: ZooRecipe) -> bool:
    """True when the folder was built from exactly this recipe (same content hash)."""
    meta = read_meta(model_dir) or {}
    return meta.get("recipe_hash") == recipe.content_hash()
