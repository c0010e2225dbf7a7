"""The README's complete study file runs as written, and `import ablate` stays light."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import ablate
from ablate.base.errors import AblateWarning
from ablate.study import Study, load_study

README = Path(__file__).parents[1] / "README.md"
MARKER = "# studies/first.py"


def readme_study() -> str:
    """The README's Python block that starts with the study file's name."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (block,) = [b for b in blocks if b.startswith(MARKER)]
    return block


def test_the_readme_study_file_runs_as_written(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", AblateWarning)  # no confound or inert-factor warning
        namespace: dict = {}
        exec(compile(readme_study(), str(README), "exec"), namespace)
        file = tmp_path / "first.py"
        file.write_text(readme_study())
        loaded = load_study(file)
    study = namespace["STUDY"]
    assert isinstance(study, Study) and loaded.name == study.name == "first"
    names = [a.name for a in study.arms]
    assert names == ["grpo", "grpo[scale='none']", "grpo[loss_agg='token_mean']", "dr_grpo"]
    assert study.reference_arm == "grpo" and len(study.trials()) == 4 * 3
    assert [t.id for t in loaded.trials()] == [t.id for t in study.trials()]
    assert {t.spec.algorithm.minibatches for t in study.trials()} == {4}


def test_the_public_api_is_importable_from_ablate():
    from ablate import (
        Algorithm,
        Budget,
        Cells,
        EvalSpec,
        PassKSpec,
        Study,
        arm,
        baseline,
        full_factorial,
        one_at_a_time,
        path,
    )
    from ablate import study as study_module

    assert Study is study_module.Study and arm is study_module.arm
    assert (full_factorial, one_at_a_time, path) == (
        study_module.full_factorial,
        study_module.one_at_a_time,
        study_module.path,
    )
    for name in ablate.__all__:
        assert getattr(ablate, name) is not None, name
    assert set(ablate.__all__) <= set(dir(ablate))
    assert isinstance(baseline("grpo"), Algorithm)
    Study(
        name="kw",
        base_models=["rl_ready"],
        arms=[arm("grpo", "grpo")],
        budget=Budget(max_steps=1),
        eval=EvalSpec(),
        passk=PassKSpec(),
        extra=[Cells(seeds=[1])],
    )
    try:
        ablate.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no attribute 'no_such_name'" in str(exc)
    else:
        raise AssertionError("unknown names must raise AttributeError")


def test_import_ablate_loads_no_heavy_library():
    code = (
        "import sys, ablate; from ablate import Study, arm; "
        "print(sorted(m for m in ('torch', 'mlflow', 'pandas', 'transformers', 'typer') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_checking_algorithms_and_studies_loads_no_torch():
    """Every preset, an algorithm whose checks read the surrogates' declarations, and the
    README's study file are checked without torch (`ablate presets`, `ablate show` and loading a
    study stay fast): the factor registries import it at their first tensor operation."""
    code = (
        "import sys, ablate; from ablate.baselines import baseline, baseline_names; "
        "[baseline(n) for n in baseline_names()]; "
        "ablate.Algorithm(surrogate='sapo', sapo_tau_pos=2.0, scale='batch_std'); "
        "from ablate.study import load_study; load_study('studies/quickstart.py'); "
        "print('torch' in sys.modules)"
    )
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == "False"
