"""GX Data Docs that open without internet: the pages' browser assets served from the site.

GX 1.24's page templates load jQuery, Bootstrap 4.3.1, bootstrap-table 1.19.1 (which draws
the index's list of suites and validations from JSON: without it the index is blank),
popper, the datepicker, FontAwesome and vega/vega-lite/vega-embed from CDNs, and the navbar
logo from an S3 bucket. A finance reviewer who opens the site on a machine without internet
(or behind a proxy that blocks CDNs) sees an empty page.

``localise_site`` runs after every ``build_data_docs``: it copies each asset the pages name
from its WebJar (Maven Central packages the exact versions GX names; ``make setup`` fetches
them into ``<jars_dir>/datadocs`` from ``jvm/datadocs/pom.xml``) into
``<site>/static/vendor/``, and rewrites every page's CDN URL to a relative path. The
``integrity``/``crossorigin`` attributes are dropped with them: a ``file://`` page has an
opaque origin, so a script marked ``crossorigin`` would be refused even from disk.

What has no packaged source: ``@forevolve/bootstrap-dark`` (a dark theme for readers whose
system prefers dark; no WebJar or Debian/PyPI package). Its ``<link>`` is removed and the
pages use Bootstrap's light theme. When the jars are missing (``make setup`` not run), the
pages are left pointing at the CDNs (they still work online) and ``Localised.missing`` names
what to fetch, so the caller can say so in one line.

GX's own images (``static/images``, which GX copies into the site) are pointed at from each
page's depth: the navbar logo is on S3 in GX's templates, and the favicon of a validation
page climbs one folder too few.

The rewrite is idempotent and covers every page of the site, not only the ones this build
rendered, so pages built before the jars were fetched are repaired by the next build.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ASSETS",
    "DROPPED",
    "Asset",
    "Localised",
    "assets_dir",
    "data_docs_dir",
    "external_resources",
    "localise_site",
]

def data_docs_dir(warehouse: str | Path) -> Path:
    """The GX Data Docs site; ``index.html`` lists every suite and validation. Here, beside
    the site's other rules and without pyspark or GX, so the report (which links the index)
    imports neither; ``audits.quality`` re-exports it.

    >>> data_docs_dir("/srv/wh").as_posix()
    '/srv/wh/reports/data_docs'
    """
    return Path(warehouse) / "reports" / "data_docs"


_WEBJARS = "META-INF/resources/webjars/"
VENDOR = "static/vendor"  # under the site root


@dataclass(frozen=True)
class Asset:
    """One file a Data Docs page loads: the CDN URLs GX writes for it, the WebJar that packages
    it (file name without ``.jar``), its path under the jar's ``webjars/`` folder, and folders
    it loads in turn (FontAwesome's CSS loads ``../webfonts/``), copied beside it."""

    urls: tuple[str, ...]
    jar: str
    path: str
    with_folders: tuple[str, ...] = ()


ASSETS: tuple[Asset, ...] = (
    Asset(("https://code.jquery.com/jquery-3.7.1.min.js",),
          "jquery-3.7.1", "jquery/3.7.1/dist/jquery.min.js"),
    Asset(("https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js",),
          "popper.js-1.12.9", "popper.js/1.12.9/dist/umd/popper.min.js"),
    Asset(("https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js",),
          "bootstrap-4.3.1", "bootstrap/4.3.1/js/bootstrap.min.js"),
    Asset(("https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css",),
          "bootstrap-4.3.1", "bootstrap/4.3.1/css/bootstrap.min.css"),
    Asset(("https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js",),
          "bootstrap-table-1.19.1", "bootstrap-table/1.19.1/dist/bootstrap-table.min.js"),
    Asset(("https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css",),
          "bootstrap-table-1.19.1", "bootstrap-table/1.19.1/dist/bootstrap-table.min.css"),
    Asset(("https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/"
           "bootstrap-table-filter-control.min.js",),
          "bootstrap-table-1.19.1",
          "bootstrap-table/1.19.1/dist/extensions/filter-control/"
          "bootstrap-table-filter-control.min.js"),
    # GX names the filter-control stylesheet at 1.19.0 (two spellings); the 1.19.1 one that
    # matches the script it styles is served for both
    Asset(("https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/"
           "bootstrap-table-filter-control.min.css",
           "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/"
           "bootstrap-table-filter-control.css"),
          "bootstrap-table-1.19.1",
          "bootstrap-table/1.19.1/dist/extensions/filter-control/"
          "bootstrap-table-filter-control.min.css"),
    Asset(("https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/"
           "bootstrap-datepicker.min.js",),
          "bootstrap-datepicker-1.9.0", "bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js"),
    Asset(("https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/"
           "bootstrap-datepicker.min.css",),
          "bootstrap-datepicker-1.9.0",
          "bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css"),
    Asset(("https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css",),
          "font-awesome-6.6.0", "font-awesome/6.6.0/css/all.min.css",
          ("font-awesome/6.6.0/webfonts/",)),
    # GX asks for the newest 5.x / 6.x; the WebJars are the newest Maven Central has
    Asset(("https://cdn.jsdelivr.net/npm/vega@5",), "vega-5.32.0", "vega/5.32.0/vega.min.js"),
    Asset(("https://cdn.jsdelivr.net/npm/vega-lite@5",),
          "vega-lite-5.23.0", "vega-lite/5.23.0/vega-lite.min.js"),
    Asset(("https://cdn.jsdelivr.net/npm/vega-embed@6",),
          "vega-embed-6.29.0", "vega-embed/6.29.0/vega-embed.min.js"),
)

# Stylesheets with no packaged source: their <link> is removed (see the module docstring).
DROPPED: tuple[str, ...] = (
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/"
    "bootstrap-prefers-dark.css",
)

# The navbar logo; GX copies the same images into <site>/static/images/.
_GX_IMAGES = "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/"

_SRI = re.compile(r'\s+(?:integrity="[^"]*"|crossorigin="[^"]*")')
# a resource the browser fetches by itself: <script src>, <link href>, <img src>
_RESOURCE = re.compile(r'<(?:script|link|img)\b[^>]*?\b(?:src|href)="((?:https?:)?//[^"]+)"',
                       re.I)


@dataclass(frozen=True)
class Localised:
    """What ``localise_site`` did: pages rewritten, files copied, jars it could not find
    (their assets are left on the CDN), and external resources still in some page (a GX
    upgrade that names a new asset shows up here)."""

    pages: int
    copied: int
    missing: tuple[str, ...]
    unresolved: tuple[str, ...]

    @property
    def offline(self) -> bool:
        """Whether every page opens without internet."""
        return not self.missing and not self.unresolved

    def warning(self, jars: Path) -> str | None:
        """One line for the user when the site still needs internet, else None."""
        if self.missing:
            return (f"Data Docs need internet: {len(self.missing)} browser asset(s) are not in "
                    f"{jars} ({', '.join(self.missing)}): run `make setup` to fetch them")
        if self.unresolved:
            return (f"Data Docs still load {len(self.unresolved)} file(s) from the internet "
                    f"({', '.join(self.unresolved[:3])}): audits/datadocs.py ASSETS does not "
                    "know them")
        return None


def assets_dir(jars_dir: str | Path) -> Path:
    """Where ``make setup`` puts the Data Docs WebJars (beside the Spark jars)."""
    return Path(jars_dir).expanduser() / "datadocs"


def external_resources(html: str) -> list[str]:
    """The URLs a page makes the browser fetch from another host (links to follow are not)."""
    return _RESOURCE.findall(html)


def _copy_assets(site: Path, jars: Path) -> tuple[set[str], int, list[str]]:
    """Copy every asset whose jar is present; returns (URLs now served locally, files copied,
    missing jar names). A file already there with the same size is not copied again."""
    served: set[str] = set()
    copied = 0
    missing: list[str] = []
    by_jar: dict[str, list[Asset]] = {}
    for asset in ASSETS:
        by_jar.setdefault(asset.jar, []).append(asset)
    for jar_name, assets in by_jar.items():
        jar = jars / f"{jar_name}.jar"
        if not jar.is_file():
            missing.append(jar_name)
            continue
        with zipfile.ZipFile(jar) as zf:
            names = zf.namelist()
            for asset in assets:
                wanted = [_WEBJARS + asset.path] + [
                    n for n in names for folder in asset.with_folders
                    if n.startswith(_WEBJARS + folder) and not n.endswith("/")]
                for member in wanted:
                    target = site / VENDOR / member[len(_WEBJARS):]
                    info = zf.getinfo(member)
                    if target.is_file() and target.stat().st_size == info.file_size:
                        continue
                    target.parent.mkdir(parents=True, exist_ok=True)
                    tmp = target.with_name(target.name + ".tmp")
                    tmp.write_bytes(zf.read(member))
                    tmp.replace(target)
                    copied += 1
                served.update(asset.urls)
    return served, copied, missing


def _rewrite(html: str, prefix: str, served: set[str]) -> str:
    """The page with each served CDN URL as a path relative to the page (``prefix`` climbs
    to the site root), the dropped stylesheets removed, and no SRI attributes on local files."""
    out = html
    for asset in ASSETS:
        for url in asset.urls:
            if url in served:
                out = out.replace(f'"{url}"', f'"{prefix}{VENDOR}/{asset.path}"')
    for url in DROPPED:
        out = re.sub(r'<link\b[^>]*"' + re.escape(url) + r'"[^>]*>\n?', "", out)
    out = out.replace(f'"{_GX_IMAGES}', f'"{prefix}static/images/')
    # GX's favicon path on validation pages climbs one folder too few: every static image is
    # pointed at the site root from the page's own depth
    out = re.sub(r'"(?:\./|(?:\.\./)+)?static/images/', f'"{prefix}static/images/', out)
    return re.sub(r"<(?:script|link)\b[^>]*>", _strip_sri_if_local, out) if out != html else out


def _strip_sri_if_local(tag: re.Match[str]) -> str:
    """The tag without integrity/crossorigin when it loads a local file; a CDN tag keeps them."""
    text = tag.group(0)
    where = re.search(r'\b(?:src|href)="([^"]*)"', text)
    if where and not re.match(r"(?:https?:)?//", where.group(1)):
        return _SRI.sub("", text)
    return text


def _pages(site: Path) -> Iterable[Path]:
    for page in sorted(site.rglob("*.html")):
        if VENDOR not in page.relative_to(site).as_posix():
            yield page


def localise_site(site: str | Path, jars_dir: str | Path) -> Localised:
    """Serve the Data Docs site's browser assets from the site itself (see the module
    docstring). Safe to run on every build: unchanged pages are not written."""
    root = Path(site)
    jars = assets_dir(jars_dir)
    served, copied, missing = _copy_assets(root, jars)
    pages = 0
    unresolved: set[str] = set()
    for page in _pages(root):
        html = page.read_text(encoding="utf-8")
        depth = len(page.relative_to(root).parts) - 1
        new = _rewrite(html, "../" * depth, served)
        if new != html:
            tmp = page.with_name(page.name + ".tmp")
            tmp.write_text(new, encoding="utf-8")
            tmp.replace(page)
            pages += 1
        unresolved.update(external_resources(new))
    cdn = {url for a in ASSETS for url in a.urls if a.jar in missing}
    return Localised(pages=pages, copied=copied, missing=tuple(missing),
                     unresolved=tuple(sorted(unresolved - cdn)))
