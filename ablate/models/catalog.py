"""The named zoo recipes. Values live here only: `ladder` is the default capability ladder
(shipped prebuilt under ablate/models/zoo/), the `base-*` entries are sizes built on demand."""

from __future__ import annotations

from ablate.base.errors import ConfigError
from ablate.models.recipe import (
    AlignSpec,
    Band,
    ModelSize,
    PassKMeasure,
    PretrainSpec,
    Rung,
    ZooRecipe,
)
from ablate.tasks.templates import MILD_VARIANT, STRONG_VARIANT, TRAINING_TEMPLATE

#: Measured under: the corpus template, a mild variant (changed prefix) and a strong one.
EVAL_TEMPLATES = (TRAINING_TEMPLATE, MILD_VARIANT, STRONG_VARIANT)

LADDER_RUNGS = (
    Rung(
        name="hopeless",
        description="format learned, answers almost never right: RL has no signal",
        bands=(Band(metric="pass8", low=0.0, high=0.05),),
        metric="pass8",
        target=0.03,
    ),
    Rung(
        name="mid",
        description="some groups mixed, most all-wrong",
        bands=(Band(metric="pass8", low=0.45, high=0.75),),
        metric="pass8",
        target=0.6,
    ),
    Rung(
        name="rl_ready",
        description="half the samples right, nearly every problem solvable: RL gains most",
        bands=(Band(metric="pass1", low=0.35, high=0.65), Band(metric="pass8", low=0.9, high=1.0)),
        metric="pass1",
        target=0.5,
    ),
    Rung(
        name="saturated",
        description="mostly right already: little left for RL",
        bands=(Band(metric="pass1", low=0.8, high=1.0),),
        metric="pass1",
        target=1.0,
    ),
)

RECIPES: dict[str, ZooRecipe] = {
    "ladder": ZooRecipe(
        name="ladder",
        description="0.53M Llama, one pretraining run, rungs picked by measured Pass@k",
        size=ModelSize(),
        pretrain=PretrainSpec(max_steps=1200),
        eval=PassKMeasure(templates=EVAL_TEMPLATES),
        rungs=LADDER_RUNGS,
        checkpoint_every=50,
        # In the first measured build Pass@8 went 0.45 -> 0.88 between steps 300 and 350.
        dense_every=10,
        dense_while=Band(metric="pass8", low=0.06, high=0.75),
        stop_at_pass1=0.85,
    ),
    "tail": ZooRecipe(
        name="tail",
        description="0.53M Llama pretrained on the 'tail' layout (mandatory check, answer, then "
        "optional reward-neutral re-checks): where the Dr. GRPO length bias can act",
        size=ModelSize(),
        pretrain=PretrainSpec(task_options=(("layout", "tail"),), max_steps=1200),
        eval=PassKMeasure(templates=(TRAINING_TEMPLATE,)),
        rungs=(
            Rung(
                name="tail_ready",
                description="the 'tail' layout's RL-ready point: half the samples right",
                bands=(
                    Band(metric="pass1", low=0.35, high=0.65),
                    Band(metric="pass8", low=0.85, high=1.0),
                ),
                metric="pass1",
                target=0.5,
            ),
        ),
        checkpoint_every=50,
        dense_every=10,
        dense_while=Band(metric="pass8", low=0.06, high=0.9),
        stop_at_pass1=0.7,
    ),
    "aligned": ZooRecipe(
        name="aligned",
        description="rl_ready after rejection-sampling fine-tuning on its own correct answers: "
        "confident (low entropy), as instruction-tuned models are",
        size=ModelSize(),
        eval=PassKMeasure(templates=EVAL_TEMPLATES),
        align=AlignSpec(source="rl_ready"),
    ),
    "base-0.5m": ZooRecipe(
        name="base-0.5m",
        description="0.53M Llama (hidden 128, 2 layers) pretrained 800 steps",
        size=ModelSize(),
        pretrain=PretrainSpec(max_steps=800),
        eval=PassKMeasure(templates=EVAL_TEMPLATES),
    ),
    "base-4m": ZooRecipe(
        name="base-4m",
        description="4.2M Llama (hidden 256, 4 layers) pretrained 800 steps (slow on CPU)",
        size=ModelSize(hidden=256, intermediate=1024, layers=4, heads=4),
        pretrain=PretrainSpec(max_steps=800),
        eval=PassKMeasure(templates=EVAL_TEMPLATES),
    ),
}

#: Recipes whose models ship prebuilt (ablate/models/zoo/): their names always mean the shipped
#: weights. A local rebuild is not bit-identical across machines, so it never takes the name.
SHIPPED_RECIPES = frozenset({"ladder", "aligned", "tail"})


def get_recipe(name: str) -> ZooRecipe:
    if name not in RECIPES:
        raise ConfigError(f"unknown zoo recipe {name!r}; known: {', '.join(RECIPES)}")
    return RECIPES[name]


def model_names() -> list[str]:
    """Every loadable zoo name: ladder rungs first, then sizes."""
    return [out for recipe in RECIPES.values() for out in recipe.output_names()]


def is_shipped(model_name: str) -> bool:
    """Whether zoo model `model_name` belongs to a shipped recipe."""
    return model_name in model_names() and recipe_of(model_name).name in SHIPPED_RECIPES


def recipe_of(model_name: str) -> ZooRecipe:
    """The recipe that builds zoo model `model_name` (a rung or a size)."""
    for recipe in RECIPES.values():
        if model_name in recipe.output_names():
            return recipe
    raise ConfigError(f"unknown zoo model {model_name!r}; zoo models: {', '.join(model_names())}")
