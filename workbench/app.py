"""The workbench's web app (FastAPI, server-rendered Jinja2 pages, no CDN: works offline).

Every page needs a logged-in user (workbench.auth); every POST needs the session's CSRF token.
Actions go through reports.review.append_signoff with the authenticated user's name, so the
four-eyes rule, the hash chain and the warehouse anchor are the CLI's own; auditors get no
action at all (checked on the server, not only hidden in the page).

Example:
    >>> from reports.db.repository import ReportDB
    >>> app = create_app(ReportDB("sqlite://"), secret=b"k" * 32)  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Depends, FastAPI, Form, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from reckon.errors import ReckonError, UsageError
from reckon.identity import same_person
from reckon.materiality import gap_floors, is_material, material_words, run_rule
from reckon.money import format_amount, money_sum, quantize_to_currency
from reckon.reconcile import ReconStatus
from reckon.signoff import REOPENED, four_eyes_refusal, review_words
from reckon.timeutil import parse_date
from reports.db.models import REVIEW_STATUSES
from reports.db.repository import ReportDB
from reports.review import (
    BULK_CAP,
    Assignment,
    BreakTarget,
    LogTrust,
    SignoffEntry,
    SignoffRefused,
    append_break_actions,
    append_signoff,
    figures_in_minor_units,
    read_log,
    record_export,
)
from reports.review_state import review_states
from storage.signing_keys import SigningKey
from workbench import queries
from workbench.auth import (
    LoginThrottle,
    SessionKeys,
    User,
    end_session,
    find_user,
    list_users,
    session_is_open,
    start_session,
)
from workbench.links import DAY_PATH, REPORT_PATH
from workbench.pdf import breaks_pdf

__all__ = ["create_app"]

_HERE = Path(__file__).resolve().parent
SESSION_COOKIE = "reckon_session"
LOGIN_COOKIE = "reckon_login"
_PAGE_HEADERS = {"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; "
                 "form-action 'self'", "X-Content-Type-Options": "nosniff",
                 "Referrer-Policy": "same-origin", "Cache-Control": "no-store"}
_ACTIONS = {"comment": "break-comment", "accept": "break-accepted", "resolve": "break-resolved",
            "reject": "break-rejected", "reopen": "break-reopened", "assign": "break-assigned"}
#: The actions whose note is their reason, asked for by name when it is missing.
_REASONED = {"reject": "rejecting", "reopen": "reopening", "rejected": "rejecting",
             REOPENED: "reopening"}
#: What the day page's sign-off form offers (the CLI offers every decision of reckon.signoff).
_RUN_DECISIONS = ("approved", "rejected", REOPENED)


class Forbidden(Exception):
    """A request the user's role or the rules refuse: one clear line, HTTP 403."""


@dataclass(frozen=True)
class Principal:
    user: User
    csrf: str


def principal(request: Request) -> Principal:
    """The logged-in user (role read from the database now), else a redirect to the login."""
    keys: SessionKeys = request.app.state.keys
    db = request.app.state.db
    session = keys.read(request.cookies.get(SESSION_COOKIE))
    user = None if session is None or not session_is_open(db, session) else \
        find_user(db, session.name)
    if session is None or user is None:
        raise HTTPException(303, headers={"Location": "/login"})
    return Principal(user, keys.csrf(session.nonce))


def acting(p: Annotated[Principal, Depends(principal)],
           csrf: Annotated[str, Form()] = "") -> Principal:
    """A user who may act, on a POST that carries the session's CSRF token."""
    if not secrets.compare_digest(csrf, p.csrf):
        raise Forbidden("the form's CSRF token is missing or wrong: reload the page and try "
                        "again")
    if not p.user.may_act:
        raise Forbidden(f"{p.user.name} is an {p.user.role}: the workbench is read-only for "
                        "this role")
    return p


Who = Annotated[Principal, Depends(principal)]
Actor = Annotated[Principal, Depends(acting)]


#: breaks.csv's columns: a break's identity, its figures in its currency's own digits, its
#: material mark (reckon.materiality; empty when off) and its review status; the run's state
BREAKS_CSV_COLUMNS = ("day", "window_start", "key", "currency", "status", "gap_amount",
                      "late_amount", "duplicate_amount", "residual_amount", "material",
                      "review_status", "age_days", "assignee", "due_on", "overdue", "run_id",
                      "run_state")


def breaks_csv_text(db: ReportDB, run: dict[str, Any], filters: queries.BreakFilter, *,
                    material: Mapping[str, Decimal]) -> str:
    """The run's breaks that ``filters`` match, every page of them in the list's order, as
    CSV: amounts exact in each currency's minor unit (``12.50`` EUR, ``1200`` JPY), never a
    float, never a total across currencies.

    Example: ``breaks_csv_text(db, run, BreakFilter(currency="JPY"), material={})``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(BREAKS_CSV_COLUMNS)
    words = run["review_words"]
    after: queries.Cursor | None = None
    while True:
        page = queries.break_page(db, run["run_id"], run["day"], filters, after, limit=5_000)
        for b in page.rows:
            code = b["currency"]
            writer.writerow([b["day"].isoformat(), b["window_start"].isoformat(), b["key"], code,
                             b["status"],
                             *(_exact(b[k], code) for k in ("gap_amount", "late_amount",
                                                            "duplicate_amount",
                                                            "residual_amount")),
                             material_words(is_material(b["gap_amount"], code, material)),
                             b["review_status"], b["age_days"], b["assignee"] or "",
                             "" if b["due_on"] is None else b["due_on"].isoformat(),
                             "overdue" if b["overdue"] else "", b["run_id"], words])
        if page.next_cursor is None:
            return out.getvalue()
        after = queries.Cursor.decode(page.next_cursor)


def _exact(value: Decimal | None, code: str) -> str:
    """An amount as exact text in ``code``'s minor unit (``12.50``), empty for none."""
    return "" if value is None else str(quantize_to_currency(value, code))


def _money(value: Decimal | None, code: str) -> str:
    return "-" if value is None else format_amount(value, code)


def _sql_text(value: object) -> str:
    """A value inside a single-quoted SQL literal (the page's `reckon sql` hint)."""
    return str(value).replace("'", "''")


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def create_app(db: ReportDB, *, secret: bytes, warehouse: Path | None = None,
               secure_cookies: bool = False, throttle: LoginThrottle | None = None,
               required_approvers: int = 1,
               material_gap: Mapping[str, Decimal] | None = None,
               trust: LogTrust | None = None) -> FastAPI:
    """The workbench over ``db``; ``warehouse`` holds the log's anchor (verify and append);
    ``trust`` the workbench's own signing key (registered with scope workbench: it signs for
    the people it authenticated) and what verify-log checks against; without a key it
    refuses every action (an unsigned entry would fail verify-log);
    ``throttle`` limits failed logins (default: :class:`LoginThrottle`'s limits);
    ``required_approvers`` sign a run off (the setting, reckon.signoff.review_state);
    ``material_gap`` marks material breaks (the setting, reckon.materiality; empty: off)."""
    keys = SessionKeys(secret)
    app = FastAPI(title="reckon workbench", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.db, app.state.keys = db, keys
    app.state.material = dict(material_gap or {})
    app.mount("/static", StaticFiles(directory=_HERE / "static"), name="static")
    pages = Jinja2Templates(directory=_HERE / "templates")
    pages.env.filters.update(money=_money, when=_when, sqlquote=_sql_text)
    pages.env.globals["REVIEW_STATUSES"] = REVIEW_STATUSES

    @app.middleware("http")
    async def headers(request: Request,
                      call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        for name, value in _PAGE_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    def page(request: Request, name: str, who: Principal | None, status: int = 200,
             **context: Any) -> HTMLResponse:
        context.update(request=request, who=who, msg=request.query_params.get("msg", ""))
        return pages.TemplateResponse(request, name, context, status_code=status)

    @app.exception_handler(Forbidden)
    @app.exception_handler(ReckonError)
    async def refused(request: Request, exc: Exception) -> HTMLResponse:
        status = 403 if isinstance(exc, Forbidden | SignoffRefused) else 400
        return page(request, "error.html", None, status=status, error=str(exc))

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, exc: RequestValidationError) -> HTMLResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or "the request"
        return page(request, "error.html", None, status=400,
                    error=f"{where} is not valid: {first.get('msg', 'malformed')}")

    _login_routes(app, db, keys, page, secure_cookies, throttle or LoginThrottle())
    _read_routes(app, db, page, warehouse, required_approvers, trust or LogTrust())
    _action_routes(app, db, warehouse, required_approvers, trust or LogTrust())
    return app


def _client_address(request: Request) -> str:
    """The address a login comes from (the peer of the connection: uvicorn trusts no
    forwarded header, so behind a proxy this is the proxy)."""
    return request.client.host if request.client else "unknown"


def _login_routes(app: FastAPI, db: ReportDB, keys: SessionKeys, page: Any,
                  secure: bool, throttle: LoginThrottle) -> None:
    @app.get("/login")
    def login_form(request: Request) -> Response:
        nonce = secrets.token_hex(16)
        response: Response = page(request, "login.html", None, csrf=keys.csrf(nonce))
        response.set_cookie(LOGIN_COOKIE, nonce, httponly=True, samesite="strict",
                            secure=secure, max_age=3600)
        return response

    @app.post("/login")
    def login(request: Request, name: Annotated[str, Form()] = "",
              password: Annotated[str, Form()] = "", csrf: Annotated[str, Form()] = "") -> Response:
        if not keys.csrf_ok(request.cookies.get(LOGIN_COOKIE, ""), csrf):
            raise Forbidden("the login form's CSRF token is missing or wrong: reload the page")
        who, address = name.strip()[:200], _client_address(request)
        refused = throttle.refusal(db, who, address)
        if refused is not None:
            return page(request, "login.html", None, status=429, csrf=csrf, error=refused)
        user = find_user(db, who, password)
        if user is None:
            throttle.failed(db, who, address)
            time.sleep(0.2)  # a little friction for guessing
            return page(request, "login.html", None, status=401, csrf=csrf,
                        error="unknown user or wrong password")
        throttle.succeeded(db, who, address)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(SESSION_COOKIE, start_session(db, keys, user.name), httponly=True,
                            samesite="strict", secure=secure)
        response.delete_cookie(LOGIN_COOKIE)
        return response

    @app.post("/logout")
    def logout(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
        session = keys.read(request.cookies.get(SESSION_COOKIE))
        if session is not None and not keys.csrf_ok(session.nonce, csrf):
            raise Forbidden("the form's CSRF token is missing or wrong: reload the page")
        if session is not None:
            end_session(db, session.nonce)  # a copy of the cookie stops working too
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE)
        return response


def _day(text: str) -> date:
    return parse_date(text, "day")


def _target(ws: str, key: str, cur: str) -> BreakTarget:
    try:
        moment = datetime.fromisoformat(ws).astimezone(UTC)
    except ValueError:
        raise UsageError(f"ws={ws!r} is not a window start (ISO 8601)") from None
    return BreakTarget(moment, key, cur)


#: What the cause filter may ask for: the audit's statuses but MATCHED (a match is no break).
BREAK_CAUSES = tuple(s.value for s in ReconStatus if s is not ReconStatus.MATCHED)


#: The oldest a break can be asked for, in days: a century (``age=1000000`` overflowed the
#: date arithmetic into a 500).
MAX_AGE_DAYS = 36_500


def _check_cause_and_age(cause: str, age: int) -> None:
    """A cause the audit never gives, or an age outside 0..MAX_AGE_DAYS, is a mistake in the
    URL, not a filter that matches nothing (a typo'd ``cause=EXPLAIND`` showed "0 breaks
    match").

    Example: ``_check_cause_and_age("EXPLAINED", 0)`` passes; ``("late", 0)`` raises."""
    if cause and cause not in BREAK_CAUSES:
        raise UsageError(f"cause={cause!r} is not valid: one of " + ", ".join(BREAK_CAUSES))
    if not 0 <= age <= MAX_AGE_DAYS:
        raise UsageError(f"age={age} is not valid: a number of days, 0 to {MAX_AGE_DAYS}")


def _read_routes(app: FastAPI, db: ReportDB, page: Any, warehouse: Path | None,
                 required: int, trust: LogTrust) -> None:
    @app.get("/")
    def home(request: Request, who: Who) -> Response:
        return page(request, "days.html", who, runs=queries.days(db, required_approvers=required),
                    check=trust.verify(db, warehouse, figures_of=()))

    @app.get("/period")
    def period_view(request: Request, who: Who, start: str = "", end: str = "",
                    month: str = "", kind: str = "nightly") -> Response:
        """A month (``month=2026-01``) or a range (``start``, ``end``): each day's state, its
        unsettled breaks, those by age and currency, the days still to sign."""
        first, last = _period_bounds(month, start, end)
        view = queries.period(db, first, last, kind=kind, required_approvers=required)
        before = (first.replace(day=1) - timedelta(days=1)).strftime("%Y-%m")
        after = (last.replace(day=28) + timedelta(days=4)).strftime("%Y-%m")
        return page(request, "period.html", who, period=view, previous=before, following=after)

    @app.get(DAY_PATH)
    def day_view(request: Request, who: Who, day: str, kind: str = "nightly") -> Response:
        run = queries.run_of_day(db, _day(day), kind, required)
        if run is None:
            raise UsageError(f"no current {kind} audit run of {day}")
        return page(request, "day.html", who, run=run,
                    entries=queries.log_entries(db, run["run_id"]),
                    replaced=queries.replaced_signoff(db, run, required),
                    check=trust.verify(db, warehouse, figures_of={run["run_id"]}))

    @app.get(REPORT_PATH)
    def report(who: Who, day: str, kind: str, name: str) -> Response:
        """The day's rendered report and the files beside it (its CSVs, PDF): the report's
        relative links resolve here. Only plain names in the report's own folder."""
        run = queries.run_of_day(db, _day(day), kind, required)
        html = Path(run["report_path"]) if run and run["report_path"] else None
        if run is None or html is None or not html.is_file():
            raise UsageError(f"no rendered report of {day} on this server "
                             "(`reckon report --date D` renders it)")
        wanted = html.parent / name
        if name != Path(name).name or name.startswith(".") or not wanted.is_file():
            raise UsageError(f"{name!r} is not a file of the report of {day}")
        kind_of = "text/html" if name.endswith(".html") else None
        if wanted.suffix in (".csv", ".pdf"):  # an export of the day's figures: recorded
            record_export(db, run["run_id"], who.user.name, f"{name} of the day's report",
                          warehouse=warehouse, signer=_signer(trust), heads=trust.heads)
        return FileResponse(wanted, media_type=kind_of,
                            headers={"Content-Security-Policy": "sandbox"})

    def day_and_filters(day: str, kind: str, status: str, cause: str, currency: str,
                        merchant: str, age: int, partition: str, source: str,
                        min_gap: str = "", sort: str = "", assignee: str = "",
                        overdue: str = ""
                        ) -> tuple[dict[str, Any], queries.BreakFilter]:
        """The day's current run and the break list's filters from its query, each checked
        (a mistake is one line on the error page)."""
        run = queries.run_of_day(db, _day(day), kind, required)
        if run is None:
            raise UsageError(f"no current {kind} audit run of {day}")
        if status and status not in (*REVIEW_STATUSES, queries.UNSETTLED):
            raise UsageError(f"status={status!r} is not valid: one of "
                             + ", ".join((*REVIEW_STATUSES, queries.UNSETTLED)))
        _check_cause_and_age(cause, age)
        partition = partition.strip()
        if partition and not partition.isdigit():
            raise UsageError(f"partition={partition!r} is not valid: a partition number "
                             "such as 3")
        if sort and sort not in queries.SORTS:
            raise UsageError(f"sort={sort!r} is not valid: one of " + ", ".join(queries.SORTS))
        code = currency.strip().upper()
        return run, queries.BreakFilter(status, cause, code, merchant.strip(), age,
                                        partition=str(int(partition)) if partition else "",
                                        source=source.strip(),
                                        min_gap=gap_floors(min_gap[:2000], code),
                                        sort=sort or "window", assignee=assignee.strip(),
                                        overdue_on=_today() if overdue else None)

    @app.get("/day/{day}/breaks.csv")
    def breaks_csv(who: Who, day: str, kind: str = "nightly", status: str = "",
                   cause: str = "", currency: str = "", merchant: str = "", age: int = 0,
                   partition: str = "", source: str = "", min_gap: str = "",
                   sort: str = "", assignee: str = "", overdue: str = "") -> Response:
        """Every break the list's filters match, in its order, as CSV (any role: it only
        reads)."""
        run, filters = day_and_filters(day, kind, status, cause, currency, merchant, age,
                                       partition, source, min_gap, sort, assignee, overdue)
        body = breaks_csv_text(db, run, filters, material=_rule_of(run, app.state.material))
        name = f"reckon-breaks-{run['day']}-{run['kind']}.csv"
        count = body.count("\n") - 1
        record_export(db, run["run_id"], who.user.name,
                      f"{name} ({count:,} break{'s' if count != 1 else ''}; "
                      f"{_filter_words(filters)})", warehouse=warehouse,
                      signer=_signer(trust), heads=trust.heads)
        return Response(body, media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})

    @app.get("/day/{day}/breaks.pdf")
    def breaks_pdf_export(who: Who, day: str, kind: str = "nightly", status: str = "",
                          cause: str = "", currency: str = "", merchant: str = "",
                          age: int = 0, partition: str = "", source: str = "",
                          min_gap: str = "", sort: str = "", assignee: str = "",
                          overdue: str = "") -> Response:
        """The filtered break list as a PDF (any role; recorded in the log like the CSV)."""
        run, filters = day_and_filters(day, kind, status, cause, currency, merchant, age,
                                       partition, source, min_gap, sort, assignee, overdue)
        rows = queries.all_matches(db, run["run_id"], run["day"], filters, cap=BULK_CAP)
        if len(rows) > BULK_CAP:
            raise UsageError(f"more than {BULK_CAP:,} breaks match: narrow the filters (a PDF "
                             f"holds at most {BULK_CAP:,}; the CSV holds every one)")
        name = f"reckon-breaks-{run['day']}-{run['kind']}.pdf"
        words = _filter_words(filters)
        entry = record_export(db, run["run_id"], who.user.name,
                              f"{name} ({len(rows):,} break{'s' if len(rows) != 1 else ''}; "
                              f"{words})", warehouse=warehouse, signer=_signer(trust),
                              heads=trust.heads)
        body = breaks_pdf(run, rows, filters=words, by=who.user.name, at=entry.at,
                          totals=_totals(rows), material=_rule_of(run, app.state.material))
        return Response(body, media_type="application/pdf",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})

    @app.get("/day/{day}/breaks")
    def breaks(request: Request, who: Who, day: str, kind: str = "nightly", status: str = "",
               cause: str = "", currency: str = "", merchant: str = "", age: int = 0,
               partition: str = "", source: str = "", min_gap: str = "", sort: str = "",
               assignee: str = "", overdue: str = "", after: str = "") -> Response:
        run, filters = day_and_filters(day, kind, status, cause, currency, merchant, age,
                                       partition, source, min_gap, sort, assignee, overdue)
        started = time.perf_counter()
        result = queries.break_page(db, run["run_id"], run["day"], filters,
                                    queries.Cursor.decode(after) if after else None)
        result.seconds = time.perf_counter() - started
        rule = _rule_of(run, request.app.state.material)  # the run's own, as it was audited
        for row in result.rows:  # the page's rows only: the mark costs nothing to paging
            row["material"] = material_words(is_material(row["gap_amount"], row["currency"],
                                                         rule))
        kept = {"kind": run["kind"], **{k: v for k, v in filters.query().items() if v}}
        material_only = ",".join(f"{c}={a}" for c, a in sorted(rule.items()))
        # the bulk form is not offered to the run's reconciler (the server refuses it anyway)
        own_run = same_person(who.user.name, str(run["reconciler"]))
        return page(request, "breaks.html", who, run=run, page=result, filters=filters,
                    facets=queries.facets(run), material=bool(rule), kept=kept,
                    material_only=material_only, assignees=_assignees(db, run),
                    own_run=own_run)

    @app.post("/day/{day}/bulk")
    def bulk(request: Request, who: Actor, day: str, action: Annotated[str, Form()],
             note: Annotated[str, Form()] = "", expect: Annotated[str, Form()] = "",
             kind: Annotated[str, Form()] = "nightly", status: Annotated[str, Form()] = "",
             cause: Annotated[str, Form()] = "", currency: Annotated[str, Form()] = "",
             merchant: Annotated[str, Form()] = "", age: Annotated[int, Form()] = 0,
             partition: Annotated[str, Form()] = "", source: Annotated[str, Form()] = "",
             min_gap: Annotated[str, Form()] = "", sort: Annotated[str, Form()] = "",
             assignee: Annotated[str, Form()] = "", overdue: Annotated[str, Form()] = "",
             assign_to: Annotated[str, Form()] = "", due: Annotated[str, Form()] = ""
             ) -> Response:
        """One action on every break the list's filters match, one log entry each: first a
        confirmation naming how many breaks and their total gap per currency, then (with its
        ``expect`` digest, so the set acted on is the set confirmed) the entries."""
        run, filters = day_and_filters(day, kind, status, cause, currency, merchant, age,
                                       partition, source, min_gap, sort, assignee, overdue)
        if action not in _BULK_ACTIONS:
            raise UsageError(f"action={action!r} is not valid: one of "
                             + ", ".join(_BULK_ACTIONS))
        refusal = four_eyes_refusal(who.user.name, str(run["reconciler"]), run["run_id"],
                                    on_break=True)
        if refusal is not None:
            raise Forbidden(refusal)
        assignment = _assignment(assign_to, due) if action == "assign" else None
        _need_reason(action, note, f"the breaks of {run['day']} in bulk")
        if not note.strip() and assignment is None:
            raise UsageError("note is missing: a bulk action needs a note, written in each "
                             "break's entry")
        rows = queries.all_matches(db, run["run_id"], run["day"], filters, cap=BULK_CAP)
        if not rows:
            raise UsageError("no break matches these filters: nothing to act on")
        if len(rows) > BULK_CAP:
            raise UsageError(f"more than {BULK_CAP:,} breaks match: narrow the filters "
                             f"(a bulk action takes at most {BULK_CAP:,})")
        digest = _bulk_digest(run["run_id"], action,
                              note + ("" if assignment is None else "|" + assignment.words()),
                              rows)
        kept = {"kind": run["kind"], **{k: v for k, v in filters.query().items() if v}}
        if not expect:
            return page(request, "bulk.html", who, run=run, action=action, note=note.strip(),
                        count=len(rows), totals=_totals(rows), kept=kept, expect=digest,
                        assignment=assignment, assign_to=assign_to.strip(), due=due.strip())
        if not secrets.compare_digest(expect, digest):
            raise UsageError(f"the breaks these filters match changed since you confirmed "
                             f"({len(rows):,} now): nothing was recorded; review them again")
        targets = [BreakTarget(r["window_start"], r["key"], r["currency"]) for r in rows]
        append_break_actions(db, run["run_id"], who.user.name, _BULK_ACTIONS[action], note,
                             targets, warehouse=warehouse, assignment=assignment,
                             signer=_signer(trust), heads=trust.heads)
        done = f"{action} recorded on {len(rows):,} break{'s' if len(rows) != 1 else ''}"
        return RedirectResponse(f"/day/{run['day']}/breaks?"
                                + urlencode({**kept, "msg": done}), status_code=303)

    @app.get("/break")
    def break_view(request: Request, who: Who, run: str, ws: str, key: str,
                   cur: str) -> Response:
        item = queries.break_detail(db, run, _target(ws, key, cur))
        if item is None:
            raise UsageError(f"no break {key} {cur} at {ws} in run {run}")
        found = db.get_audit_run(run)
        reconciler = found.reconciler if found else ""
        return page(request, "break.html", who, item=item, reconciler=reconciler,
                    own_run=same_person(who.user.name, str(reconciler or "")),
                    assignees=_assignees(db, {"reconciler": reconciler}))

    @app.get("/log")
    def log(request: Request, who: Who) -> Response:
        return page(request, "log.html", who, entries=read_log(db),
                    check=trust.verify(db, warehouse))

    @app.get("/log/export.json")
    def export(who: Who) -> Response:
        """The whole sign-off log and each run's state as JSON (any role). The export is
        itself recorded first, like a CSV or PDF export (who, when, how many entries), so the
        file carries its own record and the head it names covers it."""
        recorded = _record_log_export(db, who.user.name, warehouse, trust)
        check = trust.verify(db, warehouse)
        entries = read_log(db)
        signed = [{"seq": e.seq, "at": e.at.isoformat(), "run_id": e.run_id, "by": e.by,
                   "decision": e.decision, "note": e.note, "entry_hash": e.entry_hash,
                   "prev_hash": e.prev_hash,
                   "signed": None if e.signed is None else figures_in_minor_units(e.signed),
                   "signed_text": e.signed}
                  for e in entries]
        states = review_states(db, sorted({e.run_id for e in entries}), required)
        runs = {run_id: {"state": s.state, "words": review_words(s),
                         "approvers": list(s.approvers), "rejecters": list(s.rejecters),
                         "approvals": s.approvals, "required_approvers": s.required}
                for run_id, s in states.items()}
        body = {"verified": check.ok, "problems": check.problems, "head_hash": check.head_hash,
                "exported_by": who.user.name,
                "exported_at": None if recorded is None else recorded.at.isoformat(),
                "export_seq": None if recorded is None else recorded.seq,
                "runs": runs, "entries": signed}
        return JSONResponse(body, headers={
            "Content-Disposition": f'attachment; filename="{LOG_EXPORT_NAME}"'})


LOG_EXPORT_NAME = "reckon-signoff-log.json"


def _record_log_export(db: ReportDB, by: str, warehouse: Path | None,
                       trust: LogTrust) -> SignoffEntry | None:
    """Record that ``by`` exported the whole sign-off log: one ``exported`` entry, filed
    under the run of the log's last entry (each entry names a run; the note says it was the
    whole log), or under the newest audit run when the log is empty; None when there is no
    run at all (an empty log of an empty database: nothing of any run went out).

    Example: the note reads ``exported reckon-signoff-log.json (the whole sign-off log: 12
    entries before this one, head 3f2a...)``."""
    entries = read_log(db)
    run_id = entries[-1].run_id if entries else queries.newest_run_id(db)
    if run_id is None:
        return None
    head = entries[-1].entry_hash[:16] + "..." if entries else "none"
    count = f"{len(entries):,} entr{'ies' if len(entries) != 1 else 'y'}"
    return record_export(db, run_id, by, f"{LOG_EXPORT_NAME} (the whole sign-off log: "
                                         f"{count} before this one, head {head})",
                         warehouse=warehouse, signer=_signer(trust), heads=trust.heads)


#: What a bulk action on the filtered break list may do (each break: one log entry); the
#: same words as a break page's actions (``_ACTIONS``), a rejection with its reason.
_BULK_ACTIONS = {a: _ACTIONS[a] for a in ("comment", "accept", "resolve", "reject", "assign")}


def _bulk_digest(run_id: str, action: str, note: str, rows: list[dict[str, Any]]) -> str:
    """What a bulk confirmation stands for: the run, the action, its note and every break's
    identity, in order (a break added, gone or reordered since gives another digest)."""
    body = json.dumps([run_id, action, note.strip(),
                       [[r["window_start"].isoformat(), r["key"], r["currency"]]
                        for r in rows]], separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def _totals(rows: list[dict[str, Any]]) -> list[tuple[str, int, Decimal]]:
    """(currency, breaks, total gap) per currency, exact: never one total across them."""
    out: dict[str, tuple[int, Decimal]] = {}
    for r in rows:
        n, total = out.get(r["currency"], (0, Decimal(0)))
        out[r["currency"]] = (n + 1, money_sum((r["gap_amount"],), total))
    return [(code, n, total) for code, (n, total) in sorted(out.items())]


def _today() -> date:
    """Today in UTC: a break is overdue the day after its due date."""
    return datetime.now(UTC).date()


def _assignment(assign_to: str, due: str) -> Assignment:
    """The assignment a form asks for: a user's name and an optional due date (YYYY-MM-DD);
    one line for a mistake (the user is checked where the entry is written)."""
    name = assign_to.strip()
    if not name:
        raise UsageError("assign_to is missing: name the user who is to review the breaks")
    return Assignment(name[:200], parse_date(due.strip(), "due") if due.strip() else None)


def _assignees(db: ReportDB, run: Mapping[str, Any]) -> list[str]:
    """The users a break of ``run`` may be assigned to: enabled reviewers and reconcilers, but
    its reconciler (the page's choices; the server checks again)."""
    return [u.name for u in list_users(db) if u.enabled and u.may_act
            and not same_person(u.name, str(run.get("reconciler") or ""))]


def _rule_of(run: Mapping[str, Any], setting: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """The material rule of ``run``'s breaks: the one recorded with it (reckon.materiality's
    run_rule), the setting only for a run recorded before runs kept it."""
    return run_rule(run.get("material_gap"), setting)


def _period_bounds(month: str, start: str, end: str) -> tuple[date, date]:
    """The days a period view shows: ``month`` (YYYY-MM), or ``start``..``end``, or this
    month (UTC); a mistake is one line."""
    if month:
        try:
            first = datetime.strptime(month.strip(), "%Y-%m").date()
        except ValueError:
            raise UsageError(f"month={month!r} is not valid: a month such as 2026-01") from None
        last = (first.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
        return first, last
    if not start and not end:
        return _period_bounds(_today().strftime("%Y-%m"), "", "")
    first = parse_date(start, "start") if start else parse_date(end, "end")
    last = parse_date(end, "end") if end else first
    if last < first:
        raise UsageError(f"end={end!r} is not valid: on or after start={start!r}")
    if (last - first).days >= queries.PERIOD_MAX_DAYS:
        raise UsageError(f"end={end!r} is not valid: a period is at most "
                         f"{queries.PERIOD_MAX_DAYS} days")
    return first, last


def _filter_words(filters: queries.BreakFilter) -> str:
    """The filters an export used, as the log and the PDF say them (``filters: none``)."""
    used = {k: v for k, v in filters.query().items() if v and not (k == "age" and v == "0")}
    return "filters: " + (", ".join(f"{k}={v}" for k, v in used.items()) or "none")


def _need_reason(action: str, note: str, what: str) -> None:
    """A rejection or a reopen without its reason is refused in one line (the log would take
    any note; this names what is missing)."""
    if action in _REASONED and not note.strip():
        raise UsageError(f"note is missing: {_REASONED[action]} {what} needs a reason, "
                         "written in the note")


def _signer(trust: LogTrust) -> SigningKey:
    """The workbench's key, or a refusal: an action it cannot sign is not recorded."""
    if trust.signer is None:
        raise SignoffRefused("this workbench has no signing key, so it records no decision: "
                             "run `reckon keys init` as the workbench's account and have the "
                             "administrator register it with `--scope workbench`")
    return trust.signer


def _action_routes(app: FastAPI, db: ReportDB, warehouse: Path | None, required: int,
                   trust: LogTrust) -> None:
    @app.post("/break/action")
    def break_action(who: Actor, run: Annotated[str, Form()], ws: Annotated[str, Form()],
                     key: Annotated[str, Form()], cur: Annotated[str, Form()],
                     action: Annotated[str, Form()], note: Annotated[str, Form()] = "",
                     assign_to: Annotated[str, Form()] = "",
                     due: Annotated[str, Form()] = "") -> Response:
        if action not in _ACTIONS:
            raise UsageError(f"action={action!r} is not valid: one of " + ", ".join(_ACTIONS))
        _need_reason(action, note, "a break")
        target = _target(ws, key, cur)
        append_signoff(db, run, who.user.name, _ACTIONS[action], note, warehouse=warehouse,
                       target=target, signer=_signer(trust), heads=trust.heads,
                       assignment=_assignment(assign_to, due) if action == "assign" else None)
        query = urlencode({"run": run, "ws": ws, "key": key, "cur": cur, "msg": f"{action} recorded"})
        return RedirectResponse(f"/break?{query}", status_code=303)

    @app.post("/signoff")
    def signoff(who: Actor, run: Annotated[str, Form()], decision: Annotated[str, Form()],
                note: Annotated[str, Form()] = "") -> Response:
        if not who.user.may_sign:
            raise Forbidden(f"{who.user.name} is a {who.user.role}: only a reviewer signs a "
                            "run off")
        if decision not in _RUN_DECISIONS:
            raise UsageError(f"decision={decision!r} is not valid: one of "
                             + ", ".join(_RUN_DECISIONS))
        _need_reason(decision, note, "a run")
        found = db.get_audit_run(run)
        if found is None:
            raise UsageError(f"no audit run {run!r}")
        append_signoff(db, run, who.user.name, decision, note, warehouse=warehouse,
                       required_approvers=required, signer=_signer(trust), heads=trust.heads)
        return RedirectResponse(f"/day/{found.day.isoformat()}?kind={found.kind}&msg=run+"
                                f"{decision}", status_code=303)
