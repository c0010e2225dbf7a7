"""The adversarial calibration bench at reduced size: every statistic's gates on scenarios unlike
the model it was tuned on (devtools/calibration/adversarial.py). A gate outside its band, with
Monte-Carlo slack for the reduced study count, fails the suite."""

from __future__ import annotations

import pytest

from devtools.calibration import adversarial
from devtools.calibration.gates import Gate, at_least, at_most, slack, within

#: Studies per scenario here: enough for the gates' 3-sigma slack to separate a real miss.
STUDIES = 200


@pytest.mark.parametrize("title", [title for title, _ in adversarial.SUITES])
def test_every_gate_holds_at_reduced_size(title):
    [(name, gates, _)] = adversarial.run(STUDIES, seed=1, suites=[title])
    assert gates, f"{name}: no gates"
    failed = [g.line() for g in gates if not g.passed]
    assert not failed, "\n".join(failed)


def test_a_gate_fails_outside_its_band_and_slack_shrinks_with_studies():
    assert at_most("fp", 0.05, 0.05, 200).passed
    assert not at_most("fp", 0.15, 0.05, 200).passed
    assert not at_least("power", 0.5, 0.8, 200).passed
    assert within("coverage", 0.95, 0.93, 0.97, 200).passed
    assert not within("coverage", 0.80, 0.93, 0.97, 200).passed
    assert slack(0.05, 2000) < slack(0.05, 200)
    assert Gate("x", 0.2, 0.0, 0.1, 10).line().startswith("FAIL")
