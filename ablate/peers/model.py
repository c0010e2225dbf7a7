"""The vocabulary of the peer tables (`trl.py`, `verl.py`): how one trainer expresses one value of
one `Algorithm` field, and which values of each field are told apart.

A table maps field → value class → variants. A value class is a Literal value, True/False, or a
named range of a numeric field ("0", "above 0"). A variant is one answer — exact (the config keys),
approximate (keys and what differs), cannot (why), or moot (another field refuses in that case) —
that applies `when` other fields have the given value classes; the first matching variant wins,
and the last one of every list applies unconditionally. A value or field a table does not list
cannot be exported (a new surrogate and its fields are refused until a table maps them), and a
field the algorithm does not read (declared by the registries' `reads=`) needs no key.

Standard library only, like `ablate.factors.algorithms`: the tables are data, read by the
matrix, the export and the tests.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args, get_type_hints

from ablate.factors.algorithms import Algorithm
from ablate.factors.checks import unread_fields
from ablate.factors.spec import Budget

Kind = Literal["exact", "approximate", "cannot", "moot"]


@dataclass(frozen=True)
class PeerBudget:
    """The trial budget an export fills budget-dependent keys from (ablate's defaults)."""

    prompts: int = Budget().prompts_per_step
    group: int = Budget().group_size
    max_new_tokens: int = Budget().max_new_tokens


@dataclass(frozen=True)
class Expr:
    """A key value computed from the (resolved) algorithm and the budget; `text` is how the
    matrix shows it. `fn=None` means the value of the field the entry belongs to."""

    text: str
    fn: Callable[[Algorithm, PeerBudget], Any] | None = None

    def value(self, name: str, algo: Algorithm, budget: PeerBudget) -> Any:
        return getattr(algo, name) if self.fn is None else self.fn(algo, budget)


#: The entry's own field value, e.g. {"epsilon": SELF} under clip_low.
SELF = Expr("")


@dataclass(frozen=True)
class Variant:
    kind: Kind
    keys: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""
    when: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    see: str = ""
    """A cross-reference shown in the matrix only (e.g. which field sets a fused key)."""


Table = Mapping[str, Mapping[str, tuple[Variant, ...]]]


def _when(when: Mapping[str, str | tuple[str, ...]] | None) -> dict[str, tuple[str, ...]]:
    return {k: (v,) if isinstance(v, str) else tuple(v) for k, v in (when or {}).items()}


def exact(
    keys: Mapping[str, Any] | None = None, note: str = "", when=None, see: str = ""
) -> Variant:
    return Variant("exact", dict(keys or {}), note, _when(when), see)


def approx(keys: Mapping[str, Any] | None, note: str, when=None) -> Variant:
    return Variant("approximate", dict(keys or {}), note, _when(when))


def cannot(why: str, when=None) -> Variant:
    return Variant("cannot", {}, why, _when(when))


def moot(why: str, when=None) -> Variant:
    """Another field of the same algorithm refuses in this case: nothing to report here."""
    return Variant("moot", {}, why, _when(when))


def one(*variants: Variant) -> tuple[Variant, ...]:
    return variants


# --- value classes -----------------------------------------------------------------------------
ValueTest = Callable[[Any, Algorithm], bool]


def _any(v: Any, a: Algorithm) -> bool:
    return True


def _is_none(v: Any, a: Algorithm) -> bool:
    return v is None


def _zero(v: Any, a: Algorithm) -> bool:
    return v == 0


ANY: tuple[tuple[str, ValueTest], ...] = (("any", _any),)
OPTIONAL: tuple[tuple[str, ValueTest], ...] = (("None", _is_none), ("a number", _any))
ZERO_OR_MORE: tuple[tuple[str, ValueTest], ...] = (("0", _zero), ("above 0", _any))

#: Value classes of the fields that are neither Literal nor bool, first match wins (a field not
#: listed is one class, "any").
NUMERIC_CLASSES: dict[str, tuple[tuple[str, ValueTest], ...]] = {
    "std_eps": (
        ("1e-6", lambda v, a: v == 1e-6),
        ("1e-4", lambda v, a: v == 1e-4),
        ("other", _any),
    ),
    "gae_gamma": ANY,
    "gae_lambda": ANY,
    "vf_coef": ANY,
    "vf_clip": OPTIONAL,
    "critic_lr": OPTIONAL,
    "clip_low": (("below 1", lambda v, a: v < 1), ("1 (no lower bound)", _any)),
    "clip_high": ANY,
    "dual_clip": (
        ("None", _is_none),
        ("above 1 + clip_high", lambda v, a: v > 1 + a.clip_high),
        ("up to 1 + clip_high", _any),
    ),
    "sapo_tau_pos": ANY,
    "sapo_tau_neg": ANY,
    "cov_fraction": ANY,
    "cov_clip_low": ANY,
    "cov_clip_high": ANY,
    "kl_cov_coef": ANY,
    "loss_norm_constant": (("None (max new tokens)", _is_none), ("an integer", _any)),
    "kl_coef": ZERO_OR_MORE,
    "entropy_coef": ZERO_OR_MORE,
    "max_gen_batches": ANY,
    "overlong_buffer": (("0 (off)", _zero), ("tokens or a share", _any)),
    "overlong_penalty": ANY,
    "retire_pass_rate": OPTIONAL,
    "reward_control_p": ANY,
    "reward_noise_fraction": ANY,
    "positive_weight": (("1", lambda v, a: v == 1), ("other", _any)),
    "ratio_cap": OPTIONAL,
    "reward_floor": (("0", _zero), ("other", _any)),
    "rollout_correction_cap": ANY,
    "rollout_correction_floor": OPTIONAL,
    "rejection_k3_max": ANY,
    "opsm_delta": ANY,
    "m2po_threshold": ANY,
    "rollout_staleness": (("0", _zero), ("above 0", _any)),
    "ppo_epochs": ANY,
    "minibatches": (("1", lambda v, a: v == 1), ("above 1", _any)),
}


def field_names(cls: type = Algorithm) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


@functools.cache
def value_classes(name: str, cls: type = Algorithm) -> tuple[tuple[str, ValueTest], ...]:
    """The value classes of field `name`: its Literal values, True/False, or NUMERIC_CLASSES."""
    hint = get_type_hints(cls)[name]
    values = get_args(hint)
    if values and all(isinstance(v, str) for v in values):
        return tuple((v, lambda x, a, v=v: x == v) for v in values)
    if hint is bool:
        return (("True", lambda x, a: x is True), ("False", lambda x, a: x is False))
    return NUMERIC_CLASSES.get(name, ANY)


def value_class(name: str, algo: Algorithm) -> str:
    value = getattr(algo, name)
    return next(label for label, test in value_classes(name, type(algo)) if test(value, algo))


# --- fields an algorithm does not read -----------------------------------------------------------
# Besides those the chosen estimator and registry entries do not read (their `reads=`): fields
# that another field switches off.
_INERT: dict[str, tuple[str, Callable[[Algorithm], bool]]] = {
    "kl_estimator": ("kl_coef=0", lambda a: a.kl_coef == 0),
    "kl_in": ("kl_coef=0", lambda a: a.kl_coef == 0),
    "max_gen_batches": ("no dynamic sampling", lambda a: not a.dynamic_sampling),
    "overlong_penalty": ("no overlong buffer", lambda a: a.overlong_buffer == 0),
    "rollout_correction_cap": ("no rollout correction", lambda a: a.rollout_correction == "none"),
}


def inert_fields(algo: Algorithm) -> set[str]:
    """The fields `algo` never reads (their values then need no peer key)."""
    return set(unread_fields(algo)) | {name for name, (_, off) in _INERT.items() if off(algo)}


#: What a table that does not list a value or field answers: it cannot be exported.
UNMAPPED = (cannot("not in this trainer's table in ablate/peers/ (unmapped: not exported)"),)


def variants(table: Table, name: str, label: str) -> tuple[Variant, ...]:
    """The variants of `table` for field `name` in value class `label` (UNMAPPED if none)."""
    return table.get(name, {}).get(label, UNMAPPED)


def choose(table: Table, name: str, algo: Algorithm) -> Variant:
    """The variant of `table` for field `name` of `algo` (first whose `when` matches)."""
    for variant in variants(table, name, value_class(name, algo)):
        if all(value_class(k, algo) in allowed for k, allowed in variant.when.items()):
            return variant
    raise LookupError(f"no variant of {name}={getattr(algo, name)!r} matches (table bug)")
