"""The event schema, in one place. Spark schemas, the generator, the reference and the
validator all derive from these names and types.

Types are Spark SQL type names. Money is DECIMAL(18,2) per event and DECIMAL(38,2) for
totals, never floating point.
"""

from __future__ import annotations

from decimal import Decimal

__all__ = [
    "AMOUNT_PRECISION",
    "AMOUNT_SCALE",
    "AMOUNT_TYPE",
    "EVENT_FIELDS",
    "LANDING_FIELDS",
    "REQUIRED_EVENT_FIELDS",
    "TOTAL_TYPE",
    "TRANSPORT_FIELDS",
    "quantize_amount",
]

AMOUNT_PRECISION = 18
AMOUNT_SCALE = 2
AMOUNT_TYPE = f"decimal({AMOUNT_PRECISION},{AMOUNT_SCALE})"
TOTAL_TYPE = f"decimal(38,{AMOUNT_SCALE})"

# The logical event, as the producer sends it.
EVENT_FIELDS: tuple[tuple[str, str], ...] = (
    ("event_id", "string"),
    ("key", "string"),
    ("amount", AMOUNT_TYPE),
    ("currency", "string"),
    ("event_time", "timestamp"),
    ("source", "string"),
)
REQUIRED_EVENT_FIELDS = tuple(name for name, _ in EVENT_FIELDS)

# Added by the transport: Kafka partition/offset/timestamp, or for the landing directory the
# line's own partition (default 0) and arrival_time, the file and the line number.
TRANSPORT_FIELDS: tuple[tuple[str, str], ...] = (
    ("partition", "int"),
    ("offset", "bigint"),
    ("arrival_time", "timestamp"),
    ("input_file", "string"),
)

# Keys a landing NDJSON line may carry (everything else is preserved in the raw payload).
LANDING_FIELDS = (*REQUIRED_EVENT_FIELDS, "partition", "arrival_time")

_CENT = Decimal("0.01")


def quantize_amount(value: Decimal) -> Decimal:
    """Exactly two decimal places. Callers must have checked there is no rounding to do."""
    return value.quantize(_CENT)
