"""Alembic environment of the report database.

reckon passes an open connection (``config.attributes["connection"]``) already inside a
serialised transaction (see reports.db.engine.migrate_engine); run by hand, the URL comes from
RECKON_REPORT_DB_URL or reckon's settings.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from reports.db.engine import make_engine
from reports.db.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    given = config.attributes.get("connection")
    if given is not None:
        _run(given)
        return
    from app.settings import load_settings

    engine = make_engine(load_settings().report_db)
    try:
        with engine.connect() as connection:
            _run(connection)
            connection.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported: run against a database")
run_migrations_online()
