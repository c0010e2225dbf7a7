"""A published paper's findings tested as claims on the studies that declare them.

A study lists the findings it tests (`Study(findings=...)`, records
`ablate.factors.finding.Finding`, e.g. "Tricks or Traps?" in `studies/tricks_or_traps.py`). Each
finding compares its two arms (they differ in the finding's factor only) on its base model. A
finding on an eval pass@k (final held-out eval, a diverged trial as 0) is about the task: the
per-(seed, problem) differences go through the headline's crossed contrast (`claims.estimand`),
so an arm × problem interaction widens its interval as it does the headline's. A finding on a
training metric (its last quarter's mean) has no problem dimension: paired by seed, and its
reading says so; so does an eval finding on a study without per-problem records. The findings
of one reproduction (the studies given to one `ablate report`) are judged together by
`rules.adjudicate`: the directional ones Holm-adjusted as one family (the t and, up to
`rules.EXACT_SEEDS_MAX` seeds, the exact sign-flip test, which must agree), a finding of no
effect (direction 0) by its 90% interval against its margin (TOST). The equivalence margin is
the finding's own, else the study's (`StudyData.margin`) for a pass@k measure; a training
metric's scale has none unless the finding declares one. A pair whose factor barely acts in the
run (`arms.inactive_factor`: e.g. the upper clip binds on < 1% of tokens) is "not testable at
this setting". Beside each, the mechanism metric of both arms."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from ablate.factors.finding import Finding
from ablate.report.claims import arms, estimand, rules
from ablate.report.data.load import StudyData
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
    idle = arms.inactive_factor(data, finding.arm, finding.reference, *cell)
    if idle:
        return rules.untested(base, f"{mechanism}; {idle}", rules.NOT_TESTABLE)
    pair = (finding.arm, finding.reference)
    task = estimand.eval_claim(base, data, finding.measure, pair, cell, note=mechanism)
    if task is not None:
        return task
    values = per_trial(data, finding)
    a, b = (m.by_seed(data, values, x, *cell, with_diverged=True) for x in pair)
    return rules.seed_claim(base, *m.matched(a, b), _seed_level_why(finding), note=mechanism)


def _seed_level_why(finding: Finding) -> str:
    """Why a finding is read over seeds only (`Claim.reading`)."""
    if estimand.pass_k(finding.measure) is not None:
        return "no per-problem eval records: given these problems"
    if finding.measure.startswith("eval/"):
        return "per-seed eval values, given these problems"
    return "a training metric, no problem dimension"


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
