"""What a report table is, and how one is declared.

`Table` is a built table: rows of `Estimate`s and plain values with a caption, written as
Markdown, LaTeX, CSV and HTML by `render.formats`. `TableSpec` declares one table of a study's
report once, beside the function that builds it: its name (file name and LaTeX label), the
builder and when it applies; `render.tables.TABLES` collects them, and the report's section
list (`render.sections`) gives each its place and heading.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ablate.report.data.load import StudyData

SIGNIFICANT = "_significant"  # row key (not a column): bold the contrast cell, mark it *


@dataclass
class Table:
    caption: str
    rows: list[dict]
    marks: dict[str, str] = field(default_factory=dict)
    contrast_column: str = ""
    compact: bool = False  # under MIN_SEEDS seeds: "(n=2)", explained once under the table
    name: str = ""
    """The file name (tables/<name>.md|tex|csv) and LaTeX label: a report's table gets its
    `TableSpec.name` when the report is built."""
    heading: str = ""
    """The report's heading for the table (default: its name)."""

    @property
    def columns(self) -> list[str]:
        return [c for c in self.rows[0] if not c.startswith("_")] if self.rows else []

    @property
    def title(self) -> str:
        return self.heading or self.name


def always(data: StudyData) -> bool:
    return True


@dataclass(frozen=True, kw_only=True)
class TableSpec:
    """One table of a study's report: adding a table is adding a builder and its `TableSpec`
    to the `TABLES` of the module that holds the builder, and naming it in the report's section
    list (`render.sections.SECTIONS`), which gives its place and heading."""

    name: str
    build: Callable[[StudyData], Table]
    applies: Callable[[StudyData], bool] = always
    """Whether the study's report has this table at all (e.g. only with A/A replicates)."""

    def make(self, data: StudyData, heading: str = "") -> Table:
        return replace(self.build(data), name=self.name, heading=heading or self.name)
