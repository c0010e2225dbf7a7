"""The package's layout (`devtools/architecture.py`): every module on a floor, imports only
downward (inside functions and for type checking too), no import circles between modules nor
between packages (whatever floor they share; devtools' too), no module over the line cap, and
one RL step that calls each stage once, in order (`devtools/step_trace.py`)."""

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
from devtools import step_trace

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def edges() -> list[arch.Edge]:
    return arch.import_edges(ROOT)


def test_no_import_circles(edges):
    assert arch.circles(list(arch.module_names(ROOT)), edges) == []


def test_no_package_imports_another_that_imports_it_back(edges):
    assert arch.package_circles(edges) == []


def test_the_developer_tools_have_no_import_circles():
    edges = arch.import_edges(ROOT, "devtools")
    assert arch.circles(list(arch.module_names(ROOT, "devtools")), edges) == []
    assert arch.package_circles(edges) == []


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


def test_the_check_sees_a_package_circle_on_a_shared_floor(tmp_path, monkeypatch):
    """Two packages on one floor may import each other's modules without a module circle and
    without reaching up: only the package graph shows the loop."""
    monkeypatch.setattr(arch, "PREFIXES", {**arch.PREFIXES, "ablate.left": 3, "ablate.right": 3})
    _write(
        tmp_path,
        {
            "__init__.py": "",
            "left/__init__.py": "",
            "left/a.py": "from ablate.right import b\n",
            "left/c.py": "",
            "right/__init__.py": "",
            "right/b.py": "",
            "right/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from ablate.left.c import x\n",  # type-only still draws the arrow back
        },
    )
    edges = arch.import_edges(tmp_path)
    assert arch.circles(list(arch.module_names(tmp_path)), edges) == []
    assert arch.upward(edges) == []
    assert arch.package_arrows(edges) == {
        ("ablate.left", "ablate.right"): 1,
        ("ablate.right", "ablate.left"): 1,
    }
    assert arch.package_circles(edges) == [["ablate.left", "ablate.right"]]
    assert "  ablate.left <-> ablate.right" in arch.report(tmp_path)
    assert arch.package_graph(edges) == [
        "ablate.left -> ablate.right  1  across 3",
        "ablate.right -> ablate.left  1  across 3",
    ]


def test_the_check_reads_a_tool_circle_and_a_package_mapped_from_another_folder(tmp_path):
    tools = tmp_path / "devtools"
    tools.mkdir()
    (tools / "__init__.py").write_text("")
    (tools / "one.py").write_text("def f():\n    from devtools.two import g\n")
    (tools / "two.py").write_text("from devtools import one\n")
    edges = arch.import_edges(tmp_path, "devtools")
    names = list(arch.module_names(tmp_path, "devtools"))
    assert arch.circles(names, edges) == [["devtools.one", "devtools.two"]]
    assert arch.package_circles(edges) == [["devtools.one", "devtools.two"]]
    _write(tmp_path, {"__init__.py": "", "factors/__init__.py": "", "factors/a.py": "import x\n"})
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "__init__.py").write_text("from ablate.factors import a\n")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools.package-dir]\n"ablate.presets" = "presets"\n'
    )
    assert "ablate.presets" in arch.module_names(tmp_path)
    assert [(e.source, e.target) for e in arch.import_edges(tmp_path)] == [
        ("ablate.presets", "ablate.factors.a")
    ]


def test_a_floor_is_a_package_prefix():
    assert arch.floor_of("ablate.base.store.port") == 0
    assert arch.floor_of("ablate.factors.algorithms") < arch.floor_of("ablate.peers.aliases")
    assert arch.floor_of("ablate.peers.aliases") < arch.floor_of("ablate.baselines.dapo")
    assert arch.floor_of("ablate.models.fast_llama") < arch.floor_of("ablate.rollout.hf")
    assert arch.floor_of("ablate.rollout.hf") < arch.floor_of("ablate.zoo.build")
    assert arch.floor_of("ablate.launch.options") < arch.floor_of("ablate.study.slurm")
    assert arch.floor_of("ablate.report.stats.crossed") == 9
    assert arch.floor_of("ablate") == 10  # the package's __init__
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

    return step_trace.step_calls(lambda: step.rl_step(s, TrainState(), stream), step.__name__)


@pytest.mark.skipif(not zoo_model_built("rl_ready"), reason="zoo not available")
@pytest.mark.parametrize("preset", ["grpo", "ppo", "dapo"])
def test_an_rl_step_calls_each_stage_in_order_and_climbs_back_at_most_twice(preset):
    algorithm = ablate.baseline(preset)
    calls = _trace(algorithm)
    stages = [step_trace.stage_of(module) for module, _ in calls]
    reached = {step_trace.STAGES[s][0] for s in stages if s is not None}
    assert reached == {name for name, _ in step_trace.STAGES}  # every stage ran
    climbs = step_trace.climbs_back(calls)
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
    assert len(step_trace.climbs_back(calls)) == 2
