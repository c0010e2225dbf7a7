"""Live controls declared with their effects: `Study(positive_control=Control(arm="grpo_random",
effect=-0.25), graded_control=Control(arm="grpo_noisy", effect=-0.10))`.

A control certifies the design it runs in (statistics reference §6): the positive control (a
gross, known loss such as random rewards) says the study can detect an effect of its size, the
graded control (a declared, smaller effect, e.g. a share of the rewards randomised) says whether
its power near the MDE is what the plan promised. Both run on the contrasts' seeds; `ablate
plan` states each one's detection probability at the design it recommends, the report each
one's MDE and detection probability at its declared effect beside its contrast.

`effect` is the expected Δ pass@1 of the control arm minus the reference, with its sign, declared
before the results. `positive_control="name"` (no declared effect) keeps working.

Like the other check modules this imports nothing from `ablate.study`'s study module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

POSITIVE, GRADED = "positive", "graded"


@dataclass(frozen=True)
class Control:
    """A control arm and its declared effect (Δ pass@1 against the reference, signed)."""

    arm: str
    effect: float | None = None
    kind: str = ""
    """POSITIVE or GRADED: set by the `Study` field that holds the record."""


def normalized(
    positive: Any, graded: Any, effects: Mapping[str, float]
) -> tuple[Any, Any, dict[str, float]]:
    """(positive arm name, graded arm name, {arm: declared effect}) from the Study's fields: a
    `Control` gives its name and effect, a name keeps the effect already declared for it (so
    `dataclasses.replace` of a study keeps its controls' effects). Values that are neither are
    returned as they are, for `control_problems` to report."""
    out: dict[str, float] = {}
    names = []
    for value in (positive, graded):
        if isinstance(value, Control):
            if value.effect is not None:
                out[value.arm] = value.effect
            value = value.arm
        elif isinstance(value, str) and value in effects:
            out[value] = effects[value]
        names.append(value)
    return names[0], names[1], out


def declared(study: Any) -> list[Control]:
    """The study's controls with their kinds and declared effects (None: not declared)."""
    effects = study.control_effects
    pairs = ((POSITIVE, study.positive_control), (GRADED, study.graded_control))
    return [Control(arm, effects.get(arm), kind) for kind, arm in pairs if arm is not None]


def _effect_problem(field: str, c: Control) -> str | None:
    e = c.effect
    ok = isinstance(e, int | float) and not isinstance(e, bool) and math.isfinite(e)
    if not ok or not 0 < abs(e) < 1:
        return (
            f"{field}=Control(arm={c.arm!r}, effect={e!r}): effect must be the expected Δ pass@1 "
            "against the reference, nonzero and inside (−1, 1), e.g. effect=-0.1"
        )
    return None


def control_problems(study: Any) -> list[str]:
    """Each control names an arm of the study other than the reference and its replicates, the
    two name different arms, a graded control declares its effect, and a graded effect is
    smaller than the positive control's and of its sign."""
    names = {a.name: a for a in study.arms}
    out: list[str] = []
    fields = (
        ("positive_control", study.positive_control),
        ("graded_control", study.graded_control),
    )
    for field, arm in fields:
        if arm is None:
            continue
        if not isinstance(arm, str):
            out.append(f"{field}={arm!r} must be an arm name or Control(arm=..., effect=...)")
        elif arm not in names:
            out.append(f"{field}={arm!r} names no arm of the study")
        elif arm == study.reference_arm or names[arm].replicate_of:
            out.append(
                f"{field}={arm!r} must be an arm other than the reference and its replicates"
            )
    if out:
        return out
    controls = {c.kind: c for c in declared(study)}
    for kind, c in controls.items():
        problem = None if c.effect is None else _effect_problem(f"{kind}_control", c)
        out += [problem] if problem else []
    graded, positive = controls.get(GRADED), controls.get(POSITIVE)
    if graded is None or out:
        return out
    if graded.effect is None:
        return [
            f"graded_control={graded.arm!r} needs its declared effect: "
            f"graded_control=Control(arm={graded.arm!r}, effect=-0.1)"
        ]
    if positive is not None and positive.arm == graded.arm:
        return [f"graded_control and positive_control both name {graded.arm!r}: use two arms"]
    if positive is not None and positive.effect is not None:
        if graded.effect * positive.effect < 0:
            out.append(
                f"graded_control effect={graded.effect:g} and positive_control "
                f"effect={positive.effect:g} have opposite signs: a graded control is a smaller "
                "effect of the same kind"
            )
        elif abs(graded.effect) >= abs(positive.effect):
            out.append(
                f"graded_control effect={graded.effect:g} must be smaller in size than the "
                f"positive control's {positive.effect:g} (it calibrates power nearer the MDE)"
            )
    return out


def control_seed_warnings(study: Any) -> list[str]:
    """A control on other seeds than the contrasts certifies another design. The contrasts'
    seeds: those every compared arm but the reference runs (the reference's, without one)."""
    seeds: dict[str, set] = {}
    for arm, _, _, seed in study.cells():
        seeds.setdefault(arm, set()).add(seed)
    others = [
        seeds.get(a.name, set()) for a in study.compared_arms if a.name != study.reference_arm
    ]
    contrasts = set.intersection(*others) if others else seeds.get(study.reference_arm, set())
    out = []
    for c in declared(study):
        own = seeds.get(c.arm, set())
        if isinstance(c.arm, str) and own and own != contrasts:
            out.append(
                f"{c.kind} control {c.arm!r} runs {len(own)} seed(s) {sorted(own)}, the "
                f"contrasts {len(contrasts)} {sorted(contrasts)}: a control certifies the design "
                "it runs in, so run it on the contrasts' seeds"
            )
    return out
