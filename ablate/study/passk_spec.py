"""The Pass@G phase's declaration (`Study(passk=PassKSpec(...))`): every base model × template
measured before any RL, and optionally the best-elicited base (`ElicitSpec`) searched on a
selection split. `ablate.study.passk_phase` runs it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from ablate.factors.fields import Rule


@dataclass(frozen=True, kw_only=True)
class ElicitSpec:
    """The best-elicited base: a declared grid of templates × few-shot examples × temperatures ×
    answer parses, searched on a *selection* split (the first `selection_problems` problems of the
    task's train split, which shares no problem with eval), the winner then measured on the eval
    problems the trials are evaluated on. RL gains are reported over it as well as over step 0."""

    templates: Sequence[str] | None = None
    """Templates searched; None = the study's templates."""
    shots: Sequence[int] = (0, 1)
    """Worked examples (from the train split, never the selection or eval problems) per prompt."""
    temperatures: Sequence[float] = ()
    """Sampling temperatures searched besides the eval temperature, which is always searched."""
    parses: Sequence[str] = ("strict", "lenient")
    """Answer parses searched (`ablate.tasks.templates.PARSES`); "strict" is always searched."""
    selection_problems: int = 64
    """Problems of the selection split."""
    n: int = 8
    """Samples per selection problem (pass@1 is their mean correctness)."""

    RULES: ClassVar[dict[str, Rule]] = {
        "templates": Rule(nonempty=True, note="None searches the study's templates"),
        "shots": Rule(nonempty=True, low=0, note="0 = no examples"),
        "temperatures": Rule(above=0),
        "parses": Rule(nonempty=True),
        "selection_problems": Rule(low=1),
        "n": Rule(low=1),
    }

    def __post_init__(self) -> None:
        for name in ("templates", "shots", "temperatures", "parses"):
            value = getattr(self, name)
            if isinstance(value, list | tuple | range):  # anything else: the checks name it
                object.__setattr__(self, name, tuple(value))


@dataclass(frozen=True, kw_only=True)
class PassKSpec:
    """The Pass@G phase: every base model × template before any RL."""

    n: int = 16
    ks: tuple[int, ...] = (1, 4, 8, 16)
    max_problems: int = 64
    templates: Sequence[str] | None = None
    temperature: float = 1.0
    elicit: ElicitSpec | None = None
    """Also search the best-elicited base (None = off)."""

    RULES: ClassVar[dict[str, Rule]] = {
        "n": Rule(low=1),
        "ks": Rule(nonempty=True, low=1),
        "max_problems": Rule(low=1),
        "templates": Rule(nonempty=True, note="None measures the study's templates"),
        "temperature": Rule(above=0),
    }
