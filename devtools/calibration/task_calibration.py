"""Is the report's task-level inference calibrated? Checked on studies with fresh problems.

Studies from `devtools.calibration.task_level` (every study a new sample of the task's problems)
go through `ablate.report.stats.crossed`, the code the report runs. Against the TASK truth:

- coverage of the 95% crossed interval of an arm's mean and of a contrast arm − arm 0 (the
  per-(seed, problem) differences), beside the old fixed-set reading (Student t over the per-seed
  means, `inference.t_half_width`), which is conditional on the study's problems: with an arm ×
  problem interaction it covers the truth given the problems (shown too) but not the task's;
- the family-wise error rate of the marks under the null (4 arms, no task-level difference):
  Holm over the 3 crossed p-values, mark = Holm p < 0.05, must stay <= 0.05;
- equivalence (TOST, `crossed.equivalent` on the 90% interval, margin m): P(equivalent) at a
  true difference of ±m must stay <= 0.05; at 0 it is the power.

A study is the unit: rates over the arms of a study are averaged within it first, and every rate
carries its Monte-Carlo SE (`calibration.study_rate`).
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
from scipy import stats as sps

from ablate.report.stats import crossed as cx
from ablate.report.stats import inference as stats
from devtools.calibration.task_level import TaskModel, simulate_task

MARGIN = 0.03
BATCH_ELEMENTS = 2**22  # y elements per simulated batch: bounds the memory of crossed()


def _covered(mean: np.ndarray, half: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """1/0 where the interval mean ± half holds truth, NaN where there is no interval."""
    hit = (np.abs(mean - truth) <= half).astype(float)
    return np.where(np.isnan(half), np.nan, hit)


def fixed_set(y: np.ndarray, confidence: float = stats.CONFIDENCE) -> tuple:
    """The old reading: mean and Student-t half-width over the per-seed means of y [..., n, J]."""
    seeds = y.mean(axis=-1)  # [..., n]
    half = stats.t_half_width(seeds.std(axis=-1, ddof=1), seeds.shape[-1], confidence)
    return seeds.mean(axis=-1), half


def crossed_interval(y: np.ndarray, confidence: float = stats.CONFIDENCE) -> tuple:
    """Mean and crossed half-width of y [..., n, J], plus the Crossed summary."""
    c = cx.crossed(y)
    return c.mean, c.half_width(confidence), c


def first_rule(c: cx.Crossed) -> tuple[np.ndarray, np.ndarray]:
    """(se, df) of the rule crossed.py used first (kept here to show what it missed): both
    components clipped at 0 and dropped from the variance, plain Satterthwaite df over the kept
    terms; rebuilt from the components of `c`."""
    n, J = c.n, c.problems
    keep_seed, keep_problem = c.seed_var > 0, c.problem_var > 0
    seed = np.where(keep_seed, J * c.seed_var + c.resid_var, 0.0)  # c_seed·MS_seed
    problem = np.where(keep_problem, n * c.problem_var + c.resid_var, 0.0)
    resid = (1.0 - keep_seed - keep_problem) * c.resid_var
    terms = [(seed, n - 1), (problem, J - 1), (resid, (n - 1) * (J - 1))]
    total = sum(t for t, _ in terms)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = total**2 / sum(np.where(nu > 0, t**2 / max(nu, 1), 0.0) for t, nu in terms)
    return np.sqrt(total / (n * J)), df


def first_rule_half(c: cx.Crossed) -> np.ndarray:
    se, df = first_rule(c)
    with np.errstate(invalid="ignore"):
        half = sps.t.ppf((1 + stats.CONFIDENCE) / 2, df) * se
    return np.where(c.n < stats.MIN_SEEDS, np.nan, half)


def _first_rule_p(c: cx.Crossed) -> np.ndarray:
    se, df = first_rule(c)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = 2 * sps.t.sf(np.abs(c.mean) / se, df)
    return np.where((c.n < stats.MIN_SEEDS) | ~(se > 0), np.nan, p)


def null_hits(y: np.ndarray, truth: np.ndarray, fixed: np.ndarray, margin: float) -> dict:
    """Per-study hits of null studies (all task truths equal): y [S, A, n, J], truth [A],
    fixed [S, A] -> {name: [S, ...] hits}."""
    out = {}
    mean, half, c = crossed_interval(y)
    out["arm"] = _covered(mean, half, truth)
    out["arm_first"] = _covered(mean, first_rule_half(c), truth)
    out["arm_fixed"] = _covered(*fixed_set(y), truth)
    d = y[:, 1:] - y[:, :1]  # [S, A-1, n, J]
    mean, half, c = crossed_interval(d)
    out["contrast"] = _covered(mean, half, truth[1:] - truth[:1])
    out["contrast_first"] = _covered(mean, first_rule_half(c), truth[1:] - truth[:1])
    fmean, fhalf = fixed_set(d)
    out["contrast_fixed"] = _covered(fmean, fhalf, truth[1:] - truth[:1])
    out["contrast_fixed_own"] = _covered(fmean, fhalf, fixed[:, 1:] - fixed[:, :1])
    out["fwer"] = (stats.holm(c.p_value()) < stats.ALPHA).any(axis=-1)
    out["fwer_first"] = (stats.holm(_first_rule_p(c)) < stats.ALPHA).any(axis=-1)
    paired = stats.paired_t_p(d.mean(axis=-1))  # the old marks: paired t over per-seed means
    out["fwer_fixed"] = (stats.holm(paired) < stats.ALPHA).any(axis=-1)
    out["equiv_null"] = _equivalent(d, margin)
    return out


def _equivalent(d: np.ndarray, margin: float) -> np.ndarray:
    mean, half, _ = crossed_interval(d, cx.EQUIVALENCE_CONFIDENCE)
    return np.where(np.isnan(half), np.nan, cx.equivalent(mean - half, mean + half, margin))


def margin_hits(y: np.ndarray, truth: np.ndarray, margin: float) -> dict:
    """Studies whose arms 1.. sit exactly at ±margin from arm 0: y [S, A, n, J], truth [A]."""
    d = y[:, 1:] - y[:, :1]
    mean, half, _ = crossed_interval(d)
    covered = _covered(mean, half, truth[1:] - truth[:1])
    return {"equiv_margin": _equivalent(d, margin), "contrast_at_margin": covered}


def _batched(model: TaskModel, studies: int, seed: list[int], score) -> dict:
    """Simulate in batches (bounded memory) and concatenate `score(sim)` dicts of [S, ...]."""
    size = model.arms * model.seeds * model.problems
    batch = max(1, min(studies, BATCH_ELEMENTS // size))
    rng = np.random.default_rng(seed)
    parts = []
    for start in range(0, studies, batch):
        parts.append(score(simulate_task(model, min(batch, studies - start), rng)))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def calibrate_cell(model: TaskModel, studies: int, seed: int = 0, margin: float = MARGIN) -> dict:
    """All task-level rates of one scenario (model's arms and effects are overridden): null
    studies with 4 arms, and studies with arms at +margin and −margin from arm 0. Returns
    {rate: (value, MC SE)}."""
    null = replace(model, arms=4, effects=None)
    hits = _batched(null, studies, [seed, 0], lambda s: null_hits(s.y, s.truth, s.fixed, margin))
    alt = replace(model, arms=3, effects=(0.0, margin, -margin))
    hits |= _batched(alt, studies, [seed, 1], lambda s: margin_hits(s.y, s.truth, margin))
    return {name: task_rate(h) for name, h in hits.items()}


def task_rate(hits: np.ndarray) -> tuple[float, float]:
    """Rate and Monte-Carlo SE from hits [studies, ...]: each study's mean over its arms first
    (arms of a study are not independent); NaN (no interval: zero variance, e.g. every run of an
    arm diverged) is left out, as the report gives none."""
    h = np.asarray(hits, dtype=float).reshape(len(hits), -1)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        per_study = np.nanmean(h, axis=1)  # [studies]
    per_study = per_study[~np.isnan(per_study)]
    if len(per_study) < 2:
        return float("nan"), float("nan")
    return float(per_study.mean()), float(per_study.std(ddof=1) / np.sqrt(len(per_study)))


SEEDS = (3, 5, 10)
PROBLEMS = (64, 256, 500)  # 500: a whole real eval split (MATH500)
INTERACTIONS = (0.0, 0.5, 1.0)
SCENARIO_PROBLEMS = (64, 500)

#: (label, overrides of TaskModel) of the scenario table, all at τ = 0.5
SCENARIOS = (
    ("K=2 samples", {"samples": 2}),
    ("divergence 10%", {"divergence": 0.1}),
    ("divergence 20%", {"divergence": 0.2}),
    ("heavy-tailed seeds (t3)", {"heavy_tails": True}),
    ("base pass 0.1", {"base_pass": 0.1}),
    ("base pass 0.9", {"base_pass": 0.9}),
    ("seed SD 0.005 (seed part clipped)", {"seed_sd": 0.005}),
    ("independent eval noise", {"shared_eval_noise": False}),
)

#: (rate, header) in table order
COLUMNS = (
    ("arm", "arm cov"),
    ("arm_first", "arm cov first"),
    ("arm_fixed", "arm cov fixed-set"),
    ("contrast", "Δ cov"),
    ("contrast_first", "Δ cov first"),
    ("contrast_fixed", "Δ cov fixed-set"),
    ("contrast_fixed_own", "Δ fixed-set, own truth"),
    ("fwer", "FWER"),
    ("fwer_first", "FWER first"),
    ("fwer_fixed", "FWER fixed-set"),
    ("equiv_margin", "P(eq | ±m)"),
    ("equiv_null", "P(eq | 0)"),
    ("contrast_at_margin", "Δ cov at ±m"),
)


def grid_cases(base: TaskModel, seeds: tuple[int, ...] = SEEDS) -> list:
    """(label, model) over τ × J × n for the main table."""
    taus, problems = INTERACTIONS, PROBLEMS
    return [
        ((f"{tau:g}", str(j), str(n)), replace(base, interaction=tau, problems=j, seeds=n))
        for tau in taus
        for j in problems
        for n in seeds
    ]


def scenario_cases(base: TaskModel, seeds: tuple[int, ...] = SEEDS) -> list:
    """(label, model) of every scenario × J × n, at τ = 0.5."""
    problems = SCENARIO_PROBLEMS
    return [
        ((name, str(j), str(n)), replace(base, interaction=0.5, problems=j, seeds=n, **change))
        for name, change in SCENARIOS
        for j in problems
        for n in seeds
    ]


def run_cases(cases: list, studies: int, seed: int = 0, margin: float = MARGIN) -> list:
    """[(label, {rate: (value, SE)})] for each case, each on its own random stream."""
    return [
        (label, calibrate_cell(m, studies, seed + i, margin)) for i, (label, m) in enumerate(cases)
    ]


def _cell(value: float) -> str:
    return "—" if not np.isfinite(value) else f"{value:.3f}"


def format_rows(rows: list, label_headers: tuple[str, ...]) -> str:
    """Markdown table; MC error = the largest rate SE of the row."""
    header = [*label_headers, *(h for _, h in COLUMNS), "MC error"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, rates in rows:
        errors = [se for _, se in rates.values() if np.isfinite(se)]
        cells = [
            *label,
            *(_cell(rates[k][0]) for k, _ in COLUMNS),
            _cell(max(errors, default=np.nan)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


LEGEND = """\
Columns (rates over simulated studies, each on FRESH problems; the target in brackets):
  τ, J, n             arm × problem interaction (logit SD), eval problems, seeds per arm
  arm cov             95% crossed interval of an arm's mean holds the TASK truth [0.95]
  Δ cov               the same for arm − arm 0 (per-(seed, problem) differences) [0.95]
  … first             the rule crossed.py used first (both components clipped out of the
                      variance, plain Satterthwaite df), for comparison
  … fixed-set         the old reading: Student t over the per-seed means (paired for Δ)
  Δ fixed-set, own    the same against the truth GIVEN the study's problems: what it does promise
  FWER                null studies (4 arms, equal task truths) with any arm marked: Holm over the
                      3 crossed p-values, mark = Holm p < 0.05 [≤ 0.05]
  P(eq | ±m)          equivalence (90% crossed interval inside ±m) when the true Δ is ±m [≤ 0.05]
  P(eq | 0)           the same at Δ = 0: the power of an equivalence claim
  Δ cov at ±m         coverage of the 95% interval of a true Δ = ±m [0.95]
  MC error            the largest Monte-Carlo standard error of the row's rates (study = unit)"""


def describe(base: TaskModel, studies: int, margin: float = MARGIN) -> str:
    noise = "shared by the arms of a seed" if base.shared_eval_noise else "independent per run"
    return (
        f"Model: {base.samples} samples per problem, logit difficulty ~ "
        f"N(logit {base.base_pass:g}, {base.problem_sd:g}²), fresh per study; seed SD of "
        f"pass@1 on the task {base.seed_sd:g} (logit σ = {base.sigma:.3f}), "
        f"a share ρ = {base.shared_fraction:g} common to the arms of a seed; eval noise {noise}; "
        f"margin m = {margin:g}; {studies} studies per row."
    )
