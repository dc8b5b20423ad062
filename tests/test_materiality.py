"""Material breaks (issue 61; fast tier, no Spark): the ``material_gap`` setting (a minimum
absolute gap per currency, never converted or summed across currencies) marks the same breaks
in `reckon breaks list` (and --json), the workbench's break list and the report's breaks
section (HTML, PDF, breaks.csv); a bad setting is one line."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import subprocess
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.cli import main
from app.settings import load_settings
from reckon.errors import ConfigError
from reckon.materiality import is_material
from reports.db.repository import ReportDB
from reports.render import render_context
from tests.signers import workbench_trust
from tests.test_report_render import _ctx, _need
from workbench import queries
from workbench.app import create_app
from workbench.auth import add_user
from workbench.sample import sample_day

DAY = date(2026, 1, 1)
PASSWORD = "correct horse battery staple"
RULE = "EUR=2.5,JPY=200"  # KWD not named: every KWD break is material


def test_the_rule_is_per_currency_and_either_sign() -> None:
    rule = load_settings(env={"RECKON_MATERIAL_GAP": RULE}).material_thresholds()
    assert rule == {"EUR": Decimal("2.5"), "JPY": Decimal("200")}
    assert is_material(Decimal("-2.50"), "EUR", rule) is True
    assert is_material(Decimal("2.49"), "EUR", rule) is False
    assert is_material(Decimal("199"), "JPY", rule) is False  # a JPY 199 break is small
    assert is_material(Decimal("0.001"), "KWD", rule) is True
    assert is_material(Decimal("1e9"), "EUR", {}) is None  # off: nothing is marked


@pytest.mark.parametrize(("value", "words"), [
    ("EURO=1", "'EURO' is not an ISO 4217 currency code"),
    ("EUR=-1", "EUR='-1' is not a non-negative amount in EUR"),
    ("EUR=lots", "EUR='lots' is not a non-negative amount"),
    ("EUR", "has no '='"),
])
def test_a_bad_setting_is_one_line(tmp_path: Path, monkeypatch, capsys, value: str,
                                   words: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(words)):
        load_settings(env={"RECKON_MATERIAL_GAP": value})
    monkeypatch.setenv("RECKON_MATERIAL_GAP", value)
    assert main(["breaks", "list", "--warehouse", str(tmp_path / "wh")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


@pytest.fixture()
def warehouse(tmp_path: Path, monkeypatch) -> Path:
    for name in ("RECKON_CONFIG", "RECKON_REPORT_DB_URL", "RECKON_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    wh = tmp_path / "wh"
    (wh / "reports").mkdir(parents=True)
    with ReportDB(f"sqlite:///{wh / 'reports' / 'reckon.db'}") as db:
        sample_day(db, DAY, breaks=60, reconciler="alice")
        add_user(db, "bob", "reviewer", PASSWORD)
    return wh


def _expected(gap: Decimal, code: str) -> bool:
    return abs(gap) >= {"EUR": Decimal("2.5"), "JPY": Decimal("200")}.get(code, Decimal(0))


def test_breaks_list_and_the_workbench_mark_the_same_breaks(warehouse: Path, monkeypatch,
                                                            capsys) -> None:
    monkeypatch.setenv("RECKON_MATERIAL_GAP", RULE)
    args = ["breaks", "list", "--warehouse", str(warehouse), "--date", DAY.isoformat()]
    assert main([*args, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    marks = {(b["window_start"], b["key"], b["currency"]): b["material"] for b in listed}
    assert len(marks) == 60 and {True, False} <= set(marks.values())
    for b in listed:
        assert b["material"] == _expected(Decimal(b["gap_amount"]), b["currency"]), b
    assert main(args) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[-1] == "MATERIAL"
    assert sum(line.rstrip().endswith(" material") for line in table) == sum(marks.values())

    with ReportDB(f"sqlite:///{warehouse / 'reports' / 'reckon.db'}") as db:
        rule = load_settings(env={"RECKON_MATERIAL_GAP": RULE}).material_thresholds()
        client = TestClient(create_app(db, trust=workbench_trust(db), secret=b"s" * 32,
                                           material_gap=rule))
        token = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text).group(1)
        client.post("/login", data={"name": "bob", "password": PASSWORD, "csrf": token})
        page = client.get(f"/day/{DAY}/breaks").text
        shown = re.findall(r'<td class="(?:bad )?material">([^<]*)</td>', page)
        assert "<th title=" in page and ">Material</th>" in page
        first = sorted(marks)[:queries.PAGE_SIZE]  # the first page, in the page's order
        assert len(shown) == len(first) and shown.count("material") == sum(
            marks[k] for k in first) > 0
        exported = csv.DictReader(io.StringIO(client.get(f"/day/{DAY}/breaks.csv").text))
        assert sum(r["material"] == "material" for r in exported) == sum(marks.values())
        off = TestClient(create_app(db, trust=workbench_trust(db), secret=b"s" * 32))
        token = re.search(r'name="csrf" value="([^"]+)"', off.get("/login").text).group(1)
        off.post("/login", data={"name": "bob", "password": PASSWORD, "csrf": token})
        assert ">Material</th>" not in off.get(f"/day/{DAY}/breaks").text


def test_the_reports_breaks_section_marks_them_in_html_pdf_and_csv(tmp_path: Path) -> None:
    """The report's breaks: EUR 12.50 (material at 10), JPY 1,200 (not at 5,000), KWD 0.125
    (material: KWD has no threshold)."""
    ctx = dataclasses.replace(_ctx(breaks=3), material_gap=(("EUR", Decimal("10")),
                                                            ("JPY", Decimal("5000"))))
    result = render_context(ctx, tmp_path / "r")
    html = Path(result.html_path).read_text()
    assert "2 material (absolute gap at least EUR 10.00, JPY 5,000; any other currency: every " \
           "break), marked in the material column" in html
    section = html[html.index('id="breaks"'):html.index('id="gap"')]
    assert "<th>material</th><th>explanation</th>" in section
    marks = re.findall(r"<td>(material|-)</td><td>(?:late events|nothing explains it)</td>",
                       section)
    with (Path(result.out_dir) / "breaks.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["currency"], r["material"]) for r in rows] == [
        ("EUR", "material"), ("JPY", "-"), ("KWD", "material")]
    assert marks == [r["material"] for r in rows]  # the HTML's column is the CSV's
    text = subprocess.run([_need("pdftotext"), "-layout", result.pdf_path, "-"], check=True,
                          capture_output=True, text=True).stdout
    assert "; 2 material (absolute gap at least EUR 10.00" in " ".join(text.split())
    header = next(line for line in text.splitlines() if line.startswith("window (UTC)"))
    assert header.split()[-2:] == ["material", "explanation"], header
    listed = [line.split() for line in text.splitlines() if line.startswith("00:00:")]
    explained = [cells[:-2] if cells[-1] == "events" else cells[:-3] for cells in listed]
    assert [(cells[2], cells[-1]) for cells in explained] == [
        (r["currency"], r["material"]) for r in rows]  # one line a break, as in the CSV
    plain = render_context(_ctx(breaks=3), tmp_path / "plain")
    assert ">material<" not in Path(plain.html_path).read_text()
