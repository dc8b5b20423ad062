"""The report database: audit runs, breaks and their review status, attribution, data-quality
results, rendered reports, the hash-chained sign-off log and the workbench's users.

One schema, two backends: a SQLite file inside the warehouse by default (``Settings.report_db``)
and PostgreSQL (``postgresql+psycopg://...``) when grown up. The schema is owned by Alembic
(``reports/migrations``). Read it in this order, one responsibility a module:

* ``repository.py``: ``ReportDB``, the one door the app, the report, the review and the
  workbench open; ``audit_recorder``, what an audit records with;
* ``models.py``: the tables (SQLAlchemy models) and a typed handle on each;
* ``types.py``: exact money and ratios, aware UTC times, JSON, on both backends;
* ``engine.py``: engines (SQLite behaving like a server), ``write_tx`` (every writer takes
  the same locks in the same order) and the Alembic migration;
* ``executor_writes.py``: what Spark's executors write with only the URL (breaks, stories).

Nothing is re-exported here: import each name from its module, e.g.
``from reports.db.repository import ReportDB``.
"""
