"""The supported-factor matrix and the export of an algorithm to a peer trainer's config, both read
from the peer tables. Rendering to text lives here too; the CLI only prints."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ablate.base.errors import ConfigError
from ablate.factors.algorithms import Algorithm
from ablate.peers import trl, verl
from ablate.peers.model import (
    Expr,
    PeerBudget,
    Variant,
    choose,
    field_names,
    inert_fields,
    value_class,
    value_classes,
    variants,
)

PEERS: dict[str, ModuleType] = {"trl": trl, "verl": verl}


def peer(target: str) -> ModuleType:
    if target not in PEERS:
        raise ConfigError(f"unknown export target {target!r}; valid: {', '.join(PEERS)}")
    return PEERS[target]


# --- export --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Line:
    """One field's part of an export: the keys it sets and its note."""

    field: str
    value: Any
    kind: str
    keys: dict[str, Any]
    note: str


@dataclass(frozen=True)
class Export:
    target: str
    name: str
    lines: tuple[Line, ...]
    budget: dict[str, Any] = field(default_factory=dict)

    @property
    def keys(self) -> dict[str, Any]:
        """The algorithm's config keys, in Algorithm field order."""
        return {k: v for line in self.lines for k, v in line.keys.items()}


def export_config(
    algo: Algorithm, target: str, *, name: str, budget: PeerBudget | None = None
) -> Export:
    """The `target` config running `algo`; ConfigError naming every field it cannot express."""
    table = peer(target).TABLE
    budget = budget or PeerBudget()
    if algo.loss_norm_constant == budget.max_new_tokens:
        algo = dataclasses.replace(algo, loss_norm_constant=None)  # the same constant
    resolved = algo.resolve(max_new_tokens=budget.max_new_tokens)
    lines, problems = [], []
    inert = inert_fields(algo)
    for f in field_names(type(algo)):
        if f in inert:
            continue
        variant = choose(table, f, algo)
        shown = f"{f}={getattr(algo, f)!r}"
        if variant.kind == "cannot":
            problems.append(f"{shown}: {variant.note}")
            continue
        try:
            keys = {k: _value(v, f, resolved, budget) for k, v in variant.keys.items()}
        except ConfigError as exc:
            problems.append(f"{shown}: {exc}")
            continue
        note = variant.note.format(**dataclasses.asdict(resolved), **dataclasses.asdict(budget))
        lines.append(Line(f, getattr(algo, f), variant.kind, keys, note))
    if problems:
        label = f"{peer(target).NAME} {peer(target).VERSION}"
        raise ConfigError(
            f"{label} cannot run {name!r} as ablate does:\n  - " + "\n  - ".join(problems)
        )
    if any(line.kind == "moot" for line in lines):
        raise RuntimeError(f"{target} table: a moot entry without a refusal ({name})")
    _check_conflicts(lines)
    return Export(target, name, tuple(lines), _budget_keys(target, algo, budget))


def _value(v: Any, name: str, algo: Algorithm, budget: PeerBudget) -> Any:
    return v.value(name, algo, budget) if isinstance(v, Expr) else v


def _check_conflicts(lines: list[Line]) -> None:
    seen: dict[str, tuple[str, Any]] = {}
    for line in lines:
        for k, v in line.keys.items():
            if k in seen and seen[k][1] != v:
                raise RuntimeError(
                    f"{k} set to {seen[k][1]!r} by {seen[k][0]} and {v!r} by {line.field}"
                )
            seen[k] = (line.field, v)


def _budget_keys(target: str, algo: Algorithm, b: PeerBudget) -> dict[str, Any]:
    if target == "verl":
        return {
            "data.train_batch_size": b.prompts,
            "actor_rollout_ref.rollout.n": b.group,
            "data.max_response_length": b.max_new_tokens,
        }
    completions = b.prompts * b.group
    if completions % algo.minibatches:
        raise ConfigError(
            f"{b.prompts} prompts × {b.group} completions do not split into "
            f"minibatches={algo.minibatches}"
        )
    return {
        "num_generations": b.group,
        "max_completion_length": b.max_new_tokens,
        "per_device_train_batch_size": completions // algo.minibatches,
        "gradient_accumulation_steps": 1,
    }


# --- rendering an export -----------------------------------------------------------------------
def _comments(line: Line) -> list[str]:
    if line.kind == "approximate":
        return [f"# approximate: {line.field}={line.value!r}: {line.note}"]
    return [f"# {line.field}: {line.note}"] if line.note else []


def python_value(v: Any) -> str:
    """A value as Python source, strings in double quotes."""
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(python_value(x) for x in v) + "]"
    return repr(v)


def render_trl(export: Export) -> str:
    out = [
        f"# TRL {trl.VERSION}: GRPOConfig running ablate's {export.name!r}",
        "from trl import GRPOConfig",
        "",
        "config = GRPOConfig(",
        '    output_dir="...",  # and your logging, precision and hardware settings',
    ]
    for line in export.lines:
        out += [f"    {c}" for c in _comments(line)]
        out += [f"    {k}={python_value(v)}," for k, v in line.keys.items()]
    out.append("    # budget: prompts × group completions per step, in one process")
    out += [f"    {k}={python_value(v)}," for k, v in export.budget.items()]
    out.append(")")
    return "\n".join(out)


_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*|\$\{[A-Za-z0-9_.]+\}")


def hydra_value(v: Any) -> str:
    """A Python value as a Hydra override value (lowercase booleans, null, quoted odd strings)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int | float):
        return repr(v)
    text = str(v)
    return text if _BARE.fullmatch(text) else f'"{text}"'


def _override(k: str, v: Any) -> str:
    line = f"{k}={hydra_value(v)}"
    return f"'{line}'" if any(c in line for c in '$"[] ') else line


def render_verl(export: Export) -> str:
    out = [
        f"# verl {verl.VERSION}: overrides for python -m verl.trainer.main_ppo running ablate's "
        f"{export.name!r}",
        "# (add your model, data, reward function and hardware keys)",
    ]
    for line in export.lines:
        out += _comments(line)
        out += [_override(k, v) for k, v in line.keys.items()]
    out.append("# budget")
    out += [_override(k, v) for k, v in export.budget.items()]
    return "\n".join(out)


def render(export: Export) -> str:
    return render_trl(export) if export.target == "trl" else render_verl(export)


# --- the matrix ----------------------------------------------------------------------------------
def _key_text(k: str, v: Any, name: str) -> str:
    if isinstance(v, Expr):
        return f"{k}={v.text or name}"
    return f"{k}={v!r}"


def _variant_text(v: Variant, name: str) -> str:
    cond = " ".join(f"{k}={'|'.join(vals)}" for k, vals in v.when.items())
    head = f"if {cond}: " if cond else ""
    keys = ", ".join(_key_text(k, val, name) for k, val in v.keys.items())
    label = {"exact": "exact", "approximate": "approx", "cannot": "cannot", "moot": "n/a"}[v.kind]
    body = "; ".join(part for part in (keys, v.note, v.see) if part)
    return f"{head}{label}" + (f": {body}" if body else "")


def matrix_rows(cls: type = Algorithm) -> list[tuple[str, str, str, str]]:
    """(field, value class, TRL, verl) for every field and value class of `cls`, in field
    order (a value or field a table does not list shows as unmapped)."""
    rows = []
    for name in field_names(cls):
        for label, _ in value_classes(name, cls):
            cells = [
                "\n".join(_variant_text(v, name) for v in variants(PEERS[p].TABLE, name, label))
                for p in ("trl", "verl")
            ]
            rows.append((name, label, *cells))
    return rows


__all__ = [
    "PEERS",
    "Export",
    "Line",
    "export_config",
    "hydra_value",
    "matrix_rows",
    "render",
    "value_class",
]
