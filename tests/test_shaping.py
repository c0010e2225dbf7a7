"""Dynamic sampling filter, overlong filtering and DAPO's soft overlong punishment."""

from __future__ import annotations

import pytest
import torch

from ablate.stages.batch import expand_groups, informative_groups
from ablate.stages.shaping import mask_truncated, soft_overlong_penalty


def test_informative_groups_keep_mixed_groups_only():
    r = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.5, 0.5, 0.5])
    assert informative_groups(r, 3).tolist() == [False, False, True, False]
    assert expand_groups(torch.tensor([False, True]), 2).tolist() == [False, False, True, True]
    with pytest.raises(ValueError):
        informative_groups(r, 5)


def test_mask_truncated_zeroes_whole_rows():
    mask = torch.ones(3, 4)
    out = mask_truncated(mask, torch.tensor([False, True, False]))
    assert out.sum(-1).tolist() == [4.0, 0.0, 4.0]


def test_soft_overlong_penalty_three_regimes():
    lengths = torch.tensor([0, 10, 15, 17, 20, 25])
    got = soft_overlong_penalty(lengths, max_len=20, buffer=5, penalty=1.0)
    # expected length 15: 0 up to 15, then (15 - L) / 5, -1 at and beyond 20
    assert got.tolist() == pytest.approx([0.0, 0.0, 0.0, -0.4, -1.0, -1.0])
    half = soft_overlong_penalty(lengths, max_len=20, buffer=5, penalty=0.5)
    assert half.tolist() == pytest.approx([0.0, 0.0, 0.0, -0.2, -0.5, -0.5])
    assert torch.equal(soft_overlong_penalty(lengths, 20, 0, 1.0), torch.zeros(6))
