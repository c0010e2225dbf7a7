"""The Tricks-or-Traps findings, declared by `studies/tricks_or_traps*.py`, tested as claims on
in-memory studies with known effects; the reproduction's table and page."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ablate.factors.algorithms import Algorithm
from ablate.report.claims import rules
from ablate.report.claims.paper import finding_claims
from ablate.report.render import formats
from ablate.report.render.claim_tables import findings_table
from ablate.report.render.reproduction import with_results, write_reproduction
from ablate.study import load_study
from ablate.testing import study_data

STUDIES = Path(__file__).resolve().parents[1] / "studies"
TRICKS = [
    "tricks_or_traps",
    "tricks_or_traps_hard",
    "tricks_or_traps_short",
    "tricks_or_traps_long",
    "tricks_or_traps_length",
]
GRPO4 = Algorithm(minibatches=4, kl_coef=0.0)
ARMS = {
    "grpo4": GRPO4,
    "no_std": dataclasses.replace(GRPO4, scale="none"),
    "clip_higher": dataclasses.replace(GRPO4, clip_high=0.28),
}


def load(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_study(STUDIES / f"{name}.py")


#: The reproduction's findings as `make tricks` gathers them: each study's, in study order.
FINDINGS = [f for name in TRICKS for f in load(name).findings]


def _study(effects: dict[str, float], model="rl_ready", seeds=6, noise=0.01, seed=0, binds=0.02):
    """Final pass@1 = 0.5 + seed effect + arm effect + noise; the upper clip binds on `binds`
    of tokens in grpo4 (twice that in the other arms), logged per step; margin 0.03."""
    rng = np.random.default_rng(seed)
    runs = []
    for s in range(seeds):
        seed_effect = rng.normal(0, 0.05)
        for arm in ARMS:
            final = 0.5 + seed_effect + effects.get(arm, 0.0) + rng.normal(0, noise)
            curves = {
                "eval/pass_at_1": {0: 0.5, 50: final},
                "policy/clip_frac_high": [binds if arm == "grpo4" else 2 * binds] * 3,
                "policy/grad_norm": [1.0] * 3,
            }
            runs.append((arm, model, s, curves))
    data = study_data(runs, algorithms=ARMS, reference="grpo4")
    return dataclasses.replace(data, equivalence_margin=0.03)


def tricks_claims(studies):
    return finding_claims(FINDINGS, studies)


def _claim(claims, finding_id):
    return next(c for c in claims if c.id == finding_id)


def test_a_clear_effect_in_the_papers_direction_is_supported_and_mechanism_is_read():
    data = _study({"no_std": 0.1})
    claims = tricks_claims({"tricks_or_traps": data})
    c = _claim(claims, "std_easy")
    assert c.verdict == rules.SUPPORTED and c.n == 6
    assert c.value == pytest.approx(0.1, abs=0.03) and c.low < c.value < c.high
    assert c.p_holm >= c.p_value  # Holm over all the directional findings tested
    assert "policy/grad_norm: 1 vs 1" in c.note


def test_the_opposite_direction_is_contradicted():
    claims = tricks_claims({"tricks_or_traps": _study({"no_std": -0.1})})
    assert _claim(claims, "std_easy").verdict == rules.CONTRADICTED


def test_no_effect_findings_need_the_90_interval_inside_the_margin():
    tiny = tricks_claims({"tricks_or_traps": _study({}, noise=0.002)})
    c = _claim(tiny, "clip_higher_base")
    assert c.margin == 0.03 and c.null and c.verdict == rules.EQUIVALENT
    assert -c.margin < c.low90 < c.high90 < c.margin and c.low < c.low90
    assert rules.verdict_text(c) == "equivalent within ±0.03"
    assert "policy/clip_frac_high: 0.04 vs 0.02" in c.note
    big = tricks_claims({"tricks_or_traps": _study({"clip_higher": 0.15})})
    assert _claim(big, "clip_higher_base").verdict == rules.CONTRADICTED
    noisy = tricks_claims({"tricks_or_traps": _study({}, noise=0.08, seeds=3)})
    assert _claim(noisy, "clip_higher_base").verdict == rules.INCONCLUSIVE


def test_a_directional_finding_can_be_equivalent_and_is_contradicted_only_beyond_the_margin():
    none = tricks_claims({"tricks_or_traps": _study({}, noise=0.002)})
    c = _claim(none, "std_easy")  # predicts no_std > grpo4; the two are within ±0.03
    assert c.margin == 0.03 and not c.null and c.verdict == rules.EQUIVALENT
    # significantly below but inside ±0.03: a small, real difference, equivalent
    small = _claim(tricks_claims({"tricks_or_traps": _study({"no_std": -0.02}, noise=0.004)}),
                   "std_easy")  # fmt: skip
    assert small.p_holm < 0.05 and small.verdict == rules.EQUIVALENT and "real" in small.note
    # significantly below, the interval across −0.03: neither equivalent nor a contradiction
    slight = tricks_claims({"tricks_or_traps": _study({"no_std": -0.03}, noise=0.004)})
    c = _claim(slight, "std_easy")
    assert c.p_holm < 0.05 and c.low < -0.03 < c.high and c.verdict == rules.INCONCLUSIVE
    assert "opposite to the claim" in c.note
    beyond = _claim(tricks_claims({"tricks_or_traps": _study({"no_std": -0.1})}), "std_easy")
    assert beyond.high < -0.03 and beyond.verdict == rules.CONTRADICTED


def test_a_finding_whose_factor_barely_acts_is_not_testable_at_this_setting():
    # the paper's own base-model regime: the upper clip binds on ~0.3% of tokens
    claims = tricks_claims({"tricks_or_traps": _study({}, noise=0.002, binds=0.002)})
    c = _claim(claims, "clip_higher_base")
    assert c.verdict == rules.NOT_TESTABLE and "0.40% of tokens" in c.note
    assert "barely acts" in c.note and np.isnan(c.p_holm)
    # a factor acting unconditionally (the std) is tested whatever the clip does
    assert _claim(claims, "std_easy").verdict != rules.NOT_TESTABLE


def test_overlong_filtering_needs_truncated_samples():
    arms = {"grpo4": GRPO4, "overlong_filter": dataclasses.replace(GRPO4, mask_truncated=True)}

    def study(truncated: float):
        rng = np.random.default_rng(0)
        runs = []
        for s in range(5):
            for arm in arms:
                curves = {
                    "eval/pass_at_1": {0: 0.5, 40: 0.5 + rng.normal(0, 0.01)},
                    "length/truncation_rate": [truncated] * 3,
                }
                runs.append((arm, "rl_ready", s, curves))
        return study_data(runs, algorithms=arms, reference="grpo4")

    idle = finding_claims(FINDINGS, {"tricks_or_traps_long": study(0.005)})
    c = _claim(idle, "overlong_long")
    assert c.verdict == rules.NOT_TESTABLE and "0.50% of samples are truncated" in c.note
    acting = finding_claims(FINDINGS, {"tricks_or_traps_long": study(0.2)})
    assert _claim(acting, "overlong_long").verdict != rules.NOT_TESTABLE


def test_missing_studies_and_arms_are_reported_not_guessed():
    claims = tricks_claims({"tricks_or_traps": _study({"no_std": 0.1})})
    assert _claim(claims, "std_hard").verdict == rules.NOT_TESTED  # no hard study
    assert "no results" in _claim(claims, "std_hard").note
    # the aligned rung was not run in this study: no seeds to compare
    assert _claim(claims, "clip_higher_aligned").verdict == rules.NOT_TESTABLE
    table = findings_table(claims)
    assert [r["finding"] for r in table.rows] == [f.id for f in FINDINGS]
    assert next(r for r in table.rows if r["finding"] == "std_easy")["verdict"] == rules.SUPPORTED


# --- the table as tools/tricks_report.py wrote it before findings became data ---------------
#: study -> {(arm, model): Δ final pass@1}; tricks_or_traps_long has no results
EFFECTS = {
    "tricks_or_traps": {
        ("no_std", "rl_ready"): 0.08,
        ("batch_std", "rl_ready"): -0.05,
        ("clip_higher", "aligned"): 0.0,
        ("token_agg", "aligned"): -0.06,
        ("lite_ppo", "rl_ready"): 0.02,
        ("dapo4", "rl_ready"): 0.01,
    },
    "tricks_or_traps_hard": {("no_std", "rl_ready"): -0.07, ("lite_ppo", "rl_ready"): 0.03},
    "tricks_or_traps_short": {("overlong_filter", "rl_ready"): 0.04},
    "tricks_or_traps_length": {},
}
#: What `tools/tricks_report.py` (ablate/report/tricks.py at 8356644) wrote for `_reproduction()`,
#: under issue 28's verdict rule: finding, Δ [95% CI], seeds, p (Holm), margin ±, verdict,
#: mechanism (arm vs reference). Changed from that tool's table, each for a stated reason: the
#: clip-higher pairs are "not testable at this setting" (the upper clip binds on 0.4% of tokens,
#: under ACTS_MIN = 1%; they were "contradicted" and "supported"), so the Holm family is 9
#: directional findings, not 11 (smaller adjusted p's); token_agg_base, batch_std_hard and
#: lite_ppo_vs_dapo are "equivalent within ±0.03" (their 90% intervals lie inside the studies'
#: declared margin; they were "inconclusive"). Issue 42: every supported or contradicted finding
#: here is "not testable at 5 seeds" (these in-memory studies have 5 seeds, as the studies
#: declare, and no per-problem records, so each is read seed-level, and says so): the t test
#: decides, but the exact sign-flip test of 5 per-seed differences cannot go below 2/2^5 =
#: 0.0625, 0.688 after Holm over the 11 tested directional findings (its own column).
IDLE = (
    "the upper clip binds on 0.40% of tokens (the larger of clip_higher and grpo4): under 1%, "
    "the factor barely acts here"
)
FLOOR = "the exact test's smallest p at 5 seeds is 2/2^5 = 0.0625 (0.688 after Holm)"
SUPPORTED = f"the t test alone would say supported, but {FLOOR}"
CONTRADICTED = f"the t test alone would say contradicted, but {FLOOR}"
FEW = "not testable at 5 seeds"
EVAL = "seed-level (no per-problem eval records: given these problems)"
TRAINING = "seed-level (a training metric, no problem dimension)"
EQUIV = "equivalent within ±0.03"
AFTER = [
    ("std_easy", "+0.085 [+0.076, +0.094]", 5, "0.00013", "0.69", "0.03", FEW,
     f"policy/grad_norm: 1.099 vs 1.002; {SUPPORTED}", EVAL),
    ("std_hard", "−0.071 [−0.081, −0.061]", 5, "0.00038", "0.69", "0.03", FEW,
     f"policy/grad_norm: 1.131 vs 0.9945; {SUPPORTED}", EVAL),
    ("batch_std_easy", "−0.048 [−0.064, −0.031]", 5, "0.0096", "0.69", "0.03", FEW,
     f"policy/grad_norm: 1.187 vs 1.002; {CONTRADICTED}", EVAL),
    ("batch_std_hard", "+0.001 [−0.011, +0.013]", 5, "1.0", "1.0", "0.03", EQUIV,
     "policy/grad_norm: 1.197 vs 0.9945", EVAL),
    ("clip_higher_aligned", "—", 0, "—", "—", "0.03", "not testable at this setting",
     f"policy/clip_frac_high: 0.003988 vs 0.0009707; {IDLE}", "–"),
    ("clip_higher_base", "—", 0, "—", "—", "0.03", "not testable at this setting",
     f"policy/clip_frac_high: 0.003978 vs 0.001013; {IDLE}", "–"),
    ("token_agg_base", "−0.004 [−0.017, +0.010]", 5, "1.0", "1.0", "0.03", EQUIV,
     "length/incorrect_mean: 41 vs 29.97", EVAL),
    ("token_agg_aligned", "−0.061 [−0.072, −0.050]", 5, "0.00083", "0.69", "0.03", FEW,
     f"length/incorrect_mean: 41.06 vs 30.01; {SUPPORTED}", EVAL),
    ("overlong_short", "+0.030 [+0.014, +0.046]", 5, "0.035", "0.69", "0.03", FEW,
     f"length/truncation_rate: 0.2092 vs 0.1987; {SUPPORTED}", EVAL),
    ("overlong_long", "—", 0, "—", "—", "0.03", "not tested",
     "study tricks_or_traps_long has no results", "–"),
    ("lite_ppo_vs_grpo", "+0.026 [+0.009, +0.042]", 5, "0.053", "0.69", "0.03", "inconclusive",
     "policy/entropy: 0.1503 vs 0.09952", EVAL),
    ("lite_ppo_vs_dapo", "+0.008 [−0.018, +0.034]", 5, "1.0", "1.0", "0.03", EQUIV,
     "policy/entropy: 0.1503 vs 0.1602", EVAL),
    ("lite_ppo_vs_grpo_hard", "+0.028 [+0.017, +0.038]", 5, "0.011", "0.69", "0.03", FEW,
     f"policy/entropy: 0.1296 vs 0.1002; {SUPPORTED}", EVAL),
    ("length_bias", "−3.33 [−3.57, −3.08]", 5, "0.000033", "0.69", "–", FEW,
     f"length/self_check_rate_incorrect: 0.2005 vs 0.2126; {CONTRADICTED}", TRAINING),
]  # fmt: skip


def _results_of(name: str, seed: int):
    """The study's planned cells with a known effect per arm; its own arms' algorithms."""
    study = load(name)
    algos = {a.name: a.algorithm for a in study.arms}
    rng = np.random.default_rng(seed)
    cells = sorted({(t.arm, t.spec.model, t.spec.seed) for t in study.trials()}, key=str)
    seed_effect = {s: rng.normal(0, 0.04) for s in study.seeds}
    runs = []
    for arm, model, s in cells:
        effect = EFFECTS[name].get((arm, model), 0.0)
        final = 0.5 + seed_effect[s] + effect + rng.normal(0, 0.01)
        i = list(algos).index(arm)
        curves = {
            "eval/pass_at_1": {0: 0.45, 40: final},
            "policy/grad_norm": list(1.0 + 0.1 * i + rng.normal(0, 0.05, 4)),
            "policy/clip_frac_high": list(0.001 * (i + 1) + rng.normal(0, 1e-4, 4)),
            "policy/entropy": list(0.1 + 0.01 * i + rng.normal(0, 0.002, 4)),
            "length/incorrect_mean": list(
                30 + 2 * i + np.arange(4) * (0.5 * i) + rng.normal(0, 0.2, 4)
            ),
            "length/truncation_rate": list(0.2 + 0.01 * i + rng.normal(0, 0.01, 4)),
            "length/self_check_rate_incorrect": list(0.2 + 0.01 * i + rng.normal(0, 0.01, 4)),
        }
        runs.append((arm, model, s, curves))
    data = study_data(runs, algorithms=algos, reference=study.reference_arm)
    return dataclasses.replace(data, name=name, equivalence_margin=study.equivalence_margin)


def _reproduction() -> dict:
    return {name: _results_of(name, k) for k, name in enumerate(EFFECTS)}


def test_the_findings_table_is_the_one_tricks_report_wrote_under_the_new_verdict_rule():
    table = findings_table(finding_claims(FINDINGS, _reproduction()))
    assert table.columns == [
        "finding",
        "paper",
        "tested here",
        "Δ [95% CI]",
        "seeds",
        "p (Holm)",
        "p exact (Holm)",
        "margin ±",
        "verdict",
        "mechanism (arm vs reference)",
        "reading",
    ]
    got = {r["finding"]: tuple(r[c] for c in table.columns[3:]) for r in table.rows}
    assert got == {row[0]: row[1:] for row in AFTER}
    paper = {r["finding"]: r["paper"] for r in table.rows}
    assert paper["clip_higher_base"].startswith("Takeaway 4: on base models clip-higher")


def test_a_reproduction_writes_its_claims_table_and_page_beside_the_study_reports(tmp_path):
    studies = _reproduction()
    studies["tricks_or_traps_long"] = None  # given, but never run
    studies["tricks_or_traps_short"] = dataclasses.replace(
        studies["tricks_or_traps_short"],
        trials=studies["tricks_or_traps_short"].trials.assign(complete=False),
    )  # ran, but no trial finished: no results either
    assert with_results(studies)["tricks_or_traps_short"] is None
    folder = write_reproduction(FINDINGS, studies, tmp_path)
    csv = pd.read_csv(folder / "tables" / "claims.csv").set_index("finding")
    assert list(csv.index) == [f.id for f in FINDINGS]
    assert csv.loc["std_easy", "verdict"] == "not testable at 5 seeds"
    for name in ("overlong_short", "overlong_long"):
        assert (
            csv.loc[name, "verdict"] == "not tested"
            and "has no results" in csv.loc[name, "mechanism (arm vs reference)"]
        )
    tex = (folder / "tables" / "claims.tex").read_text()
    assert tex.isascii() and r"\begin{tabular}" in tex
    md = (folder / "report.md").read_text()
    assert md.startswith("# Reproduction: tricks_or_traps, tricks_or_traps_hard")
    assert "[tricks_or_traps_hard](tricks_or_traps_hard/report.md)" in md
    assert "(tricks_or_traps_long/report.md)" not in md  # no report was written for it
    assert "std_easy (no std − group std" in md and "## A paper's findings tested here" in md
    assert "Studies without results: tricks_or_traps_short, tricks_or_traps_long." in md
    html = (folder / "report.html").read_text()
    assert "<a href='tricks_or_traps/report.html'>" in html and "<table>" in html
    assert formats.to_markdown(findings_table([])).endswith("(none)\n")
