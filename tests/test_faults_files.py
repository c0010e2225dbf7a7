"""Fault suite, fast set for files written for later reading: a Pass@G cache cell cut short by
a kill or a full disk is measured again (with a warning naming it), never read as data."""

from __future__ import annotations

import pandas as pd
import pytest

from ablate.base.durable import UnreadableFileWarning
from ablate.study import Budget, EvalSpec, PassKSpec, Study, arm
from ablate.study.passk_phase import passk_phase
from ablate.testing import zoo_model_built

pytestmark = pytest.mark.skipif(not zoo_model_built("hopeless"), reason="zoo not available")


@pytest.fixture(scope="module")
def study() -> Study:
    with pytest.warns(UserWarning):  # a 2-problem eval is warned about
        return Study(
            name="passk_cache",
            base_models=["hopeless"],
            arms=[arm("grpo", "grpo")],
            seeds=[0],
            budget=Budget(max_steps=1, prompts_per_step=2, group_size=2, max_new_tokens=8),
            eval=EvalSpec(max_problems=2, n_samples=2, ks=(1,)),
            passk=PassKSpec(n=2, ks=(1, 2), max_problems=2),
        )


def cut(text: str, how: str) -> str:
    lines = text.splitlines(keepends=True)
    return {
        "empty": "",
        "header-only": lines[0],
        "half-a-row": "".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2],
        "a-row-missing": "".join(lines[:-1]),
        "garbage": "\x00\x01 not a csv",
    }[how]


@pytest.mark.parametrize("how", ["empty", "header-only", "half-a-row", "a-row-missing", "garbage"])
def test_a_cut_pass_at_g_cache_cell_is_measured_again(study, tmp_path, how):
    cache = tmp_path / "passk-cache"
    first = passk_phase(study, cache)
    (cell,) = cache.iterdir()
    whole = cell.read_text()
    assert len(first) == 2 and list(first["k"]) == [1, 2]
    cell.write_text(cut(whole, how))
    with pytest.warns(UnreadableFileWarning, match=f"{cell} is empty or partial.*measured again"):
        again = passk_phase(study, cache)
    pd.testing.assert_frame_equal(again, first)  # measured again, the same numbers
    assert cell.read_text() == whole and [p.name for p in cache.iterdir()] == [cell.name]


def test_a_whole_cache_cell_is_read_without_measuring(study, tmp_path, monkeypatch):
    from ablate.study import passk_phase as phase

    cache = tmp_path / "passk-cache"
    first = passk_phase(study, cache)
    monkeypatch.setattr(phase, "passk_sweep", lambda *a, **k: pytest.fail("measured again"))
    pd.testing.assert_frame_equal(passk_phase(study, cache), first)
