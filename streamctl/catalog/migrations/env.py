"""Alembic environment.

Runs on the connection handed over by :func:`streamctl.catalog.store.migrate`.
"""

from alembic import context

from streamctl.catalog.models import Base

target_metadata = Base.metadata
connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only for the alembic command line
    from sqlalchemy import create_engine

    engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "")
    with engine.begin() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
else:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
