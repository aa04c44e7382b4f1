"""Alembic environment: the engine comes from :func:`conveyor.db.migrate.alembic_config`."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine

from conveyor.db.tables import metadata, postgresql_options

engine: Engine = context.config.attributes["engine"]
# The indexes' PostgreSQL options are attached only where they are read (conveyor.db.tables).
target = postgresql_options() if engine.dialect.name == "postgresql" else metadata

with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=target, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
