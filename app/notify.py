"""The nightly DAG's notifications, sent with Airflow's own notifiers.

Four kinds, each off until its setting turns it on (reckon.config: ``notify_on_failure``,
``notify_on_breaks``, ``notify_on_quality_gate``, ``notify_report_ready``):

* ``failure``: a task's final failure (after its retries), as the tasks' ``on_failure_callback``
  (``FailureNotifier``, an Airflow ``BaseNotifier``);
* ``breaks``: an audited day with unexplained breaks, or breaks material under the run's
  ``material_gap``;
* ``quality_gate``: the quality gate failed (which days, why);
* ``report_ready``: a day's report is rendered: its per-currency headline and its path, and
  with ``workbench_url`` set the workbench's links to the day and its report.

Each goes to every channel set: mail (``notify_email``) through the SMTP provider's
``SmtpNotifier`` and the Airflow connection ``notify_smtp_conn`` (``AIRFLOW_CONN_SMTP_DEFAULT``),
and a Slack incoming webhook through the Slack provider's ``SlackWebhookNotifier`` and the
connection ``notify_slack_conn``. The messages are built from plain values here (``Notice``),
so they are tested without Airflow; a notice that cannot be sent is logged as a warning and
does not fail the step it reports on (the step's own outcome stands).
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import PurePath
from typing import Any

from airflow.sdk import BaseNotifier

from reckon.config import Settings

__all__ = ["KINDS", "FailureNotifier", "Notice", "breaks_notice", "enabled", "failure_notice",
           "notifiers", "quality_gate_notice", "report_ready_notice", "send"]

log = logging.getLogger("reckon.airflow")

#: notice kind -> the setting that turns it on
KINDS: Mapping[str, str] = {"failure": "notify_on_failure", "breaks": "notify_on_breaks",
                            "quality_gate": "notify_on_quality_gate",
                            "report_ready": "notify_report_ready"}


@dataclass(frozen=True)
class Notice:
    """One notification: its kind (a key of KINDS), a subject line and a plain-text body."""

    kind: str
    subject: str
    text: str

    def html(self) -> str:
        """The body as the mail's HTML part: the text, escaped, in a <pre>."""
        return f"<pre>{html.escape(self.text)}</pre>"


def enabled(settings: Settings, kind: str) -> bool:
    return bool(getattr(settings, KINDS[kind]))


# ----------------------------------------------------------------------------- the messages


def failure_notice(*, dag_id: str, task_id: str, day: str, run_id: str, try_number: Any,
                   error: Any, log_url: str = "") -> Notice:
    """A task failed for good.

    >>> failure_notice(dag_id="reckon_nightly", task_id="audit", day="2026-01-01",
    ...                run_id="r1", try_number=3, error="boom").subject
    'reckon_nightly: audit failed for 2026-01-01'
    """
    lines = [f"The task {task_id} of {dag_id} failed for day {day} (run {run_id}, "
             f"try {try_number}); it will not be retried.",
             f"Error: {error}" if error else "Error: (none given; see the task's log)"]
    if log_url:
        lines.append(f"Log: {log_url}")
    lines.append(f"Re-run the day once fixed: airflow dags trigger {dag_id} "
                 f"--conf '{{\"day\": \"{day}\"}}'")
    return Notice("failure", f"{dag_id}: {task_id} failed for {day}", "\n".join(lines))


def breaks_notice(*, day: str, run_id: str, unexplained: int,
                  material: Mapping[str, int], report_hint: str = "") -> Notice | None:
    """An audited day with unexplained breaks or material ones (``material``: currency ->
    count of material breaks); None when it has neither.

    >>> breaks_notice(day="2026-01-01", run_id="r", unexplained=0, material={}) is None
    True
    >>> breaks_notice(day="2026-01-01", run_id="r", unexplained=2, material={"EUR": 1}).subject
    'reckon: 2026-01-01 has 2 unexplained breaks, 1 material break'
    """
    count = sum(material.values())
    if not unexplained and not count:
        return None
    parts = []
    if unexplained:
        parts.append(f"{unexplained} unexplained break{'s' * (unexplained != 1)}")
    if count:
        parts.append(f"{count} material break{'s' * (count != 1)}")
    lines = [f"The audit {run_id} of {day} found {' and '.join(parts)}."]
    if count:
        lines.append("Material breaks by currency: "
                     + ", ".join(f"{code} {n}" for code, n in sorted(material.items())))
    lines.append(f"Review them: reckon breaks --date {day}"
                 + (f" (report: {report_hint})" if report_hint else ""))
    return Notice("breaks", f"reckon: {day} has {', '.join(parts)}", "\n".join(lines))


def quality_gate_notice(*, days: Sequence[str], reason: str) -> Notice:
    """The quality gate failed; ``reason`` is its one-line message (the days and why)."""
    named = ", ".join(days) or "no day"
    return Notice("quality_gate", f"reckon: quality gate failed for {named}",
                  f"{reason}\nThe day's report lists the failed expectations; Data Docs too.")


def report_ready_notice(*, day: str, run_id: str, headline: Sequence[str], path: str,
                        unexplained: int, workbench_url: str = "") -> Notice:
    """A day's report is ready for review: one headline line per currency, its path and,
    with the workbench's base URL (``workbench_url``), the links a reviewer clicks: the
    day's page (review, sign-off) and the report as the workbench serves it.

    >>> n = report_ready_notice(day="2026-01-01", run_id="r", headline=[], unexplained=0,
    ...                         path="/wh/r/2026-01-01/report.html", workbench_url="https://wb.x")
    >>> for line in n.text.splitlines()[-2:]: print(line)
    Review and sign off: https://wb.x/day/2026-01-01
    Report: https://wb.x/report/2026-01-01/nightly/report.html (file /wh/r/2026-01-01/report.html)
    """
    state = ("no unexplained breaks" if not unexplained
             else f"{unexplained} unexplained break{'s' * (unexplained != 1)}")
    lines = [f"The report of {day} (audit {run_id}) is ready for review: {state}.",
             *(headline or ["no events on the day"]), *_report_lines(day, path, workbench_url)]
    return Notice("report_ready", f"reckon: report of {day} ready for review",
                  "\n".join(lines))


def _report_lines(day: str, path: str, workbench_url: str) -> list[str]:
    """Where the report is: its path, or the workbench's links to the day and the report
    (the path kept beside them: the file is what was hashed and recorded)."""
    if not workbench_url:
        return [f"Report: {path}"]
    from workbench.links import day_link, report_link

    return [f"Review and sign off: {day_link(workbench_url, day)}",
            f"Report: {report_link(workbench_url, day, PurePath(path).name)} (file {path})"]


def currency_headline(currencies: Iterable[Any]) -> list[str]:
    """One line per currency of an audit run (audits.records.CurrencySummary): canonical and
    provisional totals, the gap and the unexplained rows, each in the currency's own digits
    (amounts of two currencies are never added)."""
    from reckon.money import format_money

    lines = []
    for c in currencies:
        lines.append(f"{c.currency}: canonical {format_money(Decimal(c.canonical_total), c.currency)}"
                     f", provisional {format_money(Decimal(c.provisional_total), c.currency)}"
                     f", gap {format_money(Decimal(c.gap_total), c.currency)}"
                     f", {c.unexplained} unexplained of {c.rows} rows")
    return lines


def material_counts(breaks: Iterable[Any], rule: Mapping[str, Decimal]) -> dict[str, int]:
    """currency -> how many of ``breaks`` (audits.records.BreakRow) are material by ``rule``
    (reckon.materiality.run_rule); {} when materiality is off."""
    from reckon.materiality import is_material

    counts: dict[str, int] = {}
    for b in breaks:
        if is_material(b.gap_amount, b.currency, rule):
            counts[b.currency] = counts.get(b.currency, 0) + 1
    return counts


def material_of_run(db: Any, run_id: str, setting: Mapping[str, Decimal]) -> dict[str, int]:
    """currency -> the run's material breaks, by the rule the run was audited under
    (reckon.materiality.run_rule; ``setting`` only for a run recorded before runs kept it),
    so the notice counts what the report and the workbench mark. ``db``: a ReportDB."""
    from reckon.materiality import run_rule

    run = db.get_audit_run(run_id)
    rule = run_rule(None if run is None else run.material_gap, setting)
    return material_counts(db.breaks(run_id), rule) if rule else {}


# ----------------------------------------------------------------------------- sending


def notifiers(settings: Settings, notice: Notice) -> list[BaseNotifier]:
    """The provider notifiers that deliver ``notice`` to every channel set."""
    out: list[BaseNotifier] = []
    if settings.notify_email:
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        out.append(SmtpNotifier(to=list(settings.notify_email),
                                from_email=settings.notify_email_from or None,
                                subject=notice.subject, html_content=notice.html(),
                                smtp_conn_id=settings.notify_smtp_conn))
    if settings.notify_slack_conn:
        from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

        out.append(SlackWebhookNotifier(slack_webhook_conn_id=settings.notify_slack_conn,
                                        text=f"*{notice.subject}*\n{notice.text}"))
    return out


def send(settings: Settings, notice: Notice | None, context: Any) -> int:
    """Send ``notice`` when its kind is turned on; returns how many channels took it. The
    notifiers' ``notify`` is called directly: the text is data, never a Jinja template."""
    if notice is None or not enabled(settings, notice.kind):
        return 0
    sent = 0
    for notifier in notifiers(settings, notice):
        try:
            notifier.notify(context)
            sent += 1
        except Exception as exc:  # the step's outcome stands; the log says what was lost
            log.warning("reckon could not send the %s notice %r with %s: %s", notice.kind,
                        notice.subject, type(notifier).__name__, exc)
    if sent:
        log.info("reckon sent the %s notice %r to %d channel(s)", notice.kind, notice.subject,
                 sent)
    return sent


class FailureNotifier(BaseNotifier):
    """``on_failure_callback`` of the nightly tasks: one ``failure`` notice per task that failed
    for good, naming the task, the day (``day_of(context)``), the error and the log.

    Whether to send, and where, is the failing worker's settings when it fails
    (``settings_of()``), not those of whatever parsed the DAG: the notifier is always attached,
    so the DAG's shape never depends on the parser's environment. Off unless
    ``notify_on_failure``; the quality gate's failure is left to its own notice when
    ``notify_on_quality_gate`` is on."""

    template_fields = ()

    def __init__(self, settings_of: Callable[[], Settings], day_of: Callable[[Any], str]
                 ) -> None:
        super().__init__()
        self.settings_of = settings_of
        self.day_of = day_of

    def notify(self, context: Any) -> None:
        settings = self.settings_of()
        ti = context.get("task_instance") or context.get("ti")
        task_id = str(getattr(ti, "task_id", "?"))
        told_by_gate = task_id == "quality_gate" and settings.notify_on_quality_gate
        if not settings.notify_on_failure or told_by_gate:
            return
        dag_run = context.get("dag_run")
        notice = failure_notice(
            dag_id=str(getattr(ti, "dag_id", "?")), task_id=task_id,
            day=self.day_of(context),
            run_id=str(getattr(dag_run, "run_id", None) or context.get("run_id") or "?"),
            try_number=getattr(ti, "try_number", "?"), error=context.get("exception"),
            log_url=str(getattr(ti, "log_url", "") or ""))
        send(settings, notice, context)
