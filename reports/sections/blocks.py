"""What a report section is made of: its blocks (``Note``, ``Table``, ``Figures``, ``Items``,
``Columns``, ``Heading``) and ``Section`` itself. reports/render.py draws these, block by
block, as HTML and PDF; the section families (``headline``, ``breaks``, ``lateness``,
``approval``) build them from the ``ReportContext``.

>>> Note("figures checked", strong="Reviewed: ").plain
'Reviewed: figures checked'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from reckon.reconcile import ReconStatus
from reports.context import ReportContext

__all__ = ["STATUSES", "Block", "Columns", "Figure", "Figures", "Group", "Heading", "Items",
           "Note", "Section", "Table"]

STATUSES = frozenset(s.value for s in ReconStatus)  # cells styled by status in HTML


@dataclass(frozen=True)
class Note:
    """A sentence; ``strong`` is a bold lead-in, ``link`` (href, label) sits between ``text``
    and ``tail`` (a relative link, so the folder can be mailed)."""

    text: str
    strong: str = ""
    link: tuple[str, str] | None = None
    tail: str = ""
    id: str = ""
    css: str = "note"

    @property
    def plain(self) -> str:
        """The sentence as the PDF prints it (the link's label in place of the link)."""
        return f"{self.strong}{self.text}{self.link[1] if self.link else ''}{self.tail}"


@dataclass(frozen=True)
class Heading:
    """A sub-heading inside a section (h3)."""

    text: str


@dataclass(frozen=True)
class Table:
    """A table of display text. ``numeric`` columns are right-aligned in both formats;
    ``widths`` (mm) and ``size`` (pt) are the PDF's; ``row_heads``: the first cell of a row
    is its heading; ``marked`` rows (the configured bound) are highlighted in HTML;
    ``landscape``: too wide for a portrait page at one line a row (the break list), so the
    PDF turns the page for its section (277 mm inside the margins instead of 190)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: frozenset[int] = frozenset()
    widths: tuple[float, ...] | None = None
    size: float = 8
    css: str = ""
    data: tuple[tuple[str, str], ...] = ()   # HTML data-* attributes: (name, value)
    row_heads: bool = False
    status_col: int | None = None            # cells holding a ReconStatus, coloured in HTML
    marked: frozenset[int] = frozenset()
    pad: float | None = None                 # PDF cell padding left and right, mm (None: 1)
    landscape: bool = False                  # the PDF draws its section on landscape pages


@dataclass(frozen=True)
class Figure:
    name: str
    label: str
    value: str
    detail: str = ""
    bad: bool = False


@dataclass(frozen=True)
class Group:
    """The headline figures of one currency (``currency`` '': counts over every currency)."""

    currency: str
    title: str
    figures: tuple[Figure, ...]


@dataclass(frozen=True)
class Figures:
    """The headline: one group of figures per currency, never added across currencies."""

    groups: tuple[Group, ...]


@dataclass(frozen=True)
class Items:
    """A numbered list under its own sub-heading."""

    caption: str
    items: tuple[str, ...]
    id: str = ""


@dataclass(frozen=True)
class Columns:
    """Tables side by side in HTML; one after the other in the PDF."""

    tables: tuple[Table, ...]


Block = Note | Heading | Table | Figures | Items | Columns


@dataclass(frozen=True)
class Section:
    """One section of the report, in every format: ``id`` (HTML), ``title`` (HTML and PDF
    heading; ``aside`` adds a parenthesis computed from the context), the CSV file it
    writes (``csv``, ``csv_header``, ``csv_rows``), the charts beside it, and its ``body``
    (blocks built from the context; ``data_docs``: the relative link to the GX Data Docs)."""

    id: str
    title: str
    csv: str
    csv_header: tuple[str, ...]
    csv_rows: Callable[[ReportContext], Iterable[Sequence[Any]]]
    body: Callable[[ReportContext, str | None], tuple[Block, ...]]
    charts: tuple[str, ...] = ()
    aside: Callable[[ReportContext], str] | None = None

    def heading(self, ctx: ReportContext) -> str:
        """'Breaks (3 of 3 shown; all in breaks.csv)', the same in HTML and PDF."""
        return self.title if self.aside is None else f"{self.title} ({self.aside(ctx)})"
