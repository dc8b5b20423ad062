"""The report's sections, declared once: HTML, PDF and CSV all iterate ``SECTIONS``.

Each ``Section`` names its HTML id, its title, the CSV file it writes (header and rows: exact
decimal text), the charts drawn beside it, and its body: a few blocks (``Note``, ``Table``,
``Figures``, ``Items``, ``Columns``, ``Heading``; ``reports.sections.blocks``) built from the
already-computed ``ReportContext``, with amounts formatted in their currency's digits.
reports/render.py only draws blocks, so a section cannot exist in one format and not in
another, and nothing here reads Spark or the report database.

The sections are declared by family, each module owning its sections' blocks and CSV rows:

- ``headline``: the headline, the configuration, the rows per status;
- ``breaks``: the break summary, the breaks, the gap over the day, who is late;
- ``bound_whatif``: the lateness distribution, the bound what-if's curves, the bounds per source, the
  watermark's progress;
- ``approval``: the data-quality check and the approval (sign-off) block.

Example: ``[s.csv for s in SECTIONS][:3] == ["summary.csv", "configuration.csv",
"status_counts.csv"]``; ``lay_out(ctx)`` gives each section's heading and blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from reports.context import ReportContext
from reports.sections import approval, bound_whatif, breaks, headline
from reports.sections.blocks import Block, Section

__all__ = ["SECTIONS", "Laid", "lay_out"]

#: Every section, in report order: the run's figures, the breaks, event time, the approval.
SECTIONS: tuple[Section, ...] = (*headline.SECTIONS, *breaks.SECTIONS, *bound_whatif.SECTIONS,
                                 *approval.SECTIONS)


@dataclass(frozen=True)
class Laid:
    """A section as both page formats draw it: its heading, blocks and chart names."""

    section: Section
    heading: str
    blocks: tuple[Block, ...]
    charts: tuple[str, ...]


def lay_out(ctx: ReportContext, data_docs: str | None = None) -> tuple[Laid, ...]:
    """Every section's heading and blocks, in report order (HTML and PDF draw these)."""
    return tuple(Laid(s, s.heading(ctx), s.body(ctx, data_docs), s.charts) for s in SECTIONS)
