"""GX Data Docs that open without internet (audits.datadocs), without Spark: a real GX site
(the index and a suite's page, rendered by GX itself) has every browser asset served from the
site after ``localise_site``, and every file a page loads is on disk. The Spark test that
opens the check run's pages in offline Chromium is in tests/test_quality.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from app.settings import load_settings
from audits.datadocs import (
    ASSETS,
    DROPPED,
    VENDOR,
    assets_dir,
    external_resources,
    localise_site,
)
from reckon.config import PROJECT_ROOT

_LOCAL = re.compile(r'<(?:script|link|img)\b[^>]*?\b(?:src|href)="([^"#:]+)"', re.I)
_CSS_URL = re.compile(r'url\(\s*[\'"]?([^\'")]+)[\'"]?\s*\)')


def _jars() -> Path:
    jars_dir = load_settings(env={}).jars_dir
    if not any(assets_dir(jars_dir).glob("*.jar")):
        pytest.fail(f"the Data Docs WebJars are missing from {assets_dir(jars_dir)}: run "
                    "`make setup`", pytrace=False)
    return Path(jars_dir)


def _gx_site(warehouse: Path) -> Path:
    """A Data Docs site rendered by GX (index + one suite page), as `reckon check` builds it."""
    import great_expectations as gx

    from audits.quality import _SITE, _gx_context, data_docs_dir

    ctx: Any = _gx_context(warehouse)
    ctx.suites.add_or_update(gx.ExpectationSuite(
        name="reckon_demo", expectations=[
            gx.expectations.ExpectTableRowCountToBeBetween(min_value=1),
            gx.expectations.ExpectColumnValuesToNotBeNull(column="key")]))
    ctx.build_data_docs(site_names=[_SITE])
    return data_docs_dir(warehouse)


def validation_rows(index: Path) -> list[dict[str, str]]:
    """The validation rows of a Data Docs index as GX wrote them for bootstrap-table to draw
    (the page's own data, read without a browser): run name, suite, and the status text the
    row's colour follows ("Success" green, "Failed" red)."""
    import ast

    html = index.read_text(encoding="utf-8")
    table = html.index("ge-index-page-validation-results-table")
    found = re.compile(r"data: (\[\{.*?\}\]),\s*toolbar:", re.S).search(html, table)
    assert found, html[table:table + 3000]
    return [{"run": row["run_name"], "suite": row["_expectation_suite_name_sort"],
             "status": row["_validation_success_text"]}
            for row in ast.literal_eval(found.group(1))]


def missing_files(site: Path) -> list[str]:
    """Every file a page of the site loads (script, stylesheet, image, and what a vendored
    stylesheet loads in turn) that is not on disk, as 'page -> path'."""
    missing = []
    for page in site.rglob("*.html"):
        for ref in _LOCAL.findall(page.read_text(encoding="utf-8")):
            target = (page.parent / unquote(urlsplit(ref).path)).resolve()
            if not target.is_file():
                missing.append(f"{page.relative_to(site)} -> {ref}")
    for css in (site / VENDOR).rglob("*.css"):
        for ref in _CSS_URL.findall(css.read_text(encoding="utf-8", errors="replace")):
            if ref.startswith("data:"):
                continue
            if not (css.parent / urlsplit(ref).path).resolve().is_file():
                missing.append(f"{css.relative_to(site)} -> {ref}")
    return missing


def test_every_cdn_url_in_gx_templates_is_known() -> None:
    """A GX upgrade that names another asset (or version) fails here, not in a reviewer's
    browser: every resource URL in GX's page templates is vendored or deliberately dropped."""
    import great_expectations

    templates = Path(great_expectations.__file__).parent / "render" / "view" / "templates"
    known = {u for a in ASSETS for u in a.urls} | set(DROPPED)
    found = {url for t in templates.glob("*.j2")
             for url in external_resources(t.read_text(encoding="utf-8"))}
    assert found, "no CDN URL found in GX's templates: the pattern no longer matches them"
    assert found <= known, sorted(found - known)


def test_the_pom_fetches_exactly_the_jars_the_assets_name() -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.parse(PROJECT_ROOT / "jvm" / "datadocs" / "pom.xml").getroot()
    deps = {f"{d.findtext('m:artifactId', namespaces=ns)}-{d.findtext('m:version', namespaces=ns)}"
            for d in pom.iterfind("m:dependencies/m:dependency", ns)}
    assert deps == {a.jar for a in ASSETS}


def test_a_gx_site_is_served_from_its_own_folder(tmp_path: Path) -> None:
    jars = _jars()
    site = _gx_site(tmp_path / "wh")
    before = (site / "index.html").read_text(encoding="utf-8")
    assert "https://unpkg.com/bootstrap-table@1.19.1" in before  # what GX writes

    done = localise_site(site, jars)
    assert done.offline and done.missing == () and done.unresolved == ()
    assert done.pages == len(list(site.rglob("*.html"))) >= 2 and done.copied > 10
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        assert external_resources(html) == [], page
        assert "integrity=" not in html and "bootstrap-prefers-dark" not in html
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'src="static/vendor/bootstrap-table/1.19.1/dist/bootstrap-table.min.js"' in index
    suite_page = (site / "expectations" / "reckon_demo.html").read_text(encoding="utf-8")
    assert 'src="../static/vendor/jquery/3.7.1/dist/jquery.min.js"' in suite_page
    assert missing_files(site) == []
    assert (site / VENDOR / "font-awesome/6.6.0/webfonts/fa-solid-900.woff2").is_file()

    again = localise_site(site, jars)  # every build runs it: a no-op the second time
    assert (again.pages, again.copied, again.offline) == (0, 0, True)


def test_without_the_jars_the_pages_keep_the_cdn_and_the_user_is_told(tmp_path: Path) -> None:
    site = _gx_site(tmp_path / "wh")
    before = (site / "index.html").read_text(encoding="utf-8")
    empty = tmp_path / "no-jars"
    done = localise_site(site, empty)
    assert not done.offline and len(done.missing) == len({a.jar for a in ASSETS})
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "https://code.jquery.com/jquery-3.7.1.min.js" in index  # still works online
    assert index != before  # the logo and the dark theme need no jar
    warning = done.warning(assets_dir(empty))
    assert warning is not None and "\n" not in warning
    assert "run `make setup`" in warning and str(assets_dir(empty)) in warning
