"""A corpus of hostile landing input, each line tagged with the outcome the parser must give.

Used by tests/test_hostile_input.py (the real stream over landing files, and BatchProcessor
directly). ``HostileLine.raw`` is the line's bytes as written to disk (so invalid UTF-8, NUL,
CR and BOM bytes are real); ``HostileLine.line_bytes`` is the line as the landing source
hands it to the parser (a final CR removed, a BOM at the very start of a file removed: bytes
that are not UTF-8 kept, and quarantined as ``invalid_utf8``); ``HostileLine.text`` the
payload the tables show (U+FFFD for bytes that are not UTF-8).

Line counting, as the landing source defines it: a file's text is split on ``\\n``; a final
empty piece after a trailing newline is not a line. So an empty file is 0 lines, a file
``"\\n\\n  \\n"`` is 3 lines (two empty, one of spaces: each quarantined as ``empty_line``),
and a last line without a newline is still a line. Offsets are 0-based line numbers.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "ARRIVAL",
    "FILE_MTIME",
    "HostileFile",
    "HostileLine",
    "corpus_files",
    "event",
    "expected_lines",
    "line",
    "write_corpus",
]

ARRIVAL = "2026-01-01T00:10:00Z"  # what every line says it arrived at, unless it says otherwise
FILE_MTIME = 1_767_226_230  # 2026-01-01T00:10:30Z: the transport time of lines without one
_BASE = dict(key="acct-1", amount="12.50", currency="USD", event_time="2026-01-01T00:00:00Z",
             source="pos", partition=0, arrival_time=ARRIVAL)
_DROP = object()


@dataclass(frozen=True)
class HostileLine:
    """One line and its required outcome: ``reason`` None means a valid event."""

    name: str
    raw: bytes
    reason: str | None
    detail_has: str = ""  # a fragment the quarantine detail must contain
    partition: int = 0
    arrival: str | None = ARRIVAL  # the arrival time the row gets; None: the file's mtime
    event_id: str | None = None  # for valid lines: the event_id the event log must hold
    amount: str | None = None  # for valid lines: the amount as DECIMAL(18,3) text

    @property
    def line_bytes(self) -> bytes:
        """The line's bytes as the landing source hands them to the parser."""
        return self.raw.removesuffix(b"\r")

    @property
    def text(self) -> str:
        """The payload the tables show: bytes that are not UTF-8 as U+FFFD (the quarantine
        keeps them exactly in payload_base64)."""
        return self.line_bytes.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class HostileFile:
    """A landing file: its lines, joined by ``\\n`` (or CRLF), with or without a final newline."""

    name: str
    lines: tuple[HostileLine, ...]
    final_newline: bool = True
    bom: bool = False
    crlf: bool = False
    extra: dict[str, object] = field(default_factory=dict)

    def content(self) -> bytes:
        sep = b"\r\n" if self.crlf else b"\n"
        body = sep.join(ln.raw for ln in self.lines)
        if self.lines and self.final_newline:
            body += sep
        return (b"\xef\xbb\xbf" if self.bom else b"") + body


def event(name: str, **fields: object) -> str:
    """A compact JSON event line, ``event_id`` = ``h-<name>``; a field set to ``...`` is dropped."""
    values: dict[str, object] = {"event_id": f"h-{name}", **_BASE}
    for k, v in fields.items():
        if v is Ellipsis:
            values.pop(k, None)
        else:
            values[k] = v
    return json.dumps(values, separators=(",", ":"))


def line(name: str, text: str | bytes, reason: str | None, detail_has: str = "", *,
         partition: int = 0, arrival: str | None = ARRIVAL, amount: str | None = "12.500",
         event_id: str | None = None) -> HostileLine:
    raw = text if isinstance(text, bytes) else text.encode("utf-8")
    return HostileLine(name, raw, reason, detail_has, partition, arrival,
                       (event_id or f"h-{name}") if reason is None else None,
                       amount if reason is None else None)


def _unparsed(name: str, text: str | bytes, reason: str) -> HostileLine:
    """A line JSON cannot read: nothing in it is trusted, so it arrives at the file's time."""
    return line(name, text, reason, arrival=None)


def _bad(name: str, reason: str, detail: str = "", **fields: object) -> HostileLine:
    return line(name, event(name, **fields), reason, detail)


def _ok(name: str, expect: str = "12.500", **fields: object) -> HostileLine:
    return line(name, event(name, **fields), None, amount=expect)


def _json_lines() -> list[HostileLine]:
    good = event("trailing-garbage")
    dup = event("dup-keys")[:-1] + ',"event_id":"h-dup-keys-2"}'
    return [
        _unparsed("truncated", event("truncated")[:-9], "invalid_json"),
        line("trailing-garbage", good + " xyz", "invalid_json", "more than one"),
        line("trailing-brace", event("trailing-brace") + "}", "invalid_json", "more than one"),
        line("two-objects", event("two-a") + event("two-b"), "invalid_json", "more than one"),
        # a '}' inside a string: the cheap one-brace test cannot decide, the full check does
        _ok("brace-in-string", key="acct-}1"),
        line("brace-in-string-then-junk", event("brace-in-string-then-junk", key="a}") + " x}",
             "invalid_json", "more than one"),
        line("two-objects-spaced", event("two-c") + "  \t " + event("two-d"), "invalid_json",
             "more than one"),
        _unparsed("json-array", "[" + event("json-array") + "]", "invalid_json"),
        _unparsed("bare-number", "42", "invalid_json"),
        _unparsed("bare-string", '"hello"', "invalid_json"),
        _unparsed("json-null", "null", "invalid_json"),
        line("duplicate-keys", dup, "invalid_json", "duplicate keys"),
        _unparsed("single-quotes", event("single-quotes").replace('"', "'"), "invalid_json"),
        _unparsed("raw-nul", event("raw-nul").replace("acct-1", "acct\x001"), "invalid_json"),
        # bytes that are not UTF-8: quarantined before any shape rule, never decoded to U+FFFD
        line("utf8-outside-string", event("utf8-out").encode()[:-1] + b"\xff}",
             "invalid_utf8", "payload_base64", arrival=None),
    ]


def _type_lines() -> list[HostileLine]:
    return [
        _bad("amount-object", "bad_amount", amount={"value": "1.00"}),
        _bad("amount-array", "bad_amount", amount=["1.00"]),
        _bad("amount-bool", "bad_amount", amount=True),
        # a JSON number is judged by its exact value: 1.5e2 is 150.000 (valid)
        line("amount-number-exponent",
             event("amount-number-exponent").replace('"12.50"', "1.5e2"), None,
             amount="150.000"),
        _ok("amount-number", "12.500", amount=12.5),
        # judged by its exact value, not a double's text (which prints it as 1.23456785E7):
        # an amount, above the configured maximum
        _bad("amount-number-eight-digits", "amount_out_of_range", "12345678.5",
             amount=12345678.5),
        line("amount-number-trailing-zeros",
             event("amount-number-trailing-zeros").replace('"12.50"', "12.5000"), None,
             amount="12.500"),
        line("amount-number-too-big",
             event("amount-number-too-big").replace('"12.50"', "1e15"), "bad_amount", "1e15"),
        line("amount-number-nan", event("amount-number-nan").replace('"12.50"', "NaN"),
             "bad_amount", "NaN"),
        # a nested '"amount"' does not change how the top-level number is read (through a
        # double, 999999.9999999999999 would be booked as 1000000.000)
        line("amount-number-nested-text",
             event("amount-number-nested-text", meta={"amount": "x"})
             .replace('"12.50"', "999999.9999999999999"), "bad_amount", "999999.9999999999999"),
        _bad("event-id-object", "wrong_type", "event_id", event_id={"id": 1}),
        _bad("key-array", "wrong_type", "key", key=["a"]),
        line("event-id-number", event("x", event_id=987654321), None, event_id="987654321"),
    ]


def _field_lines() -> list[HostileLine]:
    out = [_bad(f"missing-{f}", "missing_field", f, **{f: ...})
           for f in ("key", "amount", "currency", "event_time", "source")]
    out.append(line("missing-event_id", event("x", event_id=...), "missing_field", "event_id"))
    out += [
        _bad("blank-key", "missing_field", "key", key="   "),
        _bad("nbsp-event-id", "missing_field", "event_id", event_id="\u00a0"),
        _bad("zero-width-key", "missing_field", "key", key="\u200b\u2003"),
        _bad("null-currency", "missing_field", "currency", currency=None),
        _ok("extra-fields", note="kept", meta={"nested": [1, 2, {"deep": None}]}),
        _bad("huge-key", "field_too_long", "key", key="k" * 1_000_000),
        _ok("long-line", padding="x" * 100_000),
        _ok("key-at-limit", key="k" * 256),
        _bad("key-over-limit", "field_too_long", "key", key="k" * 257),
    ]
    return out


def _amount_lines() -> list[HostileLine]:
    bad = {"nan": "NaN", "infinity": "Infinity", "minus-infinity": "-Infinity",
           "over-precision": "10.1234", "too-many-digits": "1" * 17, "leading-plus": "+1.00",
           "16-digits": "1" * 16,
           "spaces": " 1.00 ", "exponent-text": "1e3", "trailing-dot": "1.", "leading-dot": ".5",
           "arabic-digits": "\u0661\u0662"}
    out = [_bad(f"amount-{k}", "bad_amount", "amount", amount=v) for k, v in bad.items()]
    out += [
        _bad("amount-empty", "missing_field", "amount", amount=""),
        _bad("amount-negative", "amount_out_of_range", "]: -1", amount="-1.00"),
        _bad("amount-15-digits", "amount_out_of_range", amount="1" * 15),
        _bad("amount-over-max", "amount_out_of_range", amount="1000000.01"),
        _ok("amount-max", "1000000.000", amount="1000000.00"),
        _ok("amount-zero", "0.000", amount="0"),
        _ok("amount-one-place", "7.500", amount="7.5"),
        _ok("amount-trailing-zero", "7.500", amount="7.500"),
        _bad("amount-beyond-cents", "exceeds_minor_unit", "USD 10.123", amount="10.123"),
        _bad("amount-yen-fraction", "exceeds_minor_unit", "JPY 5.5", amount="5.5",
             currency="JPY"),
        _ok("amount-yen", "1500.000", amount="1500", currency="JPY"),
        _ok("amount-dinar-fils", "0.125", amount="0.125", currency="KWD"),
        _bad("currency-unknown", "unknown_currency", "QQQ", currency="QQQ"),
        _bad("currency-no-minor-unit", "unsupported_currency", "XXX", currency="XXX"),
        _bad("currency-gold", "unsupported_currency", "XAU", currency="XAU"),
        _bad("currency-lowercase", "unknown_currency", "usd", currency="usd"),
    ]
    return out


def _time_lines() -> list[HostileLine]:
    bad = {"no-zone": "2026-01-01T00:00:00", "zone-25h": "2026-01-01T00:00:00+25:00",
           "lowercase-z": "2026-01-01T00:00:00z", "leap-second": "2016-12-31T23:59:60Z",
           "date-only": "2026-01-01", "space-separator": "2026-01-01 00:00:00Z",
           "feb-30": "2026-02-30T00:00:00Z", "seven-fraction-digits":
           "2026-01-01T00:00:00.1234567Z", "hour-24": "2026-01-01T24:00:00Z"}
    ok = {"z": "2026-01-01T00:00:01Z", "plus-zero": "2026-01-01T00:00:02+00:00",
          "minus-zero": "2026-01-01T00:00:03-00:00", "micros": "2026-01-01T00:00:04.123456Z",
          "plus-14": "2026-01-01T14:00:05+14:00"}
    # valid first: the file opens with a BOM, which must not cost its first event
    out = [_ok(f"time-{k}", event_time=v) for k, v in ok.items()]
    out += [_bad(f"time-{k}", "bad_event_time", "event_time", event_time=v)
            for k, v in bad.items()]
    out += [
        _bad("time-year-9999", "future_dated", event_time="9999-12-31T23:59:59Z"),
        _bad("time-year-0001", "event_time_out_of_range", event_time="0001-01-01T00:00:00Z"),
        _bad("time-1969", "event_time_out_of_range", event_time="1969-12-31T23:59:59Z"),
        line("arrival-bad", event("arrival-bad", arrival_time="yesterday"),
             "bad_arrival_time", "yesterday", arrival=None),
        line("arrival-missing", event("arrival-missing", arrival_time=...), None,
             arrival=None),
        # a line dated a day ahead of its file, event_time with it: not future-dated against
        # its own claim, so only the transport's time catches it before it moves the watermark
        # (quarantined at the file's time: the claim is what is not trusted)
        line("arrival-ahead-of-file", event("arrival-ahead-of-file",
                                            event_time="2026-01-02T00:10:00Z",
                                            arrival_time="2026-01-02T00:10:00Z"),
             "bad_arrival_time", "after the transport", arrival=None),
        # within the clock skew of the file's time (00:10:30 + 5m): trusted
        line("arrival-within-skew", event("arrival-within-skew",
                                          arrival_time="2026-01-01T00:15:29Z"),
             None, arrival="2026-01-01T00:15:29Z"),
    ]
    return out


def _transport_lines() -> list[HostileLine]:
    return [
        line("partition-string", event("partition-string", partition="3"), None,
             partition=3),
        line("partition-int", event("partition-int", partition=2), None, partition=2),
        _bad("partition-word", "bad_partition", "x", partition="x"),
        _bad("partition-fraction", "bad_partition", "1.5", partition=1.5),
        _bad("partition-too-big", "bad_partition", partition=99_999_999_999),
        _bad("partition-negative", "bad_partition", "-1", partition=-1),
        line("escaped-nul", event("escaped-nul", source="p\x00s"), None),
        line("utf8-in-string", event("utf8-in").encode().replace(b'"pos"', b'"p\xff\xfeos"'),
             "invalid_utf8", "not valid UTF-8"),
        # half a surrogate pair escaped is no character (read, it was '?'); a whole pair is
        line("lone-surrogate", event("lone-surrogate").replace('"acct-1"', '"acct-\\ud800"'),
             "lone_surrogate", "\\ud800"),
        line("surrogate-pair", event("surrogate-pair").replace('"acct-1"',
                                                               '"acct-\\ud83d\\udcb6"'), None),
        # a real U+FFFD is text like any other
        line("real-replacement-char", event("real-fffd").replace('"pos"', '"p\ufffdos"'),
             None, event_id="h-real-fffd"),
        _unparsed("blank", "", "empty_line"),
        _unparsed("spaces-only", "   ", "empty_line"),
        _unparsed("tab-only", "\t", "empty_line"),
    ]


def corpus_files() -> list[HostileFile]:
    """The landing files, in name order (also modification-time order)."""
    return [
        HostileFile("h-000-json.ndjson", tuple(_json_lines())),
        HostileFile("h-001-types.ndjson", tuple(_type_lines() + _field_lines())),
        HostileFile("h-002-amounts.ndjson", tuple(_amount_lines()), crlf=True),
        HostileFile("h-003-times.ndjson", tuple(_time_lines()), bom=True),
        HostileFile("h-004-transport.ndjson", tuple(_transport_lines())),
        HostileFile("h-005-empty.ndjson", ()),
        HostileFile("h-006-blank.ndjson", tuple(_unparsed(f"blank-{i}", s, "empty_line")
                                                for i, s in enumerate(["", "", "  "]))),
        HostileFile("h-007-truncated.ndjson",
                    (_ok("before-truncation"),
                     _unparsed("truncated-last", event("truncated-last")[:40], "invalid_json")),
                    final_newline=False),
    ]


def expected_lines(files: list[HostileFile]) -> list[tuple[str, int, HostileLine]]:
    """(file name, offset, line) for every line the landing source must produce."""
    return [(f.name, i, ln) for f in files for i, ln in enumerate(f.lines)]


def write_corpus(folder: Path, files: list[HostileFile] | None = None) -> list[HostileFile]:
    """Write the files as bytes, modification times in name order, all at FILE_MTIME or after."""
    files = corpus_files() if files is None else files
    folder.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(files):
        path = folder / f.name
        path.write_bytes(f.content())
        os.utime(path, (FILE_MTIME + i, FILE_MTIME + i))
    return files
