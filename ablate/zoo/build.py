"""Build a zoo recipe: pretrain once, checkpoint densely, measure each checkpoint's Pass@k
under the training template, pick each ladder rung by measurement (capability jumps too
steeply for step counts to be reliable), measure the picks under every eval template, save."""

from __future__ import annotations

import json
import platform
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers

from ablate.base.machine import cpu_model
from ablate.models import store
from ablate.models.pretrain import build_model, train_steps
from ablate.models.recipe import Rung, ZooRecipe
from ablate.models.tokenizer import build_char_tokenizer
from ablate.tasks import get_task, synthetic_charset
from ablate.tasks.templates import get_template
from ablate.zoo.align import build_aligned
from ablate.zoo.built import BuildResult, BuiltModel, meta_for
from ablate.zoo.measure import measure_passk

#: progress(step, total_steps, loss, measured_or_None) — the CLI draws it; None = silent.
Progress = Callable[[int, int, float, dict | None], None]


def build_recipe(recipe: ZooRecipe, out_dir: Path, progress: Progress | None = None) -> BuildResult:
    """Build every model of `recipe` into `out_dir/<name>/` (replacing what is there), under the
    recipe's torch thread count (restored afterwards): the weights depend on it."""
    started = time.perf_counter()
    with recipe_threads(recipe):
        env = build_environment(recipe)
        with tempfile.TemporaryDirectory(prefix="ablate-zoo-") as scratch:
            result = _build(recipe, Path(scratch), progress, env)
            _install(result, Path(out_dir))
    result.seconds = round(time.perf_counter() - started, 1)
    _write_curve(result)
    return result


@contextmanager
def recipe_threads(recipe: ZooRecipe) -> Iterator[None]:
    """Run under the recipe's torch intra-op thread count, restoring the caller's after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(recipe.pretrain.threads)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def build_environment(recipe: ZooRecipe) -> dict[str, object]:
    """What besides the recipe decides the weights bit for bit: float kernels differ across
    torch/transformers versions and CPU instruction sets, and reductions across thread counts.
    Recorded in each zoo.json so a rebuild can say why it does not match."""
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu": cpu_model(),
        "threads": torch.get_num_threads(),
    }


def _build(recipe: ZooRecipe, scratch: Path, progress: Progress | None, env: dict) -> BuildResult:
    if recipe.align is not None:
        return build_aligned(recipe, scratch, progress, env)
    spec = recipe.pretrain
    task = get_task(spec.task, seed=spec.seed, **dict(spec.task_options))
    corpus_template = get_template(spec.template)
    tokenizer = build_char_tokenizer(synthetic_charset())
    model = build_model(recipe.size, tokenizer, spec.seed)
    snapshots: dict[int, dict] = {}
    curve: list[dict] = []
    checkpoint_at = recipe.next_checkpoint(0, None)
    for step, loss in train_steps(model, tokenizer, task, corpus_template, spec):
        measured = None
        if recipe.rungs and step == checkpoint_at:
            measured = measure_passk(model, tokenizer, task, corpus_template, recipe.eval)
            snapshots[step] = {k: v.detach().clone() for k, v in model.state_dict().items()}
            curve.append({"step": step, "loss": round(loss, 4), **measured})
            checkpoint_at = recipe.next_checkpoint(step, measured)
        if progress is not None:
            progress(step, spec.max_steps, loss, measured)
        if measured and recipe.stop_at_pass1 and measured["pass1"] >= recipe.stop_at_pass1:
            break
    if not recipe.rungs:
        snapshots[step] = model.state_dict()
        curve.append({"step": step, "loss": round(loss, 4)})
    picks = pick_rungs(recipe.rungs, curve) if recipe.rungs else {recipe.name: (step, True)}
    models = []
    for name, (pick_step, in_band) in picks.items():
        model.load_state_dict(snapshots[pick_step])
        # The training template was measured on the curve already (same weights, same seed).
        known = next((c for c in curve if c["step"] == pick_step and "pass1" in c), None)
        measured = {
            t: _curve_measurement(known)
            if known and t == spec.template
            else measure_passk(model, tokenizer, task, get_template(t), recipe.eval)
            for t in recipe.eval.templates
        }
        meta = {**meta_for(recipe, name, pick_step, measured, in_band), "build_env": env}
        store.save_checkpoint(model, tokenizer, scratch / name, meta)
        digest = store.weights_sha256(scratch / name)
        models.append(BuiltModel(name, pick_step, scratch / name, measured, in_band, digest))
    return BuildResult(recipe=recipe, out_dir=scratch, models=models, curve=curve, env=env)


def _curve_measurement(point: dict) -> dict[str, float]:
    return {k: v for k, v in point.items() if k not in ("step", "loss")}


def pick_rungs(rungs: tuple[Rung, ...], curve: list[dict]) -> dict[str, tuple[int, bool]]:
    """rung -> (step, in_band): the in-band checkpoint nearest the rung's target (earliest on a
    tie); when none is in band, the nearest overall, flagged out of band."""
    picks = {}
    for rung in rungs:
        candidates = [c for c in curve if rung.in_band(c)] or curve
        best = min(candidates, key=lambda c: (rung.distance(c), c["step"]))
        picks[rung.name] = (best["step"], rung.in_band(best))
    return picks


def _install(result: BuildResult, out_dir: Path) -> None:
    """Move the finished folders into place, one rung at a time (never a half-written one)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for built in result.models:
        target = out_dir / built.name
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(built.path), str(target))
        built.path = target
    result.out_dir = out_dir


def _write_curve(result: BuildResult) -> None:
    if result.recipe.rungs:
        record = {
            "recipe_name": result.recipe.name,
            "recipe_hash": result.recipe.content_hash(),
            "build_seconds": result.seconds,
            "build_env": result.env,
            "checkpoints": result.curve,
        }
        path = result.out_dir / f"{result.recipe.name}.curve.json"
        path.write_text(json.dumps(record, indent=2) + "\n")


@dataclass
class CheckRow:
    name: str
    step: int
    reference_step: int | None
    same_weights: bool
    same_measurement: bool
    in_band: bool

    @property
    def ok(self) -> bool:
        return self.same_weights and self.same_measurement and self.in_band


def compare_with(result: BuildResult, reference_dir: Path) -> list[CheckRow]:
    """Each built model against `reference_dir/<name>`: bit-identical weights, identical
    measured Pass@k, and inside its bands."""
    rows = []
    for built in result.models:
        reference = store.read_meta(Path(reference_dir) / built.name) or {}
        rows.append(
            CheckRow(
                name=built.name,
                step=built.step,
                reference_step=reference.get("step"),
                same_weights=reference.get("weights_sha256") == built.weights_sha256,
                same_measurement=reference.get("measured") == built.measured,
                in_band=built.in_band,
            )
        )
    return rows


def environment_differences(result: BuildResult, reference_dir: Path) -> dict[str, tuple]:
    """field -> (reference's, this build's) for every build-environment field that differs
    from the one the reference models recorded ("not recorded" when they predate recording)."""
    here = result.env
    differences: dict[str, tuple] = {}
    for built in result.models:
        reference = store.read_meta(Path(reference_dir) / built.name) or {}
        recorded = reference.get("build_env")
        if recorded is None:
            return {"build_env": ("not recorded", ", ".join(f"{k} {v}" for k, v in here.items()))}
        for key in sorted(set(recorded) | set(here)):
            if recorded.get(key) != here.get(key):
                differences[key] = (recorded.get(key), here.get(key))
    return differences


def check_recipe(
    recipe: ZooRecipe, reference_dir: Path, progress: Progress | None = None
) -> tuple[BuildResult, list[CheckRow], dict[str, tuple]]:
    """Rebuild `recipe` in a scratch folder and compare every model with `reference_dir/<name>`
    (see `compare_with`); also the build-environment fields that differ from the reference's."""
    with tempfile.TemporaryDirectory(prefix="ablate-zoo-check-") as scratch:
        result = build_recipe(recipe, Path(scratch), progress)
        return (
            result,
            compare_with(result, reference_dir),
            environment_differences(result, reference_dir),
        )
