"""The event schema, in one place. Spark schemas, the generator, the reference and the
validator all derive from these names and types.

Types are Spark SQL type names. Money is DECIMAL(18,3) per event and DECIMAL(38,3) for
totals, never floating point: scale 3 holds every accepted currency's minor unit exactly
(JPY 0, EUR 2, KWD 3; reckon.money owns the currency rules and the overflow bound).

The grain of every total is (window, key, currency): ``TOTAL_IDENTITY`` names the columns
that, with the window, identify a total's row. Amounts of two currencies are never added.
"""

from __future__ import annotations

from reckon.money import AMOUNT_INTEGER_DIGITS, MAX_MINOR_UNIT

__all__ = [
    "AMOUNT_PRECISION",
    "AMOUNT_SCALE",
    "AMOUNT_TYPE",
    "EVENT_FIELDS",
    "LANDING_FIELDS",
    "REQUIRED_EVENT_FIELDS",
    "TOTAL_IDENTITY",
    "TOTAL_TYPE",
    "TRANSPORT_FIELDS",
]

AMOUNT_SCALE = MAX_MINOR_UNIT
AMOUNT_PRECISION = AMOUNT_INTEGER_DIGITS + AMOUNT_SCALE
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

# With the window, what identifies a total's row: money is kept per key AND currency.
TOTAL_IDENTITY = ("key", "currency")

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
