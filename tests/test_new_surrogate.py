"""A new surrogate touches two files: surrogates.py (the function, registered with the fields it
reads) and algorithms.py (its value in the `Surrogate` Literal and its parameter's field). Here
a throwaway surrogate with one new parameter is registered through the public registry API, and
a test-only `Algorithm` subclass stands for the algorithms.py edit: the checks, the loss, the
peers' matrix and `ablate export` pick it up with no other edit."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, get_args

import pytest
import torch

from ablate.base.errors import ConfigError
from ablate.base.registry import FieldRule, finite
from ablate.factors.algorithms import Algorithm, Surrogate
from ablate.factors.objective import policy_loss
from ablate.factors.surrogates import CLIP_HIGH, SURROGATES
from ablate.peers import export_config, matrix_rows

WITH_TEMPERED = (*get_args(Surrogate), "tempered")


@dataclass(frozen=True, kw_only=True)
class TemperedAlgorithm(Algorithm):
    """`Algorithm` after the algorithms.py edit."""

    surrogate: Literal[WITH_TEMPERED] = "clip"
    """Policy objective (one more value)."""
    tempered_beta: float = 1.0
    """Tempered: the log-ratio is divided by this before the exponential."""


@pytest.fixture
def tempered(monkeypatch):
    """The surrogates.py edit; the registry's tables are copies, restored after the test."""
    monkeypatch.setattr(SURROGATES, "_table", dict(SURROGATES._table))
    monkeypatch.setattr(SURROGATES, "_reads", dict(SURROGATES._reads))
    beta = FieldRule("tempered_beta", lambda v, a: finite(v) and v > 0, "must be a number > 0")

    @SURROGATES.register("tempered", reads=(beta, CLIP_HIGH))
    def tempered(logp, log_ratio, adv, mask, algo):
        ratio = torch.exp(log_ratio / algo.tempered_beta).clamp(max=1 + algo.clip_high)
        return -adv * ratio, {"tempered_ratio_mean": ratio.detach().mean()}

    return tempered


def test_the_checks_derive_from_the_new_declaration(tempered):
    assert TemperedAlgorithm(surrogate="tempered", tempered_beta=2.0).tempered_beta == 2.0
    with pytest.raises(ConfigError) as err:
        TemperedAlgorithm(tempered_beta=2.0)
    assert (
        "tempered_beta=2.0 does nothing with surrogate='clip' (only surrogate='tempered' reads "
        "it); remove it, or use surrogate='tempered'"
    ) in str(err.value)
    with pytest.raises(ConfigError, match=r"tempered_beta=0.0 must be a number > 0"):
        TemperedAlgorithm(surrogate="tempered", tempered_beta=0.0)
    with pytest.raises(ConfigError, match=r"clip_high=-1.0 must be a finite number >= 0"):
        TemperedAlgorithm(surrogate="tempered", clip_high=-1.0)
    for field, value in (("clip_low", 0.3), ("dual_clip", 3.0), ("sapo_tau_pos", 2.0)):
        with pytest.raises(ConfigError, match=f"{field}={value} does nothing with "):
            TemperedAlgorithm(surrogate="tempered", **{field: value})


def test_the_loss_runs_the_new_entry_and_reports_only_its_own_statistics(tempered):
    a = TemperedAlgorithm(surrogate="tempered", tempered_beta=2.0)
    logp = torch.tensor([[0.2, -0.4]], requires_grad=True)
    loss, stats = policy_loss(logp, torch.zeros(1, 2), torch.tensor([1.0]), torch.ones(1, 2), a)
    loss.backward()
    expected = -(torch.exp(torch.tensor([0.1, -0.2]))).mean()
    assert loss.item() == pytest.approx(expected.item())
    assert "tempered_ratio_mean" in stats and "clip_frac" not in stats


def test_the_peers_matrix_and_export_pick_up_the_new_entry(tempered):
    rows = {
        (field, value): (trl, verl) for field, value, trl, verl in matrix_rows(TemperedAlgorithm)
    }
    for cells in (rows["surrogate", "tempered"], rows["tempered_beta", "any"]):
        assert all(cell.startswith("cannot") and "unmapped" in cell for cell in cells)
    algo = TemperedAlgorithm(surrogate="tempered", tempered_beta=2.0)
    for target in ("trl", "verl"):
        with pytest.raises(ConfigError) as err:
            export_config(algo, target, name="tempered")
        assert "surrogate='tempered': not in this trainer's table" in str(err.value)
        assert "tempered_beta=2.0: not in this trainer's table" in str(err.value)
        # with another surrogate the new field is unread: the export is the plain algorithm's
        plain = dataclasses.replace(algo, surrogate="clip", tempered_beta=1.0)
        got = export_config(plain, target, name="grpo")
        assert got.keys == export_config(Algorithm(), target, name="grpo").keys
