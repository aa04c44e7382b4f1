"""Alembic environment: the engine comes from :func:`conveyor.db.migrate.alembic_config`."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine

from conveyor.db.tables import metadata

engine: Engine = context.config.attributes["engine"]

with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
