"""The nightly DAG's notifications as a user meets them, without a DAG run: the settings that
turn each on, the words of each notice, and the real provider notifiers (SMTP, Slack incoming
webhook) delivering to loopback receivers through connections set the Airflow way
(AIRFLOW_CONN_*). The real scheduler's failing run and its mail are in
tests/test_airflow_scheduler.py."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

import pytest

from app import notify
from app.settings import load_settings
from reckon.config import PROJECT_ROOT
from reckon.errors import ConfigError
from tests.notify_receivers import receivers

pytestmark = pytest.mark.airflow


def test_every_notice_is_off_by_default_and_one_setting_turns_each_on():
    quiet = load_settings(env={})
    assert not any(notify.enabled(quiet, kind) for kind in notify.KINDS)
    for kind, name in notify.KINDS.items():
        on = load_settings(env={f"RECKON_{name.upper()}": "true",
                                "RECKON_NOTIFY_EMAIL": "a@example.com"})
        assert [k for k in notify.KINDS if notify.enabled(on, k)] == [kind]
    with pytest.raises(ConfigError, match="notify_on_breaks is on but nothing would receive"):
        load_settings(env={"RECKON_NOTIFY_ON_BREAKS": "true"})


def test_the_notices_say_the_day_what_happened_and_what_to_do():
    failed = notify.failure_notice(dag_id="reckon_nightly", task_id="wait_for_watermark",
                                   day="2026-01-02", run_id="scheduled__x", try_number=1,
                                   error="day 2026-01-02 is not closed yet")
    assert failed.subject == "reckon_nightly: wait_for_watermark failed for 2026-01-02"
    assert "day 2026-01-02 is not closed yet" in failed.text
    assert """--conf '{"day": "2026-01-02"}'""" in failed.text
    assert notify.breaks_notice(day="2026-01-01", run_id="r", unexplained=0, material={}) is None
    breaks = notify.breaks_notice(day="2026-01-01", run_id="r", unexplained=1,
                                  material={"JPY": 3, "EUR": 1})
    assert breaks is not None
    assert breaks.subject == "reckon: 2026-01-01 has 1 unexplained break, 4 material breaks"
    assert "EUR 1, JPY 3" in breaks.text
    gate = notify.quality_gate_notice(days=["2026-01-01"], reason="data-quality gate: 2026-01-01: "
                                      "2 blocking expectation(s) failed")
    assert gate.subject == "reckon: quality gate failed for 2026-01-01"
    assert "2 blocking expectation(s)" in gate.text
    currency = SimpleNamespace(currency="JPY", canonical_total=Decimal("1200"),
                               provisional_total=Decimal("1000"), gap_total=Decimal("200"),
                               unexplained=0, rows=4)
    ready = notify.report_ready_notice(day="2026-01-01", run_id="r",
                                       headline=notify.currency_headline([currency]),
                                       path="/wh/reports/2026-01-01/report.html", unexplained=0)
    assert ready.subject == "reckon: report of 2026-01-01 ready for review"
    assert "JPY: canonical JPY 1,200, provisional JPY 1,000, gap JPY 200, 0 unexplained of 4 " \
           "rows" in ready.text
    assert "Report: /wh/reports/2026-01-01/report.html" in ready.text
    assert "<pre>" in ready.html() and "&lt;" in notify.Notice("x", "s", "<b>").html()


def test_material_breaks_are_counted_per_currency_by_the_runs_rule():
    rows = [SimpleNamespace(currency="EUR", gap_amount=Decimal("-1500")),
            SimpleNamespace(currency="EUR", gap_amount=Decimal("10")),
            SimpleNamespace(currency="USD", gap_amount=Decimal("1"))]
    assert notify.material_counts(rows, {"EUR": Decimal(1000)}) == {"EUR": 1, "USD": 1}
    assert notify.material_counts(rows, {}) == {}  # materiality off: none marked


def test_the_breaks_notice_counts_by_the_rule_the_run_was_audited_under(tmp_path):
    """A run audited under EUR=1000 while the setting now says EUR=1: the notice counts what
    the report and the workbench mark (the run's rule); a run recorded before runs kept their
    rule falls back to the setting."""
    from datetime import date

    from reckon.materiality import is_material
    from reports.db.repository import ReportDB
    from workbench.sample import sample_day

    recorded = {"EUR": "1000", "JPY": "100000", "KWD": "100"}
    now = {"EUR": Decimal(1)}
    with ReportDB(f"sqlite:///{tmp_path / 'r.db'}") as db:
        kept = sample_day(db, date(2026, 1, 1), breaks=60, reconciler="alice",
                          material_gap=recorded)
        older = sample_day(db, date(2026, 1, 2), breaks=60, reconciler="alice")
        by_run = notify.material_of_run(db, kept, now)
        expected: dict[str, int] = {}
        for b in db.breaks(kept):
            if is_material(b.gap_amount, b.currency, {k: Decimal(v) for k, v in recorded.items()}):
                expected[b.currency] = expected.get(b.currency, 0) + 1
        assert by_run == expected and by_run != notify.material_counts(db.breaks(kept), now)
        assert notify.material_of_run(db, older, now) == notify.material_counts(
            db.breaks(older), now)


def test_a_notice_goes_to_the_mail_and_the_webhook_once_each_and_only_when_on(monkeypatch):
    with receivers() as got:
        for name, value in got.env().items():
            monkeypatch.setenv(name, value)
        notice = notify.breaks_notice(day="2026-01-01", run_id="r1", unexplained=2,
                                      material={})
        off = load_settings(env=got.env())
        assert notify.send(off, notice, {}) == 0
        on = load_settings(env={**got.env(), "RECKON_NOTIFY_ON_BREAKS": "1"})
        assert notify.send(on, notice, {}) == 2
        got.wait(1, 1, timeout=10)
    assert got.subjects() == ["reckon: 2026-01-01 has 2 unexplained breaks"]
    assert got.mails[0]["To"] == "finance@example.com"
    assert "found 2 unexplained breaks" in got.body(got.mails[0])
    [hook] = got.hooks
    assert hook["text"].startswith("*reckon: 2026-01-01 has 2 unexplained breaks*\n")


def test_a_receiver_that_is_down_is_a_warning_not_a_failed_step(monkeypatch, caplog):
    with receivers() as got:
        env = got.env()
    for name, value in env.items():  # both receivers stopped: their ports refuse
        monkeypatch.setenv(name, value)
    on = load_settings(env={**env, "RECKON_NOTIFY_ON_QUALITY_GATE": "1"})
    notice = notify.quality_gate_notice(days=["2026-01-01"], reason="gate")
    assert notify.send(on, notice, {}) == 0
    assert "could not send the quality_gate notice" in caplog.text


@pytest.fixture()
def nightly_dag(tmp_path, monkeypatch):
    """The nightly DAG as the dag-processor parses it, with the failure notice on and both
    channels pointed at loopback receivers."""
    from app.airflow_env import prepare_airflow_home

    with receivers() as got:
        env = {**prepare_airflow_home(tmp_path / "home", migrate=False), **got.env(),
               "RECKON_WAREHOUSE": str(tmp_path / "wh"), "RECKON_NOTIFY_ON_FAILURE": "true",
               "RECKON_NOTIFY_ON_QUALITY_GATE": "true"}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        from airflow.dag_processing.dagbag import DagBag

        bag = DagBag(dag_folder=str(PROJECT_ROOT / "dags"))
        assert bag.import_errors == {}
        yield bag, got


def test_a_tasks_final_failure_calls_the_failure_notifier_of_the_dag(nightly_dag):
    """The DAG's on_failure_callback holds Airflow's notifier: told a failed sensor (as the
    task runner tells it), it sends one mail and one webhook naming the task and the day;
    the quality gate's own failure is told by the gate's notice, not twice."""
    bag, got = nightly_dag
    dag = bag.dags["reckon_nightly"]
    callbacks = dag.task_dict["wait_for_watermark"].on_failure_callback
    [notifier] = [c for c in callbacks if isinstance(c, notify.FailureNotifier)]
    ti = SimpleNamespace(dag_id="reckon_nightly", task_id="wait_for_watermark", try_number=1,
                         log_url="")
    context = {"ti": ti, "task_instance": ti, "params": {"day": "", "lookback_days": 0},
               "logical_date": datetime(2026, 1, 2, tzinfo=UTC),
               "dag_run": SimpleNamespace(run_id="scheduled__2026-01-03",
                                          run_after=datetime(2026, 1, 3, tzinfo=UTC)),
               "exception": "day 2026-01-02 is not closed yet"}
    notifier(context)
    gate = SimpleNamespace(**{**vars(ti), "task_id": "quality_gate"})
    notifier({**context, "ti": gate, "task_instance": gate})
    got.wait(1, 1, timeout=10)
    assert got.subjects() == ["reckon_nightly: wait_for_watermark failed for 2026-01-02"]
    assert len(got.hooks) == 1 and "day 2026-01-02 is not closed yet" in got.hooks[0]["text"]


def test_the_nightly_dag_declares_its_assets_and_the_example_is_scheduled_on_one(nightly_dag):
    bag, _ = nightly_dag
    dag = bag.dags["reckon_nightly"]
    outlets = {t: [a.name for a in dag.task_dict[t].outlets] for t in dag.task_dict
               if dag.task_dict[t].outlets}
    assert outlets == {"replay": ["reckon.canonical_totals"],
                       "audit": ["reckon.reconciliation"], "report": ["reckon.report"]}
    downstream = bag.dags["reckon_after_reconciliation"]
    assert "reckon.reconciliation" in str(downstream.timetable.asset_condition)
    assert dag.task_dict["audit"].outlets[0].uri.endswith("/wh/reconciliation")


def test_a_steps_lineage_names_its_tables_with_the_delta_versions_it_read_and_wrote(tmp_path):
    """The replay's COMPLETE event as the OpenLineage provider builds it: the operator's
    on-complete method (what the provider's DefaultExtractor calls) answers event_log at the
    version the replay read and canonical_totals at the version its Delta log now has."""
    from airflow.providers.openlineage.extractors.manager import ExtractorManager
    from airflow.sdk import dag, task

    from app import lineage

    log = tmp_path / "canonical_totals" / "_delta_log"
    log.mkdir(parents=True)
    for version in range(3):
        (log / f"{version:020d}.json").write_text('{"commitInfo": {}}\n')

    @dag(schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC))
    def one() -> None:
        @task(task_id="replay")
        def replay() -> None:
            pass

        replay()

    operator = one().task_dict["replay"]
    found = lineage.step_lineage(tmp_path, "replay", [{"event_log_version": 4},
                                                      {"event_log_version": 7}])
    lineage.attach(operator, found)
    extractor = ExtractorManager()._get_extractor(operator)
    assert extractor is not None
    got = extractor.extract_on_complete(None)
    assert [(d.name, d.facets["version"].datasetVersion) for d in got.inputs] == [
        (str(tmp_path / "event_log"), "7")]  # the newest day's read
    assert [(d.name, (d.facets.get("version") or SimpleNamespace(datasetVersion=None))
             .datasetVersion) for d in got.outputs] == [
        (str(tmp_path / "canonical_totals"), "2"), (str(tmp_path / "uncaught_duplicates"), None)]
    checked = lineage.step_lineage(tmp_path, "check", [{"suites": [
        {"table": "reconciliation", "table_version": 3}, {"table": "late_events"}]}])
    assert checked["inputs"] == [{"namespace": "file", "name": str(tmp_path / "reconciliation"),
                                  "version": 3}]
    report = lineage.step_lineage(tmp_path, "report", [{}], {"2026-01-01": "/r/report.html"})
    assert [(d["name"], d["version"]) for d in report["inputs"]] == [
        (str(tmp_path / "reconciliation"), None), (str(tmp_path / "canonical_totals"), 2)]
    assert report["outputs"] == [{"namespace": "file", "name": "/r/report.html", "version": None}]


def test_report_ready_links_the_day_on_the_workbench_and_the_links_open_there(tmp_path,
                                                                             monkeypatch):
    """With ``workbench_url`` set, the "report ready" mail and webhook carry the day's page
    and its report on the workbench (and the report's path); a reviewer who opens them, the
    real workbench app behind that base URL, gets the day's run and the report itself.
    Without the setting the notice keeps the path only; a base URL no reader could open is
    one clear line."""
    import re

    from fastapi.testclient import TestClient

    from reports.db.repository import ReportDB
    from reports.records import ReportRecord
    from tests.signers import workbench_trust
    from workbench.app import create_app
    from workbench.auth import add_user
    from workbench.sample import sample_day

    day = datetime(2026, 1, 1, tzinfo=UTC).date()
    folder = tmp_path / "reports" / day.isoformat()
    folder.mkdir(parents=True)
    (folder / "report.html").write_text("<p>the report of the day</p>")
    base = "http://testserver/wb/"  # where the workbench is mounted, a trailing slash too
    with receivers() as got, ReportDB(f"sqlite:///{tmp_path / 'r.db'}") as db:
        for name, value in got.env().items():
            monkeypatch.setenv(name, value)
        run_id = sample_day(db, day, breaks=3, reconciler="alice")
        db.record_report(ReportRecord(day=day, audit_run_id=run_id, created_at=datetime.now(UTC),
                                      html_path=str(folder / "report.html"),
                                      pdf_path=str(folder / "report.pdf"), sha256="0" * 64))
        add_user(db, "bob", "reviewer", "correct horse battery staple")
        on = load_settings(env={**got.env(), "RECKON_NOTIFY_REPORT_READY": "1",
                                "RECKON_WORKBENCH_URL": base})
        for settings in (on, load_settings(env={**got.env(), "RECKON_NOTIFY_REPORT_READY": "1"})):
            notify.send(settings, notify.report_ready_notice(
                day=day.isoformat(), run_id=run_id, headline=[], unexplained=3,
                path=str(folder / "report.html"), workbench_url=settings.workbench_url), {})
        got.wait(2, 2, timeout=10)
        linked, plain = got.body(got.mails[0]), got.body(got.mails[1])
        links = re.findall(r"http://testserver/wb/\S+", got.hooks[0]["text"])
        assert links == re.findall(r"http://testserver/wb/\S+", linked) == [
            f"http://testserver/wb/day/{day}",
            f"http://testserver/wb/report/{day}/nightly/report.html"]
        assert f"(file {folder / 'report.html'})" in linked
        assert "testserver" not in plain and f"Report: {folder / 'report.html'}" in plain

        reviewer = TestClient(create_app(db, trust=workbench_trust(db), secret=b"s" * 32,
                                         warehouse=tmp_path), root_path="/wb")
        token = re.search(r'name="csrf" value="([^"]+)"', reviewer.get("/wb/login").text)
        assert token is not None
        reviewer.post("/wb/login", data={"name": "bob", "csrf": token.group(1),
                                         "password": "correct horse battery staple"})
        page, report = (reviewer.get(link) for link in links)
        assert page.status_code == 200 and run_id in page.text
        assert report.status_code == 200 and "the report of the day" in report.text
    with pytest.raises(ConfigError, match=r"^workbench_url='ftp://wb' is not valid: the "
                                          r"workbench's base URL"):
        load_settings(env={"RECKON_WORKBENCH_URL": "ftp://wb"})


def test_a_manual_runs_note_is_its_day():
    """The rule the trigger path and the scheduler's listener (plugins/reckon_run_notes.py)
    share: a conf naming a day notes it; none, or not a date, notes nothing."""
    from app.airflow_env import run_note

    assert run_note({"day": "2026-01-01", "lookback_days": 0}) == "day 2026-01-01"
    assert [run_note(c) for c in (None, {}, {"day": ""}, {"day": "x"}, {"day": 1})] == [None] * 5
