"""Fixtures of the database tests: the database a migration upgrades."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.support.old_database import database_at


@pytest.fixture(params=["sqlite", "postgresql"])
def old_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A database at the revision before the one its module tests (``test_migration_0004``:
    ``0003``), on SQLite and on PostgreSQL."""
    tested = request.module.__name__.rpartition("_")[2]
    assert tested.isdigit(), f"{request.module.__name__} is not test_migration_<revision>"
    yield from database_at(f"{int(tested) - 1:04d}", request, tmp_path)
