"""Are the claims and a paper's findings calibrated? Checked on studies with fresh problems.

Studies from `devtools.calibration.task_level` (every study a new sample of the task's problems,
an arm × problem interaction τ) go through the claim machinery exactly as the report runs it:
each arm − arm 0 difference matrix [n, J] becomes a claim by `claims.estimand.task_claim` (the
headline's crossed contrast, its exact sign-flip p beside it) and the study's claims are judged
together by `claims.rules.adjudicate` (Holm over the t p's and over the exact p's, the verdict
rule). Beside it, the old rule: a paired t over per-seed means with n − 1 df, TOST on its 90%
interval, no exact test (`rules.tested` without per-seed values), judged by the same
`adjudicate`; and the crossed t alone (the new claims with their exact p removed), which shows
what the exact test adds. Against the TASK truth:

- false positives: null studies (4 arms, equal task truths), claims of a change in either
  direction (direction 0, the most permissive): a study counts when any claim is supported or
  contradicted [≤ 0.05, within Monte-Carlo error];
- equivalence: studies with arms at +margin and −margin from arm 0, claims of no effect with
  that margin: P(equivalent) [≤ 0.05];
- coverage of the claims' 95% intervals of the task truth, in the null studies [0.95].

Claim 6 (`claims.headroom`) has its own table (`claim6_rows`, in `claims_claim6`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ablate.report.claims import estimand, rules
from ablate.report.stats import inference
from devtools.calibration.task_calibration import task_rate
from devtools.calibration.task_level import TaskModel, simulate_task

MARGIN = 0.03
SEEDS = (3, 5, 10)
PROBLEMS = (64, 256)
INTERACTIONS = (0.0, 0.5, 1.0)
DECIDES = (rules.SUPPORTED, rules.CONTRADICTED)


def base_claim(i: int, *, null: bool = False, margin: float | None = MARGIN) -> rules.Claim:
    """Claim i of a simulated study: a change in either direction, or no effect (`null`)."""
    return rules.Claim(f"c{i}", "arm i changes pass@1", "Δ pass@1", direction=0, margin=margin,
                       null=null)  # fmt: skip


def new_claims(d: np.ndarray, null: bool = False, margin: float = MARGIN) -> list[rules.Claim]:
    """The report's claims on difference matrices d [C, n, J]: the crossed task-level contrast."""
    return [
        estimand.task_claim(base_claim(i, null=null, margin=margin), x) for i, x in enumerate(d)
    ]


def old_claims(d: np.ndarray, null: bool = False, margin: float = MARGIN) -> list[rules.Claim]:
    """The old rule on d [C, n, J]: paired t over per-seed means, n − 1 df, no exact test."""
    out = []
    for i, x in enumerate(d):
        seeds = x.mean(axis=1)  # [n]
        c = inference.paired_contrast(seeds, np.zeros_like(seeds))
        out.append(rules.tested(base_claim(i, null=null, margin=margin), c.diff, c.p_value))
    return out


def t_only(claims: list[rules.Claim]) -> list[rules.Claim]:
    """The same claims without their exact p: the crossed t alone decides."""
    return [replace(c, p_exact=float("nan")) for c in claims]


def _covered(c: rules.Claim, truth: float) -> float:
    if not (np.isfinite(c.low) and np.isfinite(c.high)):
        return float("nan")
    return float(c.low <= truth <= c.high)


def null_hits(d: np.ndarray, truth: np.ndarray) -> dict[str, list]:
    """Per-study hits of one null study: d [C, n, J], truth [C] (all 0)."""
    new, old = new_claims(d), old_claims(d)
    judged = {"new": rules.adjudicate(new), "t": rules.adjudicate(t_only(new))}
    judged["old"] = rules.adjudicate(old)
    out = {f"fp_{k}": [any(c.verdict in DECIDES for c in v)] for k, v in judged.items()}
    out["cov_new"] = [_covered(c, t) for c, t in zip(new, truth, strict=True)]
    out["cov_old"] = [_covered(c, t) for c, t in zip(old, truth, strict=True)]
    return out


def margin_hits(d: np.ndarray, margin: float = MARGIN) -> dict[str, list]:
    """Per-study hits of a study whose claims' truths are ±margin: claims of no effect."""
    out = {}
    for name, make in (("eq_new", new_claims), ("eq_old", old_claims)):
        judged = rules.adjudicate(make(d, null=True, margin=margin))
        out[name] = [c.verdict == rules.EQUIVALENT for c in judged]
    return out


def _simulate(model: TaskModel, studies: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """(d [S, A − 1, n, J] arm − arm 0, truth [A − 1]) of `studies` fresh-problem studies."""
    sim = simulate_task(model, studies, rng, fixed=False)
    y = sim.y.astype(float)
    return y[:, 1:] - y[:, :1], sim.truth[1:] - sim.truth[0]


def _collect(hits: list[dict]) -> dict[str, np.ndarray]:
    return {k: np.array([h[k] for h in hits], dtype=float) for k in hits[0]}


def calibrate_row(model: TaskModel, studies: int, seed: int = 0, margin: float = MARGIN) -> dict:
    """Every claims rate of one scenario: {rate: (value, MC SE)}."""
    null = replace(model, arms=4, effects=None)
    d, truth = _simulate(null, studies, np.random.default_rng([seed, 0]))
    hits = _collect([null_hits(x, truth) for x in d])
    alt = replace(model, arms=3, effects=(0.0, margin, -margin))
    d, _ = _simulate(alt, studies, np.random.default_rng([seed, 1]))
    hits |= _collect([margin_hits(x, margin) for x in d])
    return {name: task_rate(h) for name, h in hits.items()}


def grid_cases(base: TaskModel, seeds=SEEDS, problems=PROBLEMS, taus=INTERACTIONS) -> list:
    """(label, model) over τ × J × n."""
    return [
        ((f"{tau:g}", str(j), str(n)), replace(base, interaction=tau, problems=j, seeds=n))
        for tau in taus
        for j in problems
        for n in seeds
    ]


def run_cases(cases: list, studies: int, seed: int = 0) -> list:
    return [(label, calibrate_row(m, studies, seed + i)) for i, (label, m) in enumerate(cases)]


#: (rate, header) in table order
COLUMNS = (
    ("fp_new", "FP"),
    ("fp_t", "FP crossed t only"),
    ("fp_old", "FP old"),
    ("eq_new", "P(eq | ±m)"),
    ("eq_old", "P(eq | ±m) old"),
    ("cov_new", "cov"),
    ("cov_old", "cov old"),
)

LEGEND = """\
Columns (rates over simulated studies on FRESH problems; target in brackets):
  τ, J, n            arm × problem interaction (logit SD), eval problems, seeds per arm
  FP                 null studies (4 arms, equal task truths, 3 claims of a change): any claim
                     supported or contradicted by the report's rule (crossed t and, up to 10
                     seeds, the exact sign-flip test, both after Holm) [≤ 0.05]
  FP crossed t only  the same without the exact test
  FP old             the old rule: paired t over per-seed means (n − 1 df), Holm
  P(eq | ±m)         claims of no effect whose true Δ is ±m: judged equivalent (90% interval
                     inside ±m) [≤ 0.05]; old: the seed t's 90% interval
  cov                the claims' 95% intervals hold the task truth (null studies) [0.95]
  MC error           the largest Monte-Carlo standard error of the row's rates (study = unit)"""


def format_rows(rows: list, label_headers: tuple[str, ...], columns=COLUMNS) -> str:
    """Markdown table; MC error = the largest rate SE of the row."""
    header = [*label_headers, *(h for _, h in columns), "MC error"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, rates in rows:
        errors = [se for _, se in rates.values() if np.isfinite(se)]
        cells = [*label, *(_cell(rates[k][0]) for k, _ in columns)]
        lines.append("| " + " | ".join([*cells, _cell(max(errors, default=np.nan))]) + " |")
    return "\n".join(lines)


def _cell(value: float) -> str:
    return "—" if not np.isfinite(value) else f"{value:.3f}"
