"""How a claim chooses its arms and cell: the main (model, template) cell, arms whose algorithm
passes a test, a pair that differs in the claim's factors only, and whether the factor acts at
all in the run (statistics.md §5.3: a factor that does not act makes the two arms the same run).
"""

from __future__ import annotations

from collections.abc import Sequence

from ablate.factors import confounds
from ablate.report.data.load import StudyData
from ablate.report.stats import measures as m

NAN = float("nan")
#: A factor that changes under 1% of the units it acts on (the upper clip binding on < 1% of
#: tokens, < 1% of samples truncated for overlong filtering) leaves the two arms nearly the same
#: run under common random numbers: "equivalent" would follow by construction and a difference
#: could not be seen, so the claim is "not testable at this setting" (statistics.md §5.3).
ACTS_MIN = 0.01
CLIP_BINDS_MIN = ACTS_MIN  # claim 2's name for it
#: Fields whose effect depends on an event in the run, with the logged metric that counts the
#: event (a fraction of tokens or samples) and how a note says it.
FACTOR_ACTIVITY = {
    "clip_high": ("policy/clip_frac_high", "the upper clip binds on {:.2%} of tokens"),
    "mask_truncated": ("length/truncation_rate", "{:.2%} of samples are truncated"),
}


def main_cell(data: StudyData) -> tuple[str, str]:
    """The (model, template) with the most complete trials: where the arms are compared."""
    done = data.complete()
    if not len(done):
        if not len(data.trials):
            return "", ""
        first = data.trials.iloc[0]
        return first["model"], first["template"]
    return tuple(done.groupby(["model", "template"]).size().idxmax())


def arms_where(data: StudyData, test) -> list[str]:
    """Compared arms with a complete trial in the main cell whose algorithm passes `test`."""
    model, template = main_cell(data)
    done = data.complete()
    done = set(done[(done["model"] == model) & (done["template"] == template)]["arm"])
    return [a for a in data.compared_arms if a in done and test(data.algorithm(a))]


def exact_pair(
    data: StudyData, first: list[str], second: list[str], factors: set[str]
) -> tuple[tuple[str, str] | None, str]:
    """A pair (a, b) that differs in the claim's factors only (the reference arm preferred),
    or None with the reason: the extra fields of the least confounded pair."""
    pairs = [(a, b) for a in first for b in second if a != b]
    if not pairs:
        return None, ""

    def extra(pair: tuple[str, str]) -> list[str]:
        diff = confounds.differing_fields(data.algorithm(pair[0]), data.algorithm(pair[1]))
        return [f for f in diff if f not in factors]

    ref = data.reference_arm
    ranked = sorted(pairs, key=lambda p: (len(extra(p)), ref not in p))
    best = ranked[0]
    if extra(best):
        also = ", ".join(extra(best))
        return None, f"the closest pair ({best[0]}, {best[1]}) also differs in {also}"
    return best, ""


def activity(data: StudyData, metric: str, arms: Sequence[str], model: str, template: str) -> float:
    """How often the event `metric` counts happens (mean over all steps, then seeds), the larger
    over `arms`: the share of tokens or samples a factor acting on it can change. NaN when
    neither arm logs it."""
    per_trial = m.window_mean(data.history, metric, 0.0, 1.0)
    means = [m.by_seed(data, per_trial, a, model, template).dropna() for a in arms]
    return max((float(s.mean()) for s in means if len(s)), default=NAN)


def inactive_factor(data: StudyData, arm: str, ref: str, model: str, template: str) -> str:
    """Why the pair cannot test its factor at this setting, or "": the two arms differ only in
    fields that act on an event (`FACTOR_ACTIVITY`) and that event happens on fewer than
    ACTS_MIN of its tokens or samples in both arms. A field that acts unconditionally, or an
    event neither arm logs, leaves the pair testable."""
    known = set(data.algorithms) | set(data.trials["arm"])
    if not {arm, ref} <= known:
        return ""
    fields = confounds.differing_fields(data.algorithm(arm), data.algorithm(ref))
    if not fields or not set(fields) <= set(FACTOR_ACTIVITY):
        return ""
    notes = []
    for name in fields:
        metric, words = FACTOR_ACTIVITY[name]
        rate = activity(data, metric, (arm, ref), model, template)
        if not rate < ACTS_MIN:  # NaN (not logged) included: cannot tell, so it is tested
            return ""
        notes.append(words.format(rate))
    return (
        f"{' and '.join(notes)} (the larger of {arm} and {ref}): under {ACTS_MIN:.0%}, the "
        f"factor barely acts here"
    )
