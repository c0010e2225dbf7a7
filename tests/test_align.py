"""The aligned rung: rejection-sampling fine-tuning on the model's own correct answers."""

from __future__ import annotations

import dataclasses

import pytest

from ablate.models import load_model, zoo_path
from ablate.models.catalog import RECIPES
from ablate.models.recipe import AlignSpec, PassKMeasure
from ablate.models.store import SHIPPED_DIR, read_meta, weights_sha256
from ablate.tasks import get_task
from ablate.tasks.templates import TRAINING_TEMPLATE, get_template
from ablate.testing import zoo_model_built
from ablate.zoo.align import build_aligned, own_correct_answers

pytestmark = pytest.mark.skipif(not zoo_model_built("rl_ready"), reason="zoo not available")


def test_shipped_aligned_rung_is_current_and_more_confident_than_its_source():
    meta = read_meta(SHIPPED_DIR / "aligned")
    assert meta["recipe_hash"] == RECIPES["aligned"].content_hash(), "stale: rebuild aligned"
    assert meta["weights_sha256"] == weights_sha256(SHIPPED_DIR / "aligned")
    assert zoo_path("aligned") == SHIPPED_DIR / "aligned"
    source = read_meta(SHIPPED_DIR / meta["source"])["measured"][TRAINING_TEMPLATE]
    mine = meta["measured"][TRAINING_TEMPLATE]
    # confident: sharper (entropy well below the source's), right more often, no wider reach
    assert meta["entropy"] < 0.75 * meta["source_entropy"]
    assert mine["pass1"] > source["pass1"] + 0.1
    assert mine["pass8"] <= source["pass8"] + 0.05


def test_kept_answers_are_exactly_the_verified_correct_ones():
    model, tokenizer = load_model("rl_ready")
    task, template = get_task("arithmetic", seed=0, layout="pre"), get_template("plain")
    spec = AlignSpec(problems=6, samples=3)
    kept, sampled = own_correct_answers(model, tokenizer, task, template, spec, round_=1)
    assert sampled == 18 and 0 < len(kept) < 18
    by_prompt = {template.render(p.question): p for p in task.problems("train")}
    assert all(task.verify(by_prompt[prompt], text, template).correct for prompt, text in kept)
    again, _ = own_correct_answers(model, tokenizer, task, template, spec, round_=1)
    assert again == kept  # seeded


def test_a_tiny_align_build_records_rounds_and_entropies(tmp_path):
    recipe = dataclasses.replace(
        RECIPES["aligned"],
        align=AlignSpec(problems=8, samples=4, steps=2, batch_size=4, rounds=1),
        eval=PassKMeasure(problems=4, samples=2, templates=(TRAINING_TEMPLATE,)),
    )
    result = build_aligned(recipe, tmp_path, None, {})
    (built,) = result.models
    meta = read_meta(built.path)
    assert meta["source"] == "rl_ready" and meta["recipe_hash"] == recipe.content_hash()
    assert [r["round"] for r in meta["rounds"]] == [1]
    assert 0 < meta["rounds"][0]["kept"] <= meta["rounds"][0]["sampled"] == 32
    assert meta["entropy"] > 0 and meta["source_entropy"] > 0
    assert set(meta["measured"]) == {TRAINING_TEMPLATE}


def test_shipped_tail_rung_is_current_and_writes_the_tail_layout():
    from ablate.models.catalog import RECIPES

    meta = read_meta(SHIPPED_DIR / "tail_ready")
    assert meta["recipe_hash"] == RECIPES["tail"].content_hash(), "stale: rebuild tail"
    assert meta["in_band"] and meta["weights_sha256"] == weights_sha256(SHIPPED_DIR / "tail_ready")
    assert dict(RECIPES["tail"].pretrain.task_options) == {"layout": "tail"}
