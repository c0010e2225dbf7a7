"""The bench's profile section: a natural-length step's time split into phases by timers around
the step's own functions, on the shipped rl_ready model (one warm-up step, two timed)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from devtools.bench.options import SECTIONS
from devtools.bench.phases import PHASES
from devtools.bench.profile import section_profile


@pytest.fixture(scope="module")
def rows():
    options = SimpleNamespace(sizes=("0.53M",), repeats=2, warmup=1)
    said: list[str] = []
    found = section_profile(SimpleNamespace(options=options, progress=said.append))
    assert said == ["profile of the natural-length step, 0.53M"]
    return {row.metric: row for row in found}


def test_the_profile_section_comes_after_the_natural_step_it_splits():
    assert SECTIONS.index("profile") == SECTIONS.index("natural") + 1


def test_every_phase_is_timed_and_the_timers_do_not_overlap(rows):
    assert set(PHASES) | {"step", "mean completion length"} == set(rows)
    for phase in ("sampling", "forward", "backward", "optimizer"):
        assert rows[phase].summary.min > 0, phase  # its wrapper saw the step call it
    # rest = the step's wall time minus the timed phases: negative if two timers counted the
    # same seconds (e.g. a forward inside sampling)
    assert rows["rest"].summary.min >= 0
    assert 0 < rows["mean completion length"].summary.median <= 80


def test_each_phase_states_its_share_of_the_step(rows):
    step = rows["step"].summary.median
    for phase in PHASES:
        share = round(100 * rows[phase].summary.median / step)
        assert rows[phase].note == f"{share}% of the step"
    assert rows["step"].summary.n == 2
