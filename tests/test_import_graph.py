"""Fast tier: the import graph holds the layering the folders declare (docs/code-map.md), has no
cycle between modules, and the pure core does no I/O.

The graph is read with ``ast`` from the source, so it takes a second and imports nothing. Every
import counts, also one inside a function or under ``if TYPE_CHECKING``: a lazy import is how
a cycle hides, and a reader still has to open both files. A module's layer is its top folder,
lowest first:

    reckon (the pure rules) < storage (the warehouse's files, no JVM) < spark < audits
    < reports < workbench < app (the CLI, the nightly steps, the demo, the Airflow glue)
    < dags, plugins, bench (entry points)

A module may import its own layer or a lower one, never a higher one (an edge the other way is
a failure, with no list of exceptions). Every package folder at the root must be in LAYERS, so
a new folder is placed on purpose. The core (reckon/) imports no Spark (pyspark, delta, py4j),
no engine and no I/O module, and calls no ``print``, ``open`` or ``input``: its rules are
checked on plain values, everywhere. Alembic's migration scripts (``*/migrations/*``) are
scripts alembic runs, not modules anyone imports, and are left out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The layers, lowest first; each is a top folder (a tuple: folders of one rank). Derived
#: from the folders: a module's layer is where its file is, not a list kept by hand.
LAYERS: tuple[tuple[str, ...], ...] = (("reckon",), ("storage",), ("spark",), ("audits",),
                                       ("reports",), ("workbench",), ("app",),
                                       ("dags", "plugins", "bench"))
RANKS = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}
PACKAGES = tuple(RANKS)
#: Third-party packages the core must never import: it runs where no JVM is.
SPARK_PACKAGES = ("pyspark", "delta", "py4j")
#: Layers that start no engine: they read the warehouse through storage/ and DuckDB, so they
#: import nothing from spark/ and no Spark package, not even lazily (a report renders and the
#: workbench serves where pyspark cannot be imported).
ENGINE_FREE = ("storage", "reports", "workbench")
#: Standard modules that reach outside the process (files, processes, sockets, accounts,
#: the clock of the machine, the environment): the core takes what they would give as values.
IO_MODULES = frozenset({"os", "sys", "subprocess", "shutil", "socket", "fcntl", "tempfile",
                        "getpass", "pwd", "sqlite3", "logging", "signal", "threading",
                        "urllib.request", "http", "sqlalchemy", "duckdb", "deltalake",
                        "tomllib"})
#: Calls that do I/O whatever they are handed.
IO_CALLS = frozenset({"print", "open", "input"})


def module_files(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` under the packages (alembic's
    migration scripts left out).

    >>> module_files(ROOT)["reports.db.repository"].name
    'repository.py'
    """
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.relative_to(root).parts:
                continue
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


#: A handler named as a string and imported when run (app.cli_parser's ``_lazy("app.commands.stream:cmd_stream")``).
_TARGET = re.compile(r"([A-Za-z_][\w.]*):[A-Za-z_]\w*")


def imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name an import statement in the file names, relative ones resolved, and
    the module of each ``"module:function"`` string: ``from reports import db`` gives
    ``reports`` and ``reports.db``; ``_lazy("app.commands.review:cmd_breaks")`` gives
    ``app.commands.review``."""
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
    """The layer of a module: its top folder.

    >>> layer("app.commands.review"), layer("reckon.money")
    ('app', 'reckon')
    """
    return module.split(".")[0]


def wrong_way_edges(graph: Mapping[str, set[str]]) -> set[tuple[str, str]]:
    """Edges from a module to a module of a higher layer."""
    return {(a, b) for a, targets in graph.items() for b in targets
            if RANKS[layer(a)] < RANKS[layer(b)]}


def spark_in_core(files: Mapping[str, Path]) -> list[str]:
    """``module imports name`` for each Spark import in a core module."""
    return sorted(f"{m} imports {n}" for m, p in files.items() if layer(m) == "reckon"
                  for n in imported_names(m, p) if n.split(".")[0] in SPARK_PACKAGES)


def engines_in_engine_free_layers(files: Mapping[str, Path]) -> list[str]:
    """``module imports name`` for each import of spark/ or a Spark package in a layer of
    ENGINE_FREE."""
    return sorted(f"{m} imports {n}" for m, p in files.items() if layer(m) in ENGINE_FREE
                  for n in imported_names(m, p)
                  if n.split(".")[0] in ("spark", *SPARK_PACKAGES))


def io_in_core(files: Mapping[str, Path]) -> list[str]:
    """``module imports/calls name`` for each I/O module imported or I/O call made in a core
    module: the core's rules take values, so they run the same in a test, a Spark task and
    a report."""
    found: list[str] = []
    for module, path in files.items():
        if layer(module) != "reckon":
            continue
        found += [f"{module} imports {n}" for n in sorted(imported_names(module, path))
                  if n in IO_MODULES or n.split(".")[0] in IO_MODULES]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found += [f"{module} calls {node.func.id}" for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in IO_CALLS]
    return sorted(found)


def unplaced_folders(root: Path) -> list[str]:
    """Package folders at the root (with an ``__init__.py``, or ``dags``/``plugins``) that
    are in no layer."""
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and (p / "__init__.py").is_file() and p.name not in RANKS
                  and p.name != "tests")


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
    assert "app.commands.review" in graph["app.cli_parser"]  # _lazy("app.commands.review:...")
    assert len(graph) > 60


def test_no_import_cycle_between_modules(graph):
    found = cycles(graph)
    assert found == [], f"import cycles: {found}; break each (see docs/code-map.md)"


def test_no_layer_is_imported_from_below(graph):
    wrong = sorted(wrong_way_edges(graph))
    assert wrong == [], (f"imports from a lower layer into a higher one: {wrong}; layers, "
                         f"lowest first: {LAYERS} (docs/code-map.md): move the code, not the rule")


def test_every_package_folder_has_a_layer():
    assert unplaced_folders(ROOT) == [], "place each new folder in LAYERS (docs/code-map.md)"


def test_the_core_imports_no_spark(files):
    assert spark_in_core(files) == []


def test_storage_reports_and_the_workbench_import_no_engine(files):
    assert engines_in_engine_free_layers(files) == [], (
        "move the Spark part to spark/ or audits/ (the report and the workbench only read)")


def test_the_core_does_no_io(files):
    assert io_in_core(files) == [], ("the core (reckon/) takes values: move file, process, "
                                     "account or environment work to storage/ or app/")


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


def test_io_in_the_core_an_engine_in_reports_and_an_unplaced_folder_are_found(tmp_path):
    files = _tree(tmp_path, {
        "reckon.__init__": "", "reckon.money": "import os\n\ndef f():\n    print(os.sep)\n",
        "reckon.rules": "def g(x):\n    return x.print()\n",
        "reports.__init__": "", "reports.render": "def f():\n    from spark import tables\n",
        "newthing.__init__": ""})
    assert io_in_core(files) == ["reckon.money calls print", "reckon.money imports os"]
    assert engines_in_engine_free_layers(files) == ["reports.render imports spark",
                                                    "reports.render imports spark.tables"]
    assert unplaced_folders(tmp_path) == ["newthing"]
