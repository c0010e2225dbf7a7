"""A published paper's findings tested as claims on the studies that declare them.

A study lists the findings it tests (`Study(findings=...)`, records
`ablate.factors.finding.Finding`, e.g. "Tricks or Traps?" in `studies/tricks_or_traps.py`). Each
finding compares its two arms (they differ in the finding's factor only) on its base model: the
measure per seed (final held-out pass@1 with a diverged trial as 0, or a training metric's last
quarter), paired by seed. The findings of one reproduction (the studies given to one `ablate
report`) are judged together by `rules.adjudicate`: the directional ones Holm-adjusted as one
family, a finding of no effect (direction 0) by its 90% interval against its margin (TOST). The
equivalence margin is the finding's own, else the study's (`StudyData.margin`) for a pass@k measure;
a training metric's scale has none unless the finding declares one. A pair whose factor barely acts
in the run (`rules.inactive_factor`: e.g. the upper clip binds on < 1% of tokens) is "not testable
at this setting". Beside each, the mechanism metric of both arms."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from ablate.factors.finding import Finding
from ablate.report.claims import rules
from ablate.report.data.load import StudyData
from ablate.report.stats import inference
from ablate.report.stats import measures as m


def per_trial(data: StudyData, finding: Finding) -> pd.Series:
    """trial_id -> the finding's measure: final eval value (diverged trials as 0), or a
    training metric's mean over the last quarter of steps."""
    if finding.measure.startswith("eval/"):
        return m.headline(data, m.final_value(data.history, finding.measure))
    return m.window_mean(data.history, finding.measure, 0.75, 1.0)


def finding_claim(finding: Finding, data: StudyData | None) -> rules.Claim:
    """The finding tested on its study's data (None: the study has no results); its verdict
    comes from `rules.adjudicate` over the whole reproduction."""
    base = rules.Claim(
        id=finding.id,
        statement=finding.statement,
        statistic=f"Δ {finding.measure.split('/')[-1]}",
        arms=f"{finding.arm} vs {finding.reference} on {finding.model}",
        direction=finding.direction,
        margin=finding.margin,
        null=finding.direction == 0,
        source=finding.paper,
    )
    if data is None:
        return rules.untested(base, f"study {finding.study} has no results")
    if base.margin is None and finding.measure.startswith("eval/pass_at_"):
        base = replace(base, margin=data.margin)
    cell = (finding.model, finding.template)
    mechanism = _mechanism(data, finding)
    idle = rules.inactive_factor(data, finding.arm, finding.reference, *cell)
    if idle:
        return rules.untested(base, f"{mechanism}; {idle}", rules.NOT_TESTABLE)
    values = per_trial(data, finding)
    a = m.by_seed(data, values, finding.arm, *cell, with_diverged=True)
    b = m.by_seed(data, values, finding.reference, *cell, with_diverged=True)
    contrast = inference.paired_contrast(*m.matched(a, b))
    return rules.tested(base, contrast.diff, contrast.p_value, note=mechanism)


def _mechanism(data: StudyData, finding: Finding) -> str:
    """'metric: arm x vs reference y' (means over steps, then seeds)."""
    rows = data.history[data.history["metric"] == finding.mechanism]
    per_trial = rows.groupby("trial_id")["value"].mean()
    out = []
    for arm in (finding.arm, finding.reference):
        seeds = m.by_seed(data, per_trial, arm, finding.model, finding.template)
        out.append(f"{np.nanmean(seeds.to_numpy()):.4g}" if seeds.notna().any() else "n/a")
    return f"{finding.mechanism}: {out[0]} vs {out[1]}"


def finding_claims(
    findings: Sequence[Finding], studies: Mapping[str, StudyData | None]
) -> list[rules.Claim]:
    """Every finding tested on its study's data (a study missing from `studies`, or None there,
    has no results), judged together."""
    return rules.adjudicate([finding_claim(f, studies.get(f.study)) for f in findings])
