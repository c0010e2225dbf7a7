"""The package's layout (`devtools/architecture.py`): every module on a floor, imports only
downward (inside functions and for type checking too), no import circles, no module over the
line cap, and one RL step that calls each stage once, in order."""

from __future__ import annotations

from pathlib import Path

import pytest

import ablate
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.stages.batch import PromptStream
from ablate.testing import zoo_model_built
from ablate.trial import TrainState, setup_trial
from devtools import architecture as arch

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def edges() -> list[arch.Edge]:
    return arch.import_edges(ROOT)


def test_no_import_circles(edges):
    assert arch.circles(list(arch.module_names(ROOT)), edges) == []


def test_no_import_reaches_up_a_floor(edges):
    assert [f"{e.source}:{e.line} -> {e.target}" for e in arch.upward(edges)] == []


def test_every_module_is_on_a_floor_and_under_the_line_caps():
    assert arch.unplaced(list(arch.module_names(ROOT))) == []
    assert arch.long_modules(ROOT) == {}
    assert arch.long_functions(ROOT) == {}


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / "ablate" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checks_see_circles_and_upward_imports_wherever_they_hide(tmp_path, monkeypatch):
    _write(
        tmp_path,
        {
            "__init__.py": "",
            "base/__init__.py": "",
            "base/records.py": "def f():\n    from ablate.study.runner import go\n",  # 0 -> 6
            "study/__init__.py": "",
            "study/runner.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from ablate.base.records import f\n",  # type-only: closes the circle
            "factors/__init__.py": "",
            "factors/spec.py": "from ablate.base import records\n",  # downward: fine
            "newthing.py": "",  # a flat module: on no floor
        },
    )
    edges = arch.import_edges(tmp_path)
    kinds = {(e.source, e.target): e.kind for e in edges}
    assert kinds == {
        ("ablate.base.records", "ablate.study.runner"): "function",
        ("ablate.study.runner", "ablate.base.records"): "type",
        ("ablate.factors.spec", "ablate.base.records"): "module",
    }
    modules = list(arch.module_names(tmp_path))
    assert arch.circles(modules, edges) == [["ablate.base.records", "ablate.study.runner"]]
    assert [(e.source, e.target) for e in arch.upward(edges)] == [
        ("ablate.base.records", "ablate.study.runner")
    ]
    assert arch.unplaced(modules) == ["ablate.newthing"]
    (tmp_path / "ablate" / "factors" / "spec.py").write_text("def f():\n" + "    x = 1\n" * 400)
    assert arch.long_modules(tmp_path) == {"ablate.factors.spec": 401}
    assert arch.long_functions(tmp_path) == {"ablate.factors.spec.f": 401}


def test_a_floor_is_a_package_prefix():
    assert arch.floor_of("ablate.base.store.port") == 0
    assert arch.floor_of("ablate.report.stats.crossed") == 7
    assert arch.floor_of("ablate") == 8  # the package's __init__
    assert arch.floor_of("ablate.runner") is None  # flat modules are gone for good
    assert arch.floor_of("ablate.basement.x") is None  # a prefix is a whole package name


def _trace(algorithm) -> list[tuple[str, str]]:
    """The ablate calls one real RL step's module makes, in order (the RL-ready rung, whose
    groups are mixed, so dynamic sampling keeps some)."""
    spec = TrialSpec(
        algorithm=algorithm,
        model="rl_ready",
        seed=0,
        budget=Budget(max_steps=2, prompts_per_step=4, group_size=4, max_new_tokens=48),
        eval=EvalSpec(max_problems=2, n_samples=2, ks=(1, 2)),
    )
    s = setup_trial(spec)
    stream = PromptStream(s.task.problems("train"), spec.rng_seed)
    from ablate.trial import step

    return arch.step_calls(lambda: step.rl_step(s, TrainState(), stream), step.__name__)


@pytest.mark.skipif(not zoo_model_built("rl_ready"), reason="zoo not available")
@pytest.mark.parametrize("preset", ["grpo", "ppo", "dapo"])
def test_an_rl_step_calls_each_stage_in_order_and_climbs_back_at_most_twice(preset):
    algorithm = ablate.baseline(preset)
    calls = _trace(algorithm)
    stages = [arch.stage_of(module) for module, _ in calls]
    reached = {arch.STAGES[s][0] for s in stages if s is not None}
    assert reached == {name for name, _ in arch.STAGES}  # every stage ran
    climbs = arch.climbs_back(calls)
    assert len(climbs) <= 2, climbs
    # the one climb is the engine following the new weights
    assert all("sync_weights" in c for c in climbs), climbs


def test_the_climb_count_sees_a_step_that_re_enters_a_stage():
    calls = [
        ("ablate.stages.batch", "collect_batch"),
        ("ablate.stages.update", "frozen_pass"),
        ("ablate.stages.shaping", "shape"),  # back from update
        ("ablate.base.records", "all_samples"),  # data: no stage
        ("ablate.stages.compute", "step_compute"),
        ("ablate.stages.forward", "forward_tokens"),  # back from account
    ]
    assert len(arch.climbs_back(calls)) == 2
