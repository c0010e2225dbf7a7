"""The checks of an `Algorithm`: value sets, ranges, fields that the chosen entries do not read
(refused: an ablation must never claim a factor it did not change), and warnings for
combinations that are legal but inert.

Which fields an entry reads, and the values it accepts there, is declared where the entry is
registered (`reads=`, in `objective`, `surrogates`, `critic`): this module derives the checks
from those declarations. It reads the algorithm through its own fields (`type(algo)`) and imports
nothing from `algorithms`, which imports it. The declaring modules (their ~30 registered entries)
are imported inside the checks, when the first algorithm is built, not by `import ablate`; they
reach torch only at their first tensor operation (`ablate.base.lazy`).
"""

from __future__ import annotations

import re
import sys
import warnings
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, get_args, get_type_hints

from ablate.base.errors import AblateWarning
from ablate.base.registry import FieldRule, finite

# Aggregations that sum token losses inside a sequence: with a sequence-level ratio each
# sequence's (single) loss is then counted |o_i| times, i.e. weighted by its length (trl#3823).
TOKEN_SUMMING_AGGS = (
    "token_mean",
    "seq_mean_token_sum",
    "seq_mean_token_sum_norm",
    "prompt_mean",
    "token_sum",
)

#: DAPO's soft-overlong buffer as a share of the max generation length: 4,096 / 20,480 (§4.1).
DAPO_BUFFER_SHARE = "20%"
_SHARE = re.compile(r"(\d+(?:\.\d+)?)%")

#: A factor: the field that chooses it, the value chosen, and each value's declared reads.
Choice = tuple[str, Any, dict[str, tuple[FieldRule, ...]]]


def problems(algo: Any) -> list[str]:
    """Every problem of `algo`, each with its fix (all at once, not the first)."""
    choices = factor_choices(algo)
    return (
        _literal_problems(algo)
        + _range_problems(algo)
        + _read_problems(algo, choices)
        + _cross_field_problems(algo, choices)
    )


def estimator_reads() -> dict[str, tuple[FieldRule, ...]]:
    """The fields each advantage estimator reads, as its `ESTIMATORS` entry declares them."""
    from ablate.factors.estimators import ESTIMATORS  # its module imports the registries

    return {name: ESTIMATORS.reads(name) for name in ESTIMATORS}


def factor_choices(algo: Any) -> list[Choice]:
    """The advantage estimator and every registry factor of `algo`: (field, chosen value,
    {value: the fields it reads})."""
    from ablate.factors.objective import FACTORS

    out: list[Choice] = [("advantage", algo.advantage, estimator_reads())]
    for name, registry in FACTORS.items():
        out.append((name, getattr(algo, name), {n: registry.reads(n) for n in registry}))
    return out


@dataclass(frozen=True)
class Unread:
    """Why a field does nothing: `factor`={chosen} ignores it, only `readers` read it."""

    factor: str
    chosen: str
    readers: tuple[str, ...]

    def problem(self, name: str, value: Any) -> str:
        readers = ", ".join(repr(r) for r in self.readers[:-1])
        readers = f"{readers} or {self.readers[-1]!r}" if readers else repr(self.readers[0])
        fix = f", or use {self.factor}={self.readers[0]!r}" if len(self.readers) == 1 else ""
        return (
            f"{name}={value!r} does nothing with {self.factor}={self.chosen!r} (only "
            f"{self.factor}={readers} reads it); remove it{fix}"
        )


def unread_fields(algo: Any, choices: list[Choice] | None = None) -> dict[str, Unread]:
    """The fields `algo` never reads: declared by some value of a factor but not by the value
    chosen. The first factor to ignore a field explains it (the estimator first: with GAE the
    scale's fields are unread because the scale is)."""
    out: dict[str, Unread] = {}
    own = {f.name for f in fields(algo)}  # an entry registered for a subclass may read more
    for factor, chosen, entries in factor_choices(algo) if choices is None else choices:
        if not isinstance(chosen, str) or chosen not in entries or factor in out:
            continue  # an unknown value is a literal problem; an unread factor's fields are too
        read = {r.field for r in entries[chosen]}
        declared = dict.fromkeys(r.field for reads in entries.values() for r in reads)
        for name in declared:
            if name not in read and name not in out and name in own:
                readers = tuple(n for n, rs in entries.items() if any(r.field == name for r in rs))
                out[name] = Unread(factor, chosen, readers)
    return out


def _at_default(value: Any, default: Any) -> bool:
    # 1 is not True: a bool field set to an int is not its default, whatever == says
    return value == default and isinstance(value, bool) == isinstance(default, bool)


def _read_problems(a: Any, choices: list[Choice]) -> list[str]:
    """Unread fields set away from their defaults (a silent no-op), then the declared range of
    every field the chosen values read."""
    defaults = {f.name: f.default for f in fields(a)}
    unread = unread_fields(a, choices)
    p = [
        why.problem(name, getattr(a, name))
        for name, why in unread.items()
        if not _at_default(getattr(a, name), defaults[name])
    ]
    for factor, chosen, entries in choices:
        if isinstance(chosen, str) and chosen in entries and factor not in unread:
            found = (rule.problem(a) for rule in entries[chosen] if rule.field not in unread)
            p += [problem for problem in found if problem]
    return p


def _literal_problems(algo: Any) -> list[str]:
    hints = get_type_hints(type(algo))
    problems = []
    for f in fields(algo):
        allowed = get_args(hints[f.name])
        if allowed and all(isinstance(a, str) for a in allowed):
            value = getattr(algo, f.name)
            if value not in allowed:
                valid = ", ".join(repr(a) for a in allowed)
                problems.append(f"{f.name}={value!r} is not one of {valid}")
    return problems


def _range_problems(a: Any) -> list[str]:
    """Ranges of the fields every algorithm reads (the others' are declared by their readers)."""
    p = []
    for name in ("kl_coef", "entropy_coef", "overlong_penalty"):
        v = getattr(a, name)
        if not finite(v) or v < 0:
            p.append(f"{name}={v!r} must be a finite number >= 0")
    for name in ("max_gen_batches", "ppo_epochs", "minibatches"):
        v = getattr(a, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            p.append(f"{name}={v!r} must be an integer >= 1")
    k = a.rollout_staleness
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        p.append(f"rollout_staleness={k!r} must be an integer >= 0 (0 = on-policy rollouts)")
    p += _overlong_buffer_problems(a.overlong_buffer) + _data_range_problems(a)
    for name in ("dynamic_sampling", "mask_truncated", "zero_variance_filter"):
        if not isinstance(getattr(a, name), bool):
            p.append(f"{name}={getattr(a, name)!r} must be True or False")
    return p


def _data_range_problems(a: Any) -> list[str]:
    p = []
    r = a.retire_pass_rate
    if r is not None and (not finite(r) or not 0 < r <= 1):
        p.append(f"retire_pass_rate={r!r} must be None (off) or in (0, 1] (ScaleRL uses 0.9)")
    f = a.reward_floor
    if not finite(f) or f >= 1:
        p.append(f"reward_floor={f!r} must be a finite number below 1 (-1: the ±1 rewards)")
    return p


def _overlong_buffer_problems(b: Any) -> list[str]:
    if isinstance(b, str):
        share = _SHARE.fullmatch(b)
        if share is None or not 0 < float(share.group(1)) < 100:
            return [f"overlong_buffer={b!r} must be tokens or a share in (0%, 100%), e.g. '20%'"]
        return []
    if b is None:  # its meaning before the value said what it is
        return [
            f"overlong_buffer=None is written overlong_buffer={DAPO_BUFFER_SHARE!r} (DAPO's share)"
        ]
    if not isinstance(b, int) or isinstance(b, bool) or b < 0:
        return [f"overlong_buffer={b!r} must be an integer >= 0 (0 = off) or a share such as '20%'"]
    return []


def _cross_field_problems(a: Any, choices: list[Choice]) -> list[str]:
    p = []
    surrogates = next(entries for factor, _, entries in choices if factor == "surrogate")
    known = isinstance(a.surrogate, str) and a.surrogate in surrogates
    if known and a.surrogate != "clip" and a.ratio_level != "token":
        p.append(
            f"ratio_level={a.ratio_level!r} is GSPO's ratio for the clipped surrogate; "
            f"surrogate={a.surrogate!r} takes token ratios (gmpo forms its own sequence ratio)"
        )
    if (
        known
        and a.surrogate == "clip"
        and a.trust_region != "ratio_clip"
        and a.ratio_level != "token"
    ):
        p.append(
            f"ratio_level={a.ratio_level!r} with trust_region={a.trust_region!r}: DPPO's masks "
            "compare each token's probability with its old one; use ratio_level='token'"
        )
    if a.zero_variance_filter and a.dynamic_sampling:
        p.append(
            "zero_variance_filter=True with dynamic_sampling=True: dynamic sampling already drops "
            "flat groups (and refills); choose one"
        )
    if a.overlong_buffer != 0 and finite(a.overlong_penalty) and a.overlong_penalty == 0:
        p.append("overlong_buffer is on but overlong_penalty=0 makes it a no-op; set one of them")
    return p


def _warn(message: str) -> None:
    """An `AblateWarning` attributed to the first caller outside ablate and `dataclasses` (the
    user's line that built the algorithm), not to `dataclasses.replace`."""

    package = str(Path(__file__).parent)
    level, frame = 1, sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename.startswith(package)
        or Path(frame.f_code.co_filename).name == "dataclasses.py"
        or (frame.f_code.co_filename, frame.f_code.co_name) == ("<string>", "__init__")
    ):  # the last one: a dataclass's generated __init__
        level, frame = level + 1, frame.f_back
    warnings.warn(message, AblateWarning, stacklevel=level + 1)


def warn_about_inert_factors(a: Any) -> None:
    if a.surrogate == "gmpo" and a.loss_agg != "seq_mean_token_mean":
        _warn(
            f"surrogate='gmpo' with loss_agg={a.loss_agg!r}: GMPO's loss is one number per "
            "sequence, averaged over sequences (loss_agg='seq_mean_token_mean'); other modes "
            "weight sequences by their length",
        )
    if a.ratio_level != "token" and a.loss_agg in TOKEN_SUMMING_AGGS:
        _warn(
            f"ratio_level={a.ratio_level!r} with loss_agg={a.loss_agg!r}: each sequence's loss is "
            "counted once per token, so sequences are weighted by their length (trl#3823). GSPO's "
            "objective is loss_agg='seq_mean_token_mean'.",
        )
    if a.ratio_level != "token" and a.updates_per_rollout == 1:
        _warn(
            f"ratio_level={a.ratio_level!r} with one update per rollout: the ratio is always 1, so "
            "the sequence ratio and its clip change nothing. GSPO uses minibatches=4 (§5.1).",
        )
