"""A page as one sequence of typed blocks: built once (a study's report by walking its section
list, `build.study_page`; a reproduction's by `reproduction`), then formatted by every writer
(`writers`: report.md and report.html; `paper.paper_tex` reads the same tables in the same
order). What a page says, and in which order, is decided here and only here: the writers
decide how each block looks, never whether it is shown.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ablate.report.data.table import Table


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2  # 1: the page's title


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Stamp:
    """When the page was written."""

    text: str


@dataclass(frozen=True)
class Links:
    """label -> a folder beside the page holding another report (its report.md / .html)."""

    targets: Mapping[str, str]


@dataclass(frozen=True)
class Bullets:
    """A titled list of sentences (a group of findings, the caveats)."""

    title: str
    items: tuple[str, ...]


@dataclass(frozen=True)
class TableBlock:
    table: Table


@dataclass(frozen=True)
class Figure:
    png: Path
    """A PNG under the page's figures/ folder."""


@dataclass(frozen=True)
class Box:
    """Blocks set apart from the rest of the page (the findings)."""

    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class Fold:
    """Blocks below the fold: shown on request (HTML `<details>`), or as the Markdown page's
    appendix, after everything else."""

    summary: str
    blocks: tuple[Block, ...]


Block = Heading | Paragraph | Stamp | Links | Bullets | TableBlock | Figure | Box | Fold


@dataclass
class Page:
    tab: str
    """The HTML page's <title>."""
    blocks: list[Block]
    """The page, from its title on, in reading order."""

    @property
    def tables(self) -> list[Table]:
        """Every table on the page, in the page's order."""
        return [b.table for b in walk(self.blocks) if isinstance(b, TableBlock)]


def walk(blocks: list[Block] | tuple[Block, ...]) -> Iterator[Block]:
    """Every block in reading order, those inside a box or fold included (after it)."""
    for block in blocks:
        yield block
        if isinstance(block, Box | Fold):
            yield from walk(block.blocks)


def opening(
    title: str, stamp: str, summary: str | list[str], links: Mapping[str, str]
) -> list[Block]:
    """The page's head: its title, when it was written, what it is about (a paragraph or
    several) and its links."""
    said = [summary] if isinstance(summary, str) else summary
    head: list[Block] = [Heading(title, 1), Stamp(stamp), *map(Paragraph, said)]
    return head + ([Links(dict(links))] if links else [])


def findings_box(found: Mapping[str, list[str]], heading: str = "Findings") -> Box:
    """The findings under their heading, one titled list per group that has sentences."""
    groups = [Bullets(title, tuple(said)) for title, said in found.items() if said]
    return Box((Heading(heading), *groups))


def written_at() -> str:
    """The page's stamp: when it was written."""
    return f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
