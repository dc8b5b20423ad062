"""The workbench's PDF of a filtered break list (fpdf2, the report's fonts): what a reviewer
prints or mails, each amount in its currency's own digits, the total gap per currency (never
one across currencies), who exported it and when. Recorded in the sign-off log like every
export (workbench.app).

Example:
    >>> breaks_pdf(run, rows, filters="currency=JPY", by="carl", at=now,
    ...            totals=[("JPY", 3, Decimal(-420))], material={"JPY": Decimal(140)})
    ... # doctest: +SKIP
    b'%PDF-1.4...'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from reckon.materiality import is_material, material_words
from reckon.money import format_amount

__all__ = ["PDF_COLUMNS", "breaks_pdf"]

#: The PDF's columns (a landscape A4 page): a break's identity, figures, review and who has it.
PDF_COLUMNS = ("Window start", "Merchant", "Cur", "Cause", "Gap", "Residual", "Material",
               "Review", "Age (d)", "Assignee", "Due")
_WIDTHS = (34, 36, 11, 32, 29, 29, 16, 22, 14, 26, 22)
_NUMERIC = {4, 5, 8}


def _money(value: Decimal | None, code: str) -> str:
    return "-" if value is None else format_amount(value, code)


def breaks_pdf(run: dict[str, Any], rows: Sequence[dict[str, Any]], *, filters: str, by: str,
               at: datetime, totals: Sequence[tuple[str, int, Decimal]],
               material: Mapping[str, Decimal]) -> bytes:
    """The PDF of ``rows`` (breaks of ``run``, in the list's order) with ``totals`` (currency,
    breaks, total gap), saying which filters chose them, who exported them and when.
    ``material`` is the run's own rule (reckon.materiality): each break's mark in the words the
    list, its CSV and the report use (``material``, ``-``; empty when the rule is off)."""
    from fpdf import FPDF
    from fpdf.fonts import FontFace

    from reports.render import _font_path

    title = f"Breaks of {run['day']} ({run['kind']}), audit run {run['run_id']}"

    class _Document(FPDF):
        def footer(self) -> None:
            self.set_y(-10)
            self.set_font("DejaVu", "", 7)
            self.cell(0, 5, f"{title}   ·   page {self.page_no()} of {{nb}}", align="R")

    pdf = _Document(orientation="L", unit="mm", format="A4")
    pdf.set_creation_date(at.astimezone(UTC))
    pdf.set_title(title)
    pdf.set_author(by)
    pdf.add_font("DejaVu", "", _font_path())
    pdf.add_font("DejaVu", "B", _font_path().replace("DejaVuSans.ttf", "DejaVuSans-Bold.ttf"))
    pdf.set_auto_page_break(True, margin=14)
    pdf.add_page()
    pdf.set_font("DejaVu", "B", 13)
    pdf.cell(0, 8, title, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("DejaVu", "", 8.5)
    when = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    chosen = filters or "filters: none"
    lines = [f"Exported by {by} at {when}; recorded in the sign-off log.",
             f"{chosen[:1].upper()}{chosen[1:]}. Run state: {run['review_words']}.",
             f"{len(rows):,} break{'s' if len(rows) != 1 else ''}; total gap per currency: "
             + ("; ".join(f"{code} {_money(total, code)} ({n:,})" for code, n, total in totals)
                or "none") + "."]
    for line in lines:
        pdf.multi_cell(0, 4.5, line, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(2)
    pdf.set_font("DejaVu", "", 7.5)
    align = tuple("RIGHT" if i in _NUMERIC else "LEFT" for i in range(len(PDF_COLUMNS)))
    head = FontFace(emphasis="BOLD", fill_color=(236, 240, 244))
    with pdf.table(col_widths=_WIDTHS, headings_style=head, line_height=4,
                   text_align=align, first_row_as_headings=True,  # type: ignore[arg-type]
                   repeat_headings=1) as table:
        table.row(list(PDF_COLUMNS))
        for b in rows:
            code = b["currency"]
            table.row([b["window_start"].astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"),
                       b["key"], code, b["status"], _money(b["gap_amount"], code),
                       _money(b["residual_amount"], code),
                       material_words(is_material(b["gap_amount"], code, material)),
                       b["review_status"],
                       str(b["age_days"]), b["assignee"] or "-",
                       "-" if b["due_on"] is None else b["due_on"].isoformat()
                       + (" overdue" if b["overdue"] else "")])
    return bytes(pdf.output())
