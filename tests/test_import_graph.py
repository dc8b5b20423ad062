"""Fast tier: the import graph of reckon, spark, audits, reports, workbench, dags and bench holds
the layering the code map describes (docs/code-map.md), and has no cycle between modules.

The graph is read with ``ast`` from the source, so it takes a second and imports nothing. Every
import counts, also one inside a function or under ``if TYPE_CHECKING``: a lazy import is how
a cycle hides, and a reader still has to open both files. Layers, lowest first:

    core (reckon's pure rules) < spark < audits < reports < workbench < app (reckon's CLI and
    pipeline, dags, bench)

A module may import its own layer or a lower one. An edge the other way is a failure unless it
is in KNOWN_WRONG_WAY, which names each one that exists today and why; an entry that no longer
exists fails too, so the list only shrinks. The core must not import Spark (pyspark, delta,
py4j) at all.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("reckon", "spark", "audits", "reports", "workbench", "dags", "bench")

#: reckon's pure core: the rules on plain values (code map, "reckon/ (core)"). config.py is
#: here because it is pure and many engines still read Settings; engine_config.py holds the
#: frozen values the others are handed instead (issue 40).
CORE = frozenset(f"reckon.{m}" for m in (
    "__init__", "admission", "config", "dedup_state", "engine_config", "errors", "eventtime", "generate",
    "identity", "landing", "materiality", "money", "quality_verdict", "reconcile", "reference", "schema",
    "sharing", "signing", "signoff", "spec",
    "timeutil", "watermark", "whatif", "whatif_batches", "whatif_inputs", "windows",
    "writer_lock"))
#: reckon's app layer: the command, the nightly steps, the demo, the local Airflow.
APP = frozenset(f"reckon.{m}" for m in (
    "airflow_assets", "airflow_env", "airflow_local", "cli", "cli_parser", "commands", "commands.investigate",
    "commands.keys", "commands.nightly", "commands.review", "commands.sample", "commands.stream",
    "demo", "jvm_archive", "lineage", "notify", "pipeline", "read", "submit_replay"))
#: workbench (the reviewer's web app) reads the report database and sits below the CLI that
#: starts it.
RANKS = {"core": 0, "spark": 1, "audits": 2, "reports": 3, "workbench": 4, "app": 5}
#: Third-party packages the core must never import: it runs where no JVM is.
SPARK_PACKAGES = ("pyspark", "delta", "py4j")

#: Edges that go from a lower layer to a higher one today, each with why it is still there
#: (edge -> reason). Empty since issue 40: the audits own their records (audits/records.py)
#: and the story builder (audits/chapters.py), and are handed the report database's writers
#: by the caller (audits/ledger.py). Keep it empty: move the code, not the rule.
KNOWN_WRONG_WAY: dict[tuple[str, str], str] = {}


def module_files(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` under the packages.

    >>> module_files(ROOT)["reports.db.repository"].name
    'repository.py'
    """
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


#: A handler named as a string and imported when run (reckon.cli_parser's ``_lazy("reckon.commands.stream:cmd_stream")``).
_TARGET = re.compile(r"([A-Za-z_][\w.]*):[A-Za-z_]\w*")


def imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name an import statement in the file names, relative ones resolved, and
    the module of each ``"module:function"`` string: ``from reports import db`` gives
    ``reports`` and ``reports.db``; ``_lazy("reckon.commands.review:cmd_breaks")`` gives
    ``reckon.commands.review``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                head = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*head, base] if base else head)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            target = _TARGET.fullmatch(node.value)
            names.update([target.group(1)] if target else [])
    return names


def import_graph(files: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``files`` it imports (imports of anything else left out)."""
    return {m: {n for n in imported_names(m, p) if n in files and n != m}
            for m, p in files.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted:
    every module in one can reach every other, so each is at least one cycle.

    >>> cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = [stack.pop()]
            while component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def layer(module: str) -> str:
    """The layer of a module; a reckon module in neither CORE nor APP must be placed first."""
    top = module.split(".")[0]
    if top == "reckon":
        if module in CORE or module == "reckon":
            return "core"
        if module in APP:
            return "app"
        raise AssertionError(f"{module} is in neither CORE nor APP of tests/test_import_graph.py: "
                             "place it (pure rules: CORE; CLI/pipeline glue: APP)")
    return "app" if top in ("dags", "bench") else top


def wrong_way_edges(graph: Mapping[str, set[str]]) -> set[tuple[str, str]]:
    """Edges from a module to a module of a higher layer."""
    return {(a, b) for a, targets in graph.items() for b in targets
            if RANKS[layer(a)] < RANKS[layer(b)]}


def spark_in_core(files: Mapping[str, Path]) -> list[str]:
    """``module imports name`` for each Spark import in a core module."""
    return sorted(f"{m} imports {n}" for m, p in files.items() if layer(m) == "core"
                  for n in imported_names(m, p) if n.split(".")[0] in SPARK_PACKAGES)


@pytest.fixture(scope="module")
def files() -> dict[str, Path]:
    return module_files(ROOT)


@pytest.fixture(scope="module")
def graph(files: dict[str, Path]) -> dict[str, set[str]]:
    return import_graph(files)


def test_the_graph_sees_the_imports_it_must(graph):
    """Guards the reader itself: a plain import, one inside a function and a handler named as
    a string are all found."""
    assert "reckon.errors" in graph["reckon.eventtime"]
    assert "reports.db.repository" in graph["reports.context"]  # imported inside a function
    assert "reckon.commands.review" in graph["reckon.cli_parser"]  # _lazy("reckon.commands.review:...")
    assert len(graph) > 60


def test_no_import_cycle_between_modules(graph):
    found = cycles(graph)
    assert found == [], f"import cycles: {found}; break each (see docs/code-map.md)"


def test_no_layer_is_imported_from_below(graph):
    new = sorted(wrong_way_edges(graph) - KNOWN_WRONG_WAY.keys())
    assert new == [], (f"imports from a lower layer into a higher one: {new}; layers "
                       f"{list(RANKS)} (tests/test_import_graph.py)")


def test_the_known_wrong_way_edges_still_exist(graph):
    """A fixed edge leaves the list, so that it cannot come back unnoticed."""
    gone = sorted(set(KNOWN_WRONG_WAY) - wrong_way_edges(graph))
    assert gone == [], f"no longer imported: remove from KNOWN_WRONG_WAY: {gone}"


def test_the_core_imports_no_spark(files):
    assert spark_in_core(files) == []


def _tree(tmp_path: Path, sources: Mapping[str, str]) -> dict[str, Path]:
    for name, text in sources.items():
        path = tmp_path / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return module_files(tmp_path, {name.split(".")[0] for name in sources})


def test_a_cycle_through_a_lazy_relative_import_is_found(tmp_path):
    files = _tree(tmp_path, {
        "reports.__init__": "",
        "reports.db": "def f():\n    from .review import g\n",
        "reports.review": "from reports import db\n",
        "reports.render": "import reports.review\n"})
    assert cycles(import_graph(files)) == [["reports.db", "reports.review"]]


def test_an_engine_imported_by_the_core_and_spark_in_the_core_are_found(tmp_path):
    files = _tree(tmp_path, {
        "reckon.__init__": "", "reckon.money": "from spark.tables import x\n",
        "reckon.eventtime": "def f():\n    import pyspark.sql.functions as F\n",
        "spark.__init__": "", "spark.tables": "from reckon.money import y\n"})
    graph = import_graph(files)
    assert wrong_way_edges(graph) == {("reckon.money", "spark.tables")}
    assert cycles(graph) == [["reckon.money", "spark.tables"]]
    assert spark_in_core(files) == ["reckon.eventtime imports pyspark.sql.functions"]


def test_an_unplaced_reckon_module_is_refused():
    with pytest.raises(AssertionError, match=r"reckon\.newthing is in neither CORE nor APP"):
        layer("reckon.newthing")
