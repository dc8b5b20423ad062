"""reckon: provisional stream totals, canonical batch totals, and the audit between them.

The pure core (this package) owns the event-time rules; `spark/` applies them at scale,
`audits/` reconciles, `reports/` renders and records. See docs/semantics.md.
"""

__version__ = "0.1.0"
