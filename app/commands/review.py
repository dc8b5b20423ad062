"""``reckon breaks list | signoff | verify-log``: review the breaks and sign a run off.

Each handler opens the report database and calls one function of ``reports.review`` (or the
database's own ``list_breaks``); the tables and lines a person reads are made here. Money is
shown in each currency's own digits, ``--json`` gives it as exact decimal text. Example::

    reckon breaks list --date 2026-01-01 --status open
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from reckon.config import Settings
from reckon.errors import invalid
from reckon.materiality import is_material, material_words, run_rule
from reckon.money import format_amount, quantize_to_currency
from reckon.signoff import review_words
from reckon.timeutil import parse_date
from reports.approval_record import APPROVAL_HTML, APPROVAL_JSON, approval_record
from reports.db.models import REVIEW_STATUSES
from reports.db.repository import ReportDB
from reports.review import published_head, read_log, sign_off, verify_log
from reports.review_state import review_states
from storage.signing_keys import SigningKey, key_file

__all__ = ["cmd_breaks", "cmd_signoff", "cmd_verify_log"]


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def _break_json(item: dict[str, Any]) -> dict[str, Any]:
    """A listed break as JSON: its amounts as exact text in its currency's own digits.

    >>> _break_json({"currency": "JPY", "gap_amount": Decimal("12.000"), "day": date(2026, 1, 1)})
    {'currency': 'JPY', 'gap_amount': '12', 'day': '2026-01-01'}
    """
    code = str(item.get("currency") or "")
    return {k: _jsonable(quantize_to_currency(v, code) if k.endswith("_amount")
                         and isinstance(v, Decimal) else v) for k, v in item.items()}


def _cell_amount(value: Decimal | None, code: str) -> str:
    return "-" if value is None else format_amount(value, code)


def _short_time(moment: datetime) -> str:
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text + "Z"


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _min_gap(text: str | None) -> Decimal | None:
    """``--min-gap`` as an exact, non-negative Decimal; None when not given.

    >>> _min_gap(" 0.5 ")
    Decimal('0.5')
    """
    if text is None:
        return None
    try:
        amount = Decimal(text.strip())
    except InvalidOperation:
        amount = Decimal(-1)
    if not amount.is_finite() or amount < 0:
        raise invalid("--min-gap", text, "a non-negative amount such as 10 or 0.5 (in each "
                      "break's own currency)")
    return amount


def cmd_breaks(args: argparse.Namespace, settings: Settings) -> int:
    """``reckon breaks list [--date D] [--status S] [--currency C] [--key K] [--min-gap G]
    [--json]``: breaks of the current runs."""
    from app.commands.investigate import _currency_arg

    if args.action != "list":
        raise invalid("action", args.action, "list")
    day = parse_date(args.date, "--date") if args.date else None
    status = args.status.strip().lower() if args.status else None
    if status is not None and status not in REVIEW_STATUSES:
        raise invalid("--status", args.status, "one of " + ", ".join(REVIEW_STATUSES))
    currency = _currency_arg(getattr(args, "currency", None))
    key = getattr(args, "key", None)
    if key is not None and not key.strip():
        raise invalid("--key", key, "an account or merchant key")
    min_gap = _min_gap(getattr(args, "min_gap", None))
    with ReportDB.from_settings(settings) as db:
        if day is not None and not db.audit_runs(day):  # never audited is not "no breaks"
            raise invalid("--date", day.isoformat(), "a day with an audit run in the report "
                          f"database (none of {day}: run `reckon audit --date {day}` first)")
        items = db.list_breaks(day=day, review_status=status, currency=currency, key=key,
                               min_gap=min_gap)
        current = db.current_audit_run(day) if day is not None else None
        runs = {item["run_id"] for item in items} | ({current.run_id} if current else set())
        states = review_states(db, sorted(runs), settings.required_approvers)
    setting = settings.material_thresholds()
    rules = {run_id: run_rule(recorded, setting) for run_id, recorded in (
        (item["run_id"], item.pop("run_material_gap", None)) for item in items)}
    marked = any(rules.values()) if rules else bool(setting)  # the MATERIAL column shown
    for item in items:
        item["run_state"] = review_words(states[item["run_id"]])
        # by the rule recorded with the item's run (reckon.materiality.run_rule)
        item["material"] = is_material(item["gap_amount"], item["currency"],
                                       rules[item["run_id"]])
    if args.json:
        print(json.dumps([_break_json(item) for item in items], indent=2, sort_keys=True))
        return 0
    if not items:
        where = f" for {day.isoformat()}" if day else ""
        which = f" with review status {status!r}" if status else ""
        which += f" in {currency}" if currency else ""
        which += f" of key {key!r}" if key else ""
        which += f" with a gap of at least {min_gap}" if min_gap is not None else ""
        print(f"no breaks{where}{which} in the current audit runs")
        for run_id in sorted(states):  # the day's run: a quiet day's has nothing to sign
            print(f"run {run_id}: {review_words(states[run_id])}")
        return 0
    print(_breaks_table(items, material=marked,
                        assigned=any(item.get("assignee") for item in items)))
    counts: dict[str, int] = {}
    for item in items:
        counts[item["review_status"]] = counts.get(item["review_status"], 0) + 1
    print(f"{_count(len(items), 'break', 'breaks')}: "
          + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    for run_id in sorted(states):
        print(f"run {run_id}: {review_words(states[run_id])}")
    return 0


def _breaks_table(items: list[dict[str, Any]], *, material: bool = False,
                  assigned: bool = False) -> str:
    """The breaks as a terminal table, amounts right-aligned in their currency's digits;
    ``material``: with the MATERIAL column (the material_gap setting is set); ``assigned``:
    with ASSIGNEE and DUE (a listed break is assigned in the workbench)."""
    headers = ["DAY", "WINDOW START", "KEY", "CURRENCY", "STATUS", "GAP", "RESIDUAL", "REVIEW",
               "AGE (d)"] + (["ASSIGNEE", "DUE"] if assigned else []) + ["RUN"] + (
        ["MATERIAL"] if material else [])
    rows = [[item["day"].isoformat(), _short_time(item["window_start"]), item["key"],
             item["currency"] or "-", item["status"],
             _cell_amount(item["gap_amount"], item["currency"]),
             _cell_amount(item["residual_amount"], item["currency"]),
             item["review_status"], str(item["age_days"])]
            + ([item.get("assignee") or "-", _due(item.get("due_on"))] if assigned else [])
            + [item["run_id"]]
            + ([material_words(item["material"])] if material else []) for item in items]
    return _table(headers, rows, right={5, 6, 8})


def _due(due_on: date | None) -> str:
    return "-" if due_on is None else due_on.isoformat()


def cmd_signoff(args: argparse.Namespace, settings: Settings) -> int:
    """``reckon signoff --run R --note TEXT [--decision D] [--by NAME]``: signed by who runs
    it (reports.review.sign_off)."""
    required = settings.required_approvers
    key = SigningKey.load(key_file(settings.signing_key))
    with ReportDB.from_settings(settings) as db:
        entry = sign_off(db, args.run, args.decision, args.note, by=args.by,
                         warehouse=settings.warehouse_path, required_approvers=required,
                         key=key, heads=_heads(settings))
        state = review_states(db, [entry.run_id], required)[entry.run_id]
        found = approval_record(db, entry.run_id, required)
    record = None if found is None else found[0] / APPROVAL_HTML
    if record is not None and not _says(record.with_name(APPROVAL_JSON), review_words(state)):
        record = None  # not written (append_signoff said why)
    if args.json:
        print(json.dumps({**entry.to_json_dict(), "state": state.state,
                          "state_words": review_words(state),
                          "approval_record": None if record is None else str(record)},
                         indent=2, sort_keys=True))
        return 0
    print(f"signed: run {entry.run_id} {entry.decision} by {entry.by} "
          f"(log seq {entry.seq}, entry hash {entry.entry_hash})")
    print(f"run {entry.run_id}: {review_words(state)}")
    print(f"approval record: {record}" if record is not None else
          "approval record: not written (no rendered report of the run here, or see above; "
          "`reckon report` writes one beside the report)")
    return 0


def _says(record: Path, words: str) -> bool:
    """Whether the approval record ``record`` (its JSON) states ``words``."""
    try:
        return bool(json.loads(record.read_text(encoding="utf-8")).get("words") == words)
    except (OSError, ValueError):
        return False


def _count(n: int, one: str, many: str) -> str:
    """``1 entry``, ``2 entries``.

    >>> _count(1, "entry", "entries")
    '1 entry'
    """
    return f"{n} {one if n == 1 else many}"


def _heads(settings: Settings) -> Path | None:
    """The file outside the warehouse each sign-off publishes the log's head to, if set."""
    return Path(settings.signoff_heads).expanduser() if settings.signoff_heads else None


def cmd_verify_log(args: argparse.Namespace, settings: Settings) -> int:
    """``reckon verify-log [--expect-head H]``: exit 0 when the chain, the signatures and
    what they signed are intact and the head published outside the warehouse (``H``, else
    the last line of ``signoff_heads``) is still in the log; 1 with every problem otherwise."""
    expected = (args.expect_head or "").strip() or published_head(_heads(settings))
    with ReportDB.from_settings(settings) as db:
        result = verify_log(db, expected_head=expected, warehouse=settings.warehouse_path,
                            admin_key=settings.signoff_admin_key or None,
                            legacy_through=settings.signoff_legacy_through)
        states = review_states(db, sorted({e.run_id for e in read_log(db)}),
                               settings.required_approvers)
    words = {run_id: review_words(state) for run_id, state in sorted(states.items())}
    if args.json:
        print(json.dumps({**asdict(result), "runs": words}, indent=2, sort_keys=True))
        return 0 if result.ok else 1
    runs = [f"  run {run_id}: {text}" for run_id, text in words.items()]
    if result.ok:
        print(f"sign-off log OK: {_count(result.entries, 'entry', 'entries')}, head hash "
              f"{result.head_hash}")
        if result.legacy:
            print(f"  {_count(result.legacy, 'entry is', 'entries are')} unsigned legacy "
                  f"(seq 1 to {settings.signoff_legacy_through}, written before signing keys): "
                  "trusted only as far as the signed entries after them chain to them")
        if runs:
            print("\n".join(runs))
        return 0
    print(f"sign-off log FAILED verification ({_count(result.entries, 'entry', 'entries')}, "
          f"{_count(len(result.problems), 'problem', 'problems')}):")
    for problem in result.problems:
        print(f"  - {problem}")
    if runs:
        print("the runs' review states, as the log (unverified) reads:")
        print("\n".join(runs))
    return 1
