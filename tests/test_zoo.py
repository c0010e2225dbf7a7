"""The zoo: deterministic builds, rung picking by measurement, the shipped ladder, the CLI."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ablate.base.errors import ConfigError
from ablate.commands.cli import main
from ablate.models import (
    catalog,
    load_model,
    model_location,
    resolve_model_path,
    store,
    weights_hash,
    zoo_path,
)
from ablate.models.catalog import LADDER_RUNGS, RECIPES, get_recipe, recipe_of
from ablate.models.pretrain import build_model, train_steps
from ablate.models.recipe import Band, ModelSize, PassKMeasure, PretrainSpec, Rung, ZooRecipe
from ablate.models.store import SHIPPED_DIR, cache_dir, read_meta, weights_sha256, write_meta
from ablate.models.tokenizer import build_char_tokenizer
from ablate.tasks import get_task, synthetic_charset
from ablate.tasks.templates import MILD_VARIANT, STRONG_VARIANT, TRAINING_TEMPLATE, get_template
from ablate.zoo import build
from ablate.zoo.build import BuildResult, build_recipe, check_recipe, pick_rungs

RUNG_ORDER = ("hopeless", "mid", "rl_ready", "saturated")
EVAL_TEMPLATES = (TRAINING_TEMPLATE, MILD_VARIANT, STRONG_VARIANT)

MICRO_LADDER = ZooRecipe(
    name="micro",
    description="test-only micro ladder",
    size=ModelSize(hidden=32, intermediate=64, layers=1, heads=2),
    pretrain=PretrainSpec(max_steps=4, batch_size=8, warmup_steps=2),
    eval=PassKMeasure(problems=4, max_new_tokens=12, templates=(TRAINING_TEMPLATE, MILD_VARIANT)),
    rungs=LADDER_RUNGS,
    checkpoint_every=2,
)


def micro_weights(seed: int, steps: int = 3) -> dict[str, torch.Tensor]:
    spec = dataclasses.replace(MICRO_LADDER.pretrain, seed=seed, max_steps=steps)
    tokenizer = build_char_tokenizer(synthetic_charset())
    model = build_model(MICRO_LADDER.size, tokenizer, spec.seed)
    task = get_task("arithmetic", layout="pre", seed=0)
    losses = [loss for _, loss in train_steps(model, tokenizer, task, get_template("plain"), spec)]
    assert len(losses) == steps
    return model.state_dict()


def test_training_is_bit_identical_for_a_seed_and_differs_across_seeds():
    torch.set_num_threads(1)
    first, again, other = micro_weights(0), micro_weights(0), micro_weights(1)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not all(torch.equal(first[k], other[k]) for k in first)


def test_micro_ladder_rebuilds_identically(tmp_path):
    result = build_recipe(MICRO_LADDER, tmp_path)
    assert [m.name for m in result.models] == list(RUNG_ORDER)
    assert [c["step"] for c in result.curve] == [2, 4]
    meta = read_meta(tmp_path / "mid")
    assert meta["recipe_hash"] == MICRO_LADDER.content_hash()
    assert set(meta["measured"]) == {TRAINING_TEMPLATE, MILD_VARIANT}
    assert meta["weights_sha256"] == weights_sha256(tmp_path / "mid")
    curve = json.loads((tmp_path / "micro.curve.json").read_text())
    assert [c["step"] for c in curve["checkpoints"]] == [2, 4]
    assert meta["build_env"]["threads"] == 1 and meta["build_env"]["torch"] == torch.__version__
    _, rows, differences = check_recipe(MICRO_LADDER, tmp_path)
    assert all(r.same_weights and r.same_measurement and r.step == r.reference_step for r in rows)
    assert differences == {}


def test_rungs_are_picked_by_measurement_not_step():
    curve = [
        {"step": 100, "pass1": 0.00, "pass8": 0.02},
        {"step": 200, "pass1": 0.01, "pass8": 0.035},
        {"step": 300, "pass1": 0.15, "pass8": 0.58},
        {"step": 350, "pass1": 0.30, "pass8": 0.88},
        {"step": 400, "pass1": 0.47, "pass8": 0.97},
        {"step": 450, "pass1": 0.62, "pass8": 0.99},
        {"step": 500, "pass1": 0.84, "pass8": 1.00},
        {"step": 550, "pass1": 0.81, "pass8": 1.00},
    ]
    picks = pick_rungs(LADDER_RUNGS, curve)
    assert picks == {
        "hopeless": (200, True),
        "mid": (300, True),
        "rl_ready": (400, True),
        "saturated": (500, True),
    }
    no_saturated = pick_rungs(LADDER_RUNGS, curve[:4])
    assert no_saturated["saturated"] == (350, False)


def test_recipe_hash_is_stable_and_sensitive():
    ladder = get_recipe("ladder")
    assert ladder.content_hash() == get_recipe("ladder").content_hash()
    changed = dataclasses.replace(ladder, pretrain=dataclasses.replace(ladder.pretrain, lr=2e-3))
    assert changed.content_hash() != ladder.content_hash()
    assert recipe_of("rl_ready") is ladder and recipe_of("base-4m") is RECIPES["base-4m"]
    assert ladder.eval.templates == EVAL_TEMPLATES


def test_shipped_ladder_reloads_offline_and_is_in_its_bands(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))  # no cache build shadows the shipped one
    ladder = get_recipe("ladder")
    pass8 = []
    for name in RUNG_ORDER:
        folder = SHIPPED_DIR / name
        meta = read_meta(folder)
        assert meta["recipe_hash"] == ladder.content_hash(), "shipped ladder is stale: rebuild"
        assert meta["in_band"] and meta["weights_sha256"] == weights_sha256(folder)
        assert zoo_path(name) == folder
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
        text = "Question: 1 + 2\nAnswer: 1+2=3;#### 3"
        assert tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True) == text
        assert model.num_parameters() < 0.6e6
        pass8.append(meta["measured"][TRAINING_TEMPLATE]["pass8"])
    assert pass8 == sorted(pass8) and pass8[0] <= 0.05 < pass8[1]


def test_other_templates_lower_the_shipped_rungs():
    """The corpus uses `plain` only: both variants fall far below it, the strong one to ~0."""
    for name in ("mid", "rl_ready", "saturated"):
        measured = read_meta(SHIPPED_DIR / name)["measured"]
        plain, mild, strong = (measured[t]["pass8"] for t in EVAL_TEMPLATES)
        assert max(mild, strong) < plain / 2
    saturated = read_meta(SHIPPED_DIR / "saturated")["measured"]
    plain, mild, strong = (saturated[t]["pass8"] for t in EVAL_TEMPLATES)
    assert strong <= 0.05 < mild < plain


def test_load_model_by_rung_name(monkeypatch, tmp_path):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    model, tokenizer = load_model("rl_ready")
    assert model.config.name_or_path == str(SHIPPED_DIR / "rl_ready")
    assert not model.training and tokenizer.eos_token_id == 2


def test_cli_list_shows_rungs_and_measurements(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "80")  # a default terminal: no column head may be cut
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))  # sizes: not built
    assert main(["zoo", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in RUNG_ORDER) and "not built" in out
    rl_ready = read_meta(SHIPPED_DIR / "rl_ready")["measured"][TRAINING_TEMPLATE]
    assert f"{rl_ready['pass1']:.3f}/{rl_ready['pass8']:.2f}" in out
    head = next(line for line in out.splitlines() if line.startswith("model "))
    assert head.split() == ["model", "recipe", "step", "where", "weights", *EVAL_TEMPLATES]
    # each model not built is explained once, with the command that builds it
    explained = [line for line in out.splitlines() if "(not built): " in line]
    assert any(line.startswith("base-4m (not built): 4.2M Llama") for line in explained)
    assert all(f"`ablate zoo build {line.split()[0]}`" in line for line in explained)


def test_cli_build_then_check_a_micro_recipe(capsys, monkeypatch, tmp_path):
    any_checkpoint = Rung(
        name="any",
        description="",
        bands=(Band(metric="pass8", low=0.0, high=1.0),),
        metric="pass8",
        target=0.0,
    )
    micro = dataclasses.replace(MICRO_LADDER, name="micro-cli", rungs=(any_checkpoint,))
    monkeypatch.setitem(catalog.RECIPES, "micro-cli", micro)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["zoo", "build", "micro-cli", "--out", str(tmp_path)]) == 0
    assert read_meta(tmp_path / "any")["recipe_hash"] == micro.content_hash()
    assert main(["zoo", "build", "micro-cli", "--out", str(tmp_path), "--check"]) == 0
    assert "same weights" in capsys.readouterr().out
    (tmp_path / "any" / "zoo.json").write_text("{}")  # a reference that no longer matches
    assert main(["zoo", "build", "micro-cli", "--out", str(tmp_path), "--check"]) == 1


def test_cli_unknown_recipe_is_one_line(capsys):
    assert main(["zoo", "build", "nope"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown zoo model 'nope'")


def fake_cache_build(recipe: ZooRecipe, name: str, source=SHIPPED_DIR / "rl_ready"):
    """A loadable cache build of `name` under $ABLATE_CACHE with other weights than `source`."""
    folder = cache_dir(recipe) / name
    shutil.copytree(source, folder)
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # last byte of the last tensor: still a valid safetensors file
    weights.write_bytes(bytes(data))
    write_meta(folder, {**read_meta(source), "name": name, "recipe_name": recipe.name})
    return folder


def test_a_shipped_name_resolves_to_the_shipped_folder_even_with_a_cache_build(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    cached = fake_cache_build(get_recipe("ladder"), "rl_ready")
    shipped = SHIPPED_DIR / "rl_ready"
    assert zoo_path("rl_ready") == shipped and resolve_model_path("rl_ready") == shipped
    assert model_location("rl_ready") == ("shipped", shipped.resolve())
    assert weights_hash("rl_ready") == read_meta(shipped)["weights_sha256"]
    # The cache build stays loadable, but only when asked for by its path.
    assert model_location(cached) == ("cache", cached.resolve())
    assert weights_hash(cached) != weights_hash("rl_ready")


def test_a_name_that_does_not_ship_resolves_to_its_cache_build(monkeypatch, tmp_path):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match=r"ablate zoo build base-0\.5m"):
        zoo_path("base-0.5m")
    cached = fake_cache_build(get_recipe("base-0.5m"), "base-0.5m")
    assert zoo_path("base-0.5m") == cached
    assert model_location("base-0.5m") == ("cache", cached.resolve())


def test_a_missing_shipped_rung_is_an_error_not_its_cache_build(monkeypatch, tmp_path):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    fake_cache_build(get_recipe("ladder"), "mid")
    monkeypatch.setattr(store, "SHIPPED_DIR", tmp_path / "no-shipped-zoo")
    with pytest.raises(ConfigError, match="missing from this install"):
        zoo_path("mid")


def test_build_runs_under_the_recipe_threads_and_restores_the_callers(monkeypatch, tmp_path):
    seen = []

    def fake_build(recipe, scratch, progress, env):
        seen.append((torch.get_num_threads(), env["threads"]))
        if len(seen) > 1:
            raise RuntimeError("build failed")
        return BuildResult(recipe=recipe, out_dir=scratch, models=[], env=env)

    monkeypatch.setattr(build, "_build", fake_build)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        result = build_recipe(MICRO_LADDER, tmp_path)
        assert seen == [(1, 1)] and result.env["threads"] == 1
        assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError, match="build failed"):
            build_recipe(MICRO_LADDER, tmp_path)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_cli_list_and_show_give_the_weights_hash_and_where_a_name_resolves(
    capsys, monkeypatch, tmp_path
):
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    cached = fake_cache_build(get_recipe("ladder"), "rl_ready")
    digest = read_meta(SHIPPED_DIR / "rl_ready")["weights_sha256"]
    assert main(["zoo", "list"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip("│ ").startswith("rl_ready"))
    assert digest[:8] in row and "shipped*" in row.split()
    assert f"* rl_ready: a cache build at {cached} loads only by that path" in out
    assert main(["zoo", "show", "rl_ready"]) == 0
    out = capsys.readouterr().out
    assert digest in out and f"rl_ready: shipped {SHIPPED_DIR / 'rl_ready'}" in out
    assert main(["zoo", "show", str(cached)]) == 0
    out = capsys.readouterr().out
    assert "cache" in out and weights_sha256(cached) in out and digest not in out


def test_cli_list_fits_80_columns_with_a_cache_build_and_an_older_recipe(
    capsys, monkeypatch, tmp_path
):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    fake_cache_build(get_recipe("ladder"), "rl_ready")
    monkeypatch.setattr(store, "is_current", lambda path, recipe: path.name != "mid")
    assert main(["zoo", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [n for recipe in catalog.RECIPES.values() for n in recipe.output_names()]
    header = next(i for i, line in enumerate(lines) if line.startswith("model "))
    rows = lines[header + 1 : header + 1 + len(names)]
    # one line per model, in order, and nothing wrapped onto a line of its own after them
    assert [row.split()[0] for row in rows] == names
    assert not lines[header + 1 + len(names)].startswith(" ")
    assert all(len(line) <= 80 for line in lines[: header + 1 + len(names)])
    cells = {row.split()[0]: row.split() for row in rows}
    assert cells["rl_ready"][3] == "shipped*" and cells["mid"][3] == "shipped!"
    assert "! mid: built from an older version of recipe ladder" in lines


def test_cli_build_of_a_shipped_recipe_says_the_shipped_one_wins_and_if_it_matched(
    capsys, monkeypatch, tmp_path
):
    micro = dataclasses.replace(MICRO_LADDER, name="micro-shipped")
    monkeypatch.setitem(catalog.RECIPES, "micro-shipped", micro)
    monkeypatch.setattr(catalog, "SHIPPED_RECIPES", frozenset({"micro-shipped"}))
    monkeypatch.setattr(store, "SHIPPED_DIR", tmp_path / "shipped")
    monkeypatch.setenv("COLUMNS", "250")
    build_recipe(micro, tmp_path / "shipped")
    assert main(["zoo", "build", "micro-shipped", "--out", str(tmp_path / "again")]) == 0
    out = capsys.readouterr().out
    assert "still wins under the names hopeless, mid, rl_ready, saturated" in out
    assert "bit-identical to" in out and "NOT" not in out
    flat = " ".join(out.split())  # rich wraps long lines
    assert f"Load this build by its path, e.g. --model {tmp_path / 'again' / 'saturated'}" in flat
    meta = read_meta(tmp_path / "shipped" / "mid")
    write_meta(
        tmp_path / "shipped" / "mid",
        {**meta, "weights_sha256": "0" * 64, "build_env": {**meta["build_env"], "torch": "0.1"}},
    )
    assert main(["zoo", "build", "micro-shipped", "--out", str(tmp_path / "again")]) == 0
    out = capsys.readouterr().out
    assert "NOT bit-identical" in out and "1 of 4 models differ" in out
    assert "environment torch: reference 0.1" in out


@pytest.mark.slow
def test_default_ladder_rebuilds_in_ordered_bands_and_bit_identically_where_it_can():
    """The real build (~12-25 min): rungs in band and ordered by Pass@8 anywhere; the same
    weights and Pass@k as shipped only in the environment the shipped ladder recorded (float
    kernels differ by CPU: on an AMD EPYC with AVX512 it picks steps 150/340/450/650, not
    100/330/440/640)."""
    result, rows, differences = check_recipe(get_recipe("ladder"), SHIPPED_DIR)
    assert all(row.in_band for row in rows), rows
    by_name = {m.name: m.measured[TRAINING_TEMPLATE] for m in result.models}
    pass8 = [by_name[name]["pass8"] for name in RUNG_ORDER]
    pass1 = [by_name[name]["pass1"] for name in RUNG_ORDER]
    assert pass8 == sorted(pass8) and pass8[0] <= 0.05 and pass8[2] >= 0.9
    assert pass1 == sorted(pass1) and pass1[3] > 0.8
    if differences:
        pytest.skip(f"bit-identity not checkable here: build environment differs {differences}")
    assert all(row.ok for row in rows), rows
