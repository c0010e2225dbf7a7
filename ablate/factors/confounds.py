"""Which factors two arms differ in, and which of those differences the study never declared.

A contrast between two arms answers a question about one factor only when the arms differ in
that factor alone. Presets carry whole recipes (DAPO's 16 updates per rollout, GRPO's KL 0.04),
so an arm built from a preset can silently differ from the reference in its update schedule or
its KL term; the report's claims refuse such pairs and study validation warns about them.

Pure functions on `Algorithm`s, shared by study validation and the report; which fields an
algorithm reads comes from the registries' declarations (`algorithm_checks.unread_fields`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields

from ablate.factors.algorithms import Algorithm
from ablate.factors.checks import unread_fields

#: The update schedule: how far the policy moves off-policy per rollout.
SCHEDULE_FIELDS = ("ppo_epochs", "minibatches")
#: The KL term: a reference model, its weight, estimator and where it enters.
KL_FIELDS = ("kl_coef", "kl_estimator", "kl_in")
#: Fields that only matter when another field switches them on (inert otherwise), besides those
#: the chosen estimator and registry entries do not read.
_INERT_UNLESS = {
    "kl_estimator": lambda a: a.kl_coef > 0,
    "kl_in": lambda a: a.kl_coef > 0,
    "max_gen_batches": lambda a: a.dynamic_sampling,
    "overlong_penalty": lambda a: a.overlong_buffer != 0,
}


def _active(algo: Algorithm, name: str, unread: Iterable[str]) -> bool:
    if name in unread:
        return False
    test = _INERT_UNLESS.get(name)
    return test is None or test(algo)


def differing_fields(a: Algorithm, b: Algorithm) -> list[str]:
    """Fields whose values differ and matter in at least one of the two arms (a KL estimator
    differing between two arms without KL is no difference), in field order."""
    unread_a, unread_b = unread_fields(a), unread_fields(b)
    out = []
    for f in fields(a):
        if getattr(a, f.name) == getattr(b, f.name):
            continue
        if _active(a, f.name, unread_a) or _active(b, f.name, unread_b):
            out.append(f.name)
    return out


def schedule(algo: Algorithm) -> str:
    """The update schedule in words, e.g. '4 updates (1 epoch x 4 minibatches)'."""
    e, m = algo.ppo_epochs, algo.minibatches
    return (
        f"{e * m} update{'s' * (e * m != 1)} "
        f"({e} epoch{'s' * (e != 1)} x {m} minibatch{'es' * (m != 1)})"
    )


def kl_setting(algo: Algorithm) -> str:
    if algo.kl_coef == 0:
        return "none (no reference model)"
    return f"{algo.kl_coef:g} {algo.kl_estimator} in the {algo.kl_in} (reference model)"


def undeclared(
    arm_name: str,
    algo: Algorithm,
    declared: Iterable[str],
    reference_name: str,
    reference: Algorithm,
) -> list[str]:
    """One warning per confound group (update schedule, KL term) in which `algo` differs from
    the reference while the arm sets none of the group's fields itself (the difference comes
    from the presets); each warning says both fixes."""
    declared, diff = set(declared), set(differing_fields(algo, reference))
    out = []
    groups = (
        ("update schedule", SCHEDULE_FIELDS, schedule),
        ("KL term", KL_FIELDS, kl_setting),
    )
    for label, group, describe in groups:
        differ = [f for f in group if f in diff]
        if not differ or declared & set(group):
            continue
        match = ", ".join(f"{f}={getattr(reference, f)!r}" for f in differ)
        keep = ", ".join(f"{f}={getattr(algo, f)!r}" for f in differ)
        out.append(
            f"arm {arm_name!r} differs from the reference {reference_name!r} in its {label} "
            f"({describe(algo)} vs {describe(reference)}) through its preset, so every contrast "
            f"between them also measures that. To compare only their other factors give both "
            f"the same value ({match} on {arm_name!r}, or change the reference); to study it, "
            f"declare it on the arm: arm({arm_name!r}, ..., {keep})"
        )
    return out
