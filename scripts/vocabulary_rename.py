"""Issue 63, "one vocabulary": the mechanical part of the rename, re-runnable.

Why a script: other branches change the same modules (the what-if, the report's context, the
suites) while this rename lands. Re-run on a merged tree, it brings their new lines into the
one vocabulary without a hand edit; on a tree that already speaks it, it changes nothing
(every pattern matches only an old name, and the moves happen only when the old file exists).

The vocabulary: the watermark bound (was the field ``lateness``), the allowed lateness (was
``grace``), and the bound what-if (was "lateness": ``reckon lateness``, ``audits/lateness*.py``).
The word "lateness" alone stays where it means how late an event was (``lateness_seconds``).

Never rewritten: a stored name (the recorded spec's keys ``lateness``/``grace``, the column
``beyond_grace``), the deprecated aliases a user types (``--lateness``, ``--grace``,
``RECKON_LATENESS``), and any line carrying the marker ``vocabulary: keep``.

Example::

    .venv/bin/python scripts/vocabulary_rename.py          # rewrite, then `git diff`
    .venv/bin/python scripts/vocabulary_rename.py --check  # exit 1 if anything would change
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEEP = "vocabulary: keep"
#: the folders whose Python and docs the rename reads (never .venv, .cache, migrations)
CODE_DIRS = ("reckon", "storage", "spark", "audits", "reports", "workbench", "app", "dags",
             "bench", "plugins", "tests", "scripts")
#: (not BENCHMARKS.md: it is generated from bench/results, whose recorded labels are history)
DOC_FILES = ("README.md", "docs", "reckon.example.toml", "bench/notes", "bench/CHANGELOG.md")

#: old path -> new path, moved with ``git mv`` when the old one exists and the new one not
MOVES: tuple[tuple[str, str], ...] = (
    ("audits/lateness.py", "audits/bound_whatif.py"),
    ("audits/lateness_batches.py", "audits/bound_whatif_batches.py"),
    ("audits/lateness_file.py", "audits/bound_whatif_file.py"),
    ("audits/lateness_duck.py", "audits/bound_whatif_duck.py"),  # if moved there meanwhile
    ("reports/lateness_duck.py", "reports/bound_whatif_duck.py"),
    ("reports/sections/lateness.py", "reports/sections/bound_whatif.py"),
    ("bench/lateness_bench.py", "bench/bound_whatif_bench.py"),
    ("tests/test_lateness_batches.py", "tests/test_bound_whatif_batches.py"),
    ("tests/test_lateness_duck.py", "tests/test_bound_whatif_duck.py"),
    ("tests/test_lateness_spark.py", "tests/test_bound_whatif_spark.py"),
)

Rule = tuple[re.Pattern[str], str]


def _rules(pairs: Iterable[tuple[str, str]]) -> tuple[Rule, ...]:
    return tuple((re.compile(pattern), new) for pattern, new in pairs)


#: module paths and command names: Python, docs, everything (dotted and slashed forms)
NAMES = _rules((
    (r"\b(audits|reports)([./])lateness_(batches|file|duck)\b", r"\1\2bound_whatif_\3"),
    (r"\baudits([./])lateness\b(?!_)", r"audits\1bound_whatif"),
    (r"\breports([./])sections([./])lateness\b(?!_)", r"reports\1sections\2bound_whatif"),
    (r"\bfrom (audits|reports) import lateness_(batches|file|duck)\b",
     r"from \1 import bound_whatif_\2"),
    (r"\bfrom audits import lateness\b(?!_)", "from audits import bound_whatif"),
    (r"\b(bench[./])?lateness_bench\b", r"\1bound_whatif_bench"),
    (r"\btest_lateness_(batches|duck|spark)\b", r"test_bound_whatif_\1"),
    (r"\bcmd_lateness_curve\b", "cmd_bound_whatif_curve"),
    (r"\bcmd_lateness_warehouse\b", "cmd_bound_whatif"),
    (r"\breckon lateness-curve\b", "reckon bound-whatif-curve"),
    (r"\breckon lateness\b(?![-_])", "reckon bound-whatif"),
    (r"\bis_beyond_grace\b", "is_beyond_allowed_lateness"),
))

#: prose first ("within grace" reads better as "within the allowed lateness"), then code
PROSE = _rules((
    (r"\bgrace \(allowed lateness\)", "allowed lateness"),
    (r"\ballowed lateness \(grace\)", "allowed lateness"),
    (r"\b(within|past|beyond|plus) grace\b", r"\1 the allowed lateness"),
    (r"\bthe grace\b", "the allowed lateness"),
    (r"\(in grace\)", "(within the allowed lateness)"),
    (r"\bLateness what-if\b", "Bound what-if"),
    (r"\blateness what-if\b", "bound what-if"),
    (r"(?<![\w\"'-])grace (?=\d)", "allowed lateness "),  # "grace 5s", a scenario's name
))

#: Python only: attributes, keywords, parameters and locals of the two renamed fields
CODE = _rules((
    # the bound: Settings.lateness, WatermarkPolicy.lateness (never r.lateness, an event's)
    (r"(?<!\br)(?<!audits)(?<!sections)\.lateness\b(?!_)", ".watermark_bound"),
    (r"(?<![\w.-])lateness=(?=[\w\"'{])", "watermark_bound="),
    # the allowed lateness: every identifier ``grace`` (never --grace, a deprecated flag)
    (r"\.grace\b", ".allowed_lateness"),
    (r"(?<![\w\"'-])grace\b(?![\"'])", "allowed_lateness"),
    (r"\bwithin_grace\b", "within_allowed_lateness"),
    (r"\bspark_lateness\b", "spark_whatif"),
))

#: the one module that names the first names on purpose (the deprecated and stored ones)
SKIP = frozenset({"reckon/vocabulary.py"})
#: files where "grace" is a shutdown's grace period, not the allowed lateness: no CODE rules
OTHER_GRACE = frozenset({"app/airflow_local.py", "tests/spark_cluster.py"})

#: per file: the rules that hold only there
LOCAL: dict[str, tuple[Rule, ...]] = {
    # the labels of the side-output rule's outcome (the column beyond_grace elsewhere stays)
    "spark/rules.py": _rules(((r"\bbeyond_grace\b", "beyond_allowed_lateness"),)),
}


def _apply(rules: Iterable[Rule], line: str) -> str:
    for pattern, new in rules:
        line = pattern.sub(new, line)
    return line


def rewrite(text: str, rules: tuple[Rule, ...]) -> str:
    """``text`` with ``rules`` applied line by line, lines marked ``vocabulary: keep`` left
    alone.

    >>> rewrite("rules.grace  # x\\nk = 'grace'  # vocabulary: keep\\n", CODE)
    "rules.allowed_lateness  # x\\nk = 'grace'  # vocabulary: keep\\n"
    """
    return "".join(line if KEEP in line else _apply(rules, line)
                   for line in text.splitlines(keepends=True))


def _files(roots: Iterable[str], suffixes: tuple[str, ...]) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        path = ROOT / root
        found = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        out += [p for p in found if p.is_file() and p.suffix in suffixes
                and "migrations" not in p.parts and p.name != Path(__file__).name
                and _rel(p) not in SKIP]
    return out


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def move_files(run: Callable[[list[str]], object]) -> list[str]:
    """``git mv`` each old path that exists to its new name (never over an existing one)."""
    moved = []
    for old, new in MOVES:
        if (ROOT / old).exists() and not (ROOT / new).exists():
            run(["git", "mv", old, new])
            moved.append(f"{old} -> {new}")
    return moved


def rewrite_tree(write: bool) -> list[str]:
    """Every file the rules change (rewritten when ``write``)."""
    changed = []
    plans = [(p, (*NAMES, *PROSE, *CODE) if _rel(p) not in OTHER_GRACE else NAMES)
             for p in _files(CODE_DIRS, (".py",))]
    plans += [(p, (*NAMES, *PROSE)) for p in _files(DOC_FILES, (".md", ".toml"))]
    plans += [(p, NAMES) for p in _files(CODE_DIRS, (".md", ".html", ".j2", ".sh", ".txt"))]
    for path, rules in plans:
        local = LOCAL.get(_rel(path), ())
        text = path.read_text(encoding="utf-8")
        new = rewrite(text, (*local, *rules))
        if new != text:
            changed.append(_rel(path))
            if write:
                path.write_text(new, encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when a move or a rewrite is due")
    args = parser.parse_args(argv)
    if args.check:
        due = [f"{o} -> {n}" for o, n in MOVES if (ROOT / o).exists() and not (ROOT / n).exists()]
        due += rewrite_tree(write=False)
        print("\n".join(due) or "nothing to rename")
        return 1 if due else 0
    moved = move_files(lambda cmd: subprocess.run(cmd, cwd=ROOT, check=True))
    changed = rewrite_tree(write=True)
    print("\n".join([*moved, *changed]) or "nothing to rename")
    return 0


if __name__ == "__main__":
    sys.exit(main())
