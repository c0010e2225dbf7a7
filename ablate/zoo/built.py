"""What a zoo build produced: each built model (`BuiltModel`), the whole result
(`BuildResult`) and the metadata saved beside a model's weights (`meta_for`). Shared by the
pretraining build (`build`) and the aligned rung's (`align`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ablate.models.recipe import ZooRecipe


@dataclass
class BuiltModel:
    name: str
    step: int
    path: Path
    measured: dict[str, dict[str, float]]  # template -> {"pass1", "pass8", "format_ok"}
    in_band: bool
    weights_sha256: str = ""  # kept here: a --check build's folder is gone once it is compared


@dataclass
class BuildResult:
    recipe: ZooRecipe
    out_dir: Path
    models: list[BuiltModel]
    curve: list[dict] = field(default_factory=list)  # per checkpoint: step, loss, pass1, pass8
    seconds: float = 0.0
    env: dict = field(default_factory=dict)  # build_environment(): what else fixes the weights


def meta_for(recipe: ZooRecipe, name: str, step: int, measured: dict, in_band: bool) -> dict:
    rung = next((r for r in recipe.rungs if r.name == name), None)
    return {
        "name": name,
        "description": rung.description if rung else recipe.description,
        "recipe_name": recipe.name,
        "recipe_hash": recipe.content_hash(),
        "recipe": recipe.as_dict(),
        "step": step,
        "measured": measured,
        "in_band": in_band,
    }
