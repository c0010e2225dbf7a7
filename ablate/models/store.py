"""Where zoo models live on disk and what each folder records. A built model is an ordinary
Hugging Face checkpoint folder (config.json, model.safetensors, tokenizer files) plus
`zoo.json`: its recipe, recipe hash, training step, weights hash, measured Pass@k and the
environment it was built in.

A name resolves to one set of weights: a shipped recipe's names always mean the shipped
folders; a cache build is used under a name only when that name ships nowhere."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path

from ablate.base.errors import ConfigError
from ablate.models.recipe import ZooRecipe

#: The default ladder ships here, one folder per rung.
SHIPPED_DIR = Path(__file__).parent / "zoo"
ZOO_META = "zoo.json"
_CHUNK = 1 << 20
_RACY_NS = 2_000_000_000

# resolved folder -> (signature of its weight files, sha256): hashing a multi-GB checkpoint
# once per process, yet never serving a stale hash after a file is rewritten.
_HASHES: dict[str, tuple[tuple, str]] = {}
_HASHES_LOCK = threading.Lock()


def cache_root() -> Path:
    """$ABLATE_CACHE/zoo, else ~/.cache/ablate/zoo."""
    base = os.environ.get("ABLATE_CACHE") or Path.home() / ".cache" / "ablate"
    return Path(base) / "zoo"


def cache_dir(recipe: ZooRecipe) -> Path:
    """The cache folder of one recipe, named by its content hash."""
    return cache_root() / f"{recipe.name}-{recipe.content_hash()[:16]}"


def weights_files(model_dir: Path) -> list[Path]:
    """The files holding a checkpoint's weights: every `*.safetensors` in name order, else
    every `*.bin` (older PyTorch checkpoints; only `pytorch_model*.bin` when there are such,
    since a Trainer folder also holds training_args.bin); ConfigError when there are none."""
    model_dir = Path(model_dir)
    for pattern in ("*.safetensors", "pytorch_model*.bin", "*.bin"):
        files = sorted(p for p in model_dir.glob(pattern) if p.is_file())
        if files:
            return files
    raise ConfigError(f"{model_dir} holds no weights (*.safetensors or *.bin)")


def weights_sha256(model_dir: Path) -> str:
    """sha256 (hex) of the folder's weight files concatenated in name order: for a one-file
    checkpoint, the sha256 of that file. Cached per process by (path, sizes, mtimes)."""
    files = weights_files(model_dir)
    key = str(Path(model_dir).resolve())
    stats = [f.stat() for f in files]
    signature = tuple(
        (f.name, s.st_size, s.st_mtime_ns, s.st_ino) for f, s in zip(files, stats, strict=True)
    )
    with _HASHES_LOCK:
        cached = _HASHES.get(key)
    if cached is not None and cached[0] == signature:
        return cached[1]
    digest = _hash_files(files)
    # A file written within the filesystem's timestamp granularity of now could be rewritten
    # (same size) without its mtime moving: such a hash is not cached (git's "racy" rule).
    if time.time_ns() - max(s.st_mtime_ns for s in stats) > _RACY_NS:
        with _HASHES_LOCK:
            _HASHES[key] = (signature, digest)
    return digest


def _hash_files(files: list[Path]) -> str:
    # Safetensors (and zip-based .bin) files state their own lengths, so concatenating shards
    # cannot make two different checkpoints collide.
    digest = hashlib.sha256()
    for path in files:
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


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
    """(where, folder) for each existing build of `model_name`, the shipped copy first: it is
    what the name means. A cache build follows; `zoo_path` uses it only for a name of a recipe
    that does not ship (see `catalog.SHIPPED_RECIPES`)."""
    found = []
    shipped = SHIPPED_DIR / model_name
    if (read_meta(shipped) or {}).get("recipe_name") == recipe.name:
        found.append(("shipped", shipped))
    cached = cache_dir(recipe) / model_name
    if (cached / ZOO_META).is_file():
        found.append(("cache", cached))
    return found


def is_current(model_dir: Path, recipe: ZooRecipe) -> bool:
    """True when the folder was built from exactly this recipe (same content hash)."""
    meta = read_meta(model_dir) or {}
    return meta.get("recipe_hash") == recipe.content_hash()
