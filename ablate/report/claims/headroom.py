"""Claim 6 (Yue et al. 2025, "Does Reinforcement Learning Really Incentivize Reasoning Capacity
in LLMs Beyond the Base Model?", arXiv 2504.13837): RL raises pass@1 more than pass@k at large k.

Read as one estimand (statistics.md §6):
- Arms: the RL arms trained on the verifier's rewards only (`real_reward_arms`): no reward
  control (random, format-only ... rewards), no A/A replicate, not the positive control; in the
  main (model, template) cell only (`arms.main_cell`: one base model, one template; a claim about
  RL on that base). Complete seeds only, every chosen arm in every seed (exchangeable units): a
  seed missing an arm, or where an arm diverged or failed, is left out and named (a broken
  policy's pass@k = 0 would count as RL losing more pass@k than pass@1, i.e. for the claim).
- k: "large k" is k >= K_MIN, estimated without bias per problem from at least SAMPLES_PER_K · k
  samples (`large_k`); otherwise the claim is "not testable" and says what the eval drew.
- Scale: each gain is a share of the headroom the base model left, (final − base) / (1 − base),
  on the task means of the final and the step-0 (base) eval. A raw difference of gains favours
  the claim by arithmetic wherever base pass@k is near 1 (pass@k has no room left); the share
  removes that: a run that cuts every problem's failure rate by the same factor r closes
  1 − r of pass@1's headroom and 1 − r^k of pass@k's, so under such a uniform improvement the
  statistic is negative, and only RL that narrows what the model can solve at k makes it
  positive. The logit scale was the alternative; the share stays defined at a base pass rate
  of 0 and reads as a fraction of what was left to gain.
- Test: the statistic T = share(pass@1) − share(pass@k), per arm, is linearised per (seed,
  problem) (`linearised`: T plus the delta method's first-order terms, so the values average to T
  and carry its sampling variance), averaged over the arms, and goes through the headline's
  crossed contrast (`estimand.task_claim`): interval, df and the exact test as every claim.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ablate.report.claims import arms, estimand, rules
from ablate.report.data.load import StudyData
from ablate.report.stats import measures as m

K_MIN = 8  # "large k"
SAMPLES_PER_K = 2  # at least this many eval samples per problem per unit of k
CEILING = 0.95  # a base pass@k this high leaves too little headroom to share out


def real_reward_arms(data: StudyData) -> list[str]:
    """RL arms trained on the verifier's rewards: compared arms (A/A replicates and the positive
    control left out) without a reward control."""
    return [a for a in data.compared_arms if data.algorithm(a).reward_control == "none"]


def large_k(data: StudyData, samples: int) -> int | None:
    """The k claim 6 reads: the largest logged eval k (or K_MIN) with k >= K_MIN and at least
    SAMPLES_PER_K · k samples per problem; None when there is none."""
    ks = {*m.eval_ks(data.history), K_MIN}
    return max((k for k in ks if k >= K_MIN and SAMPLES_PER_K * k <= samples), default=None)


def headroom_share(final: np.ndarray, base: np.ndarray) -> np.ndarray:
    """The gain as a share of the headroom the base left: (final − base) / (1 − base)."""
    return (np.asarray(final) - base) / (1 - np.asarray(base))


def linearised(f1: np.ndarray, b1: np.ndarray, fk: np.ndarray, bk: np.ndarray) -> np.ndarray:
    """Per-(seed, problem) values [n, J] of T = share(F1, B1) − share(Fk, Bk), the shares of the
    task means F, B of final and base pass@1 and pass@k [n, J] each: T plus its first-order
    (delta-method) terms ∂T/∂F·(f − F) + ∂T/∂B·(b − B), which average to 0, so the values
    average to T and their crossed variance is T's."""
    out = np.zeros(np.shape(f1))
    for sign, f, b in ((1.0, f1, b1), (-1.0, fk, bk)):
        F, B = f.mean(), b.mean()
        dB = -(1 - F) / (1 - B) ** 2  # ∂share/∂B; ∂share/∂F = 1 / (1 − B)
        out += sign * (headroom_share(F, B) + (f - F) / (1 - B) + dB * (b - B))
    return out


def _per_trial(data: StudyData, ids: pd.Series, k: int) -> dict[str, pd.DataFrame]:
    """trial_id × problem_id tables "b1", "bk" (step-0 eval) and "f1", "fk" (last eval)."""
    s = data.samples[data.samples["trial_id"].isin(set(ids))]
    last = s["step"] == s.groupby("trial_id")["step"].transform("max")
    base, final = s[s["step"] == 0], s[last & (s["step"] > 0)]
    return {
        "b1": estimand.rates_k(base, 1),
        "bk": estimand.rates_k(base, k),
        "f1": estimand.rates_k(final, 1),
        "fk": estimand.rates_k(final, k),
    }


def _complete_seeds(done: pd.DataFrame, tables: dict, chosen: list[str]) -> list:
    """Seeds where every chosen arm has a complete trial with both evals on record."""
    held = set.intersection(*(set(t.index) for t in tables.values()))
    per_seed = done[done["trial_id"].isin(held)].groupby("seed")["arm"].apply(set)
    return sorted(s for s, have in per_seed.items() if set(chosen) <= have)


def _matrices(done: pd.DataFrame, tables: dict, chosen: list[str], seeds: list) -> dict:
    """Per table, one [n, J] matrix per chosen arm over `seeds` and the problems all hold."""
    ids = {a: done[done["arm"] == a].drop_duplicates("seed").set_index("seed")["trial_id"]
           for a in chosen}  # fmt: skip
    frames = {name: [t.reindex(ids[a].loc[seeds]) for a in chosen] for name, t in tables.items()}
    every = [f for fs in frames.values() for f in fs]
    problems = sorted(set.intersection(*(set(f.columns[f.notna().all(axis=0)]) for f in every)))
    return {name: [f[problems].to_numpy(float) for f in fs] for name, fs in frames.items()}


def _left_out(data: StudyData, cell_arms: set[str], chosen: list[str]) -> str:
    """The cell's arms claim 6 does not average, each with why."""
    why = {a: "A/A replicate" for a in data.replicates}
    if data.positive_control:
        why[data.positive_control] = "positive control"
    out = []
    for a in sorted(cell_arms - set(chosen)):
        control = data.algorithm(a).reward_control
        out.append(f"{a} ({why.get(a, f'reward control {control}')})")
    return f"left out: {', '.join(out)}" if out else ""


def claim_rl_raises_pass_at_1_more_than_pass_at_k(data: StudyData) -> rules.Claim:
    """Claim 6 on the real-reward RL arms of the main cell, about the task (module docstring)."""
    model, template = arms.main_cell(data)
    base = rules.Claim(
        id="6",
        statement="RL raises pass@1 more than pass@k at large k",
        statistic="share of the base's headroom gained in pass@1 − in pass@k, (final − base) / "
        f"(1 − base) of the task means, RL arms on real rewards in {model} · {template} (N = "
        "seeds, crossed over problems)",
    )
    done = data.complete()
    done = done[(done["model"] == model) & (done["template"] == template)]
    chosen = [a for a in real_reward_arms(data) if a in set(done["arm"])]
    if not chosen:
        return rules.untested(base, f"needs an RL arm trained on real rewards in {model}")
    if not len(data.samples):
        return rules.untested(base, "needs per-sample eval records")
    counts = data.samples[data.samples["trial_id"].isin(set(done["trial_id"]))]
    counts = counts.groupby(["trial_id", "step", "problem_id"]).size()
    samples = int(counts.min()) if len(counts) else 0
    k = large_k(data, samples)
    if k is None:
        logged = ", ".join(map(str, m.eval_ks(data.history))) or "none"
        why = (
            f"pass@k at large k needs k >= {K_MIN} from >= {SAMPLES_PER_K}k samples per problem; "
            f"this eval draws {samples} per problem (logged k: {logged})"
        )
        return rules.untested(base, why, rules.NOT_TESTABLE)
    base = replace(base, statistic=base.statistic.replace("pass@k", f"pass@{k}"))
    t = data.trials
    planned = t[(t["model"] == model) & (t["template"] == template) & t["arm"].isin(chosen)]
    left = sorted(set(planned["seed"]))  # every seed an RL arm was to run here
    note = _left_out(
        data, set(t[(t["model"] == model) & (t["template"] == template)]["arm"]), chosen
    )
    return _tested(base, data, done[done["arm"].isin(chosen)], chosen, k, (note, left))


def _tested(base: rules.Claim, data: StudyData, done, chosen: list[str], k: int, context):
    """Claim 6 on `done`, the chosen arms' complete trials of the cell, at k; `context`: the
    note so far and the seeds the arms were to run."""
    note, planned = context
    names = ", ".join(chosen)
    tables = _per_trial(data, done["trial_id"], k)
    if any(not len(t) for t in tables.values()):
        why = "needs each trial's step-0 (base) and final per-problem eval (EvalSpec(at_start))"
        return rules.untested(base, why, arms=names)
    seeds = _complete_seeds(done, tables, chosen)
    if left := sorted(set(planned) - set(seeds)):
        why = f"seeds {left} left out: not every arm completed them"
        note = "; ".join(filter(None, [note, why]))
    if not seeds:
        return rules.untested(base, note, rules.NOT_TESTABLE, arms=names)
    mats = _matrices(done, tables, chosen, seeds)
    base_k = float(np.mean([b.mean() for b in mats["bk"]]))
    if base_k >= CEILING:
        why = f"base pass@{k} = {base_k:.3f} >= {CEILING}: no headroom left to share out"
        return rules.untested(base, "; ".join(filter(None, [note, why])), rules.NOT_TESTABLE)
    per_arm = [
        linearised(*(mats[x][i] for x in ("f1", "b1", "fk", "bk"))) for i in range(len(chosen))
    ]
    return estimand.task_claim(base, np.mean(per_arm, axis=0), arms=names, note=note)  # [n, J]
