"""Every revision upgrades a database made by the one before it with records in every stage of
both domains and their items' role rows, each kept as it was (D15): here for each revision that
has no upgrade test of its own (``test_migration_<revision>.py``), such as one that only widens a
kind's CHECK constraint for a new ``MediaKind``, and for the newest revision. A revision that
changes or adds columns has its own test, which reads what it changed.

On SQLite a CHECK of ``media_items`` changes only by rebuilding the table, and a rebuild with
foreign keys on (Alembic's batch mode) deletes every role row and album event that cascades from
it: revision 0018 shows the rebuild that keeps them, and the role rows here catch the other."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, insert, select

from conveyor.db.migrate import current_revision, shipped_revisions, upgrade
from conveyor.db.tables import media_items, media_objects
from tests.support.old_database import assert_kept, database_at, fill_for_alice

HERE = Path(__file__).parent
OWN_TESTS = {p.stem.rpartition("_")[2] for p in HERE.glob("test_migration_*.py")}
# The filled records need the columns every revision since 0003 has, and a users table (0004).
SHIPPED = [r for r in shipped_revisions() if r >= "0005"]
WITHOUT_OWN_TEST = [r for r in SHIPPED if r not in OWN_TESTS]
# The newest revision is checked here as well, with or without a test of its own: the check
# never runs empty (every revision today has its own test), and it holds the role rows a
# rebuild could cascade away, which a revision's own test may not look at.
CHECKED = sorted({*WITHOUT_OWN_TEST, SHIPPED[-1]})


@pytest.fixture(params=["sqlite", "postgresql"])
def before(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A database at the revision before the test's ``revision``, on both databases."""
    revision = request.getfixturevalue("revision")
    yield from database_at(f"{int(revision) - 1:04d}", request, tmp_path)


@pytest.mark.parametrize("revision", CHECKED)
def test_a_revision_without_its_own_test_keeps_every_record(revision: str, before: Engine) -> None:
    with before.begin() as conn:
        kept = fill_for_alice(conn)
        items = conn.execute(select(media_items.c.id)).scalars().all()
        conn.execute(
            insert(media_objects), [{"item_id": i, "role": "original", "file_id": 1} for i in items]
        )
        roles = _roles(conn)
    upgrade(before, revision)
    assert current_revision(before) == revision
    assert_kept(before, kept)
    with before.connect() as conn:
        # A table rebuilt with foreign keys on (SQLite) would have taken these with it.
        assert _roles(conn) == roles, "role rows lost: a rebuild cascaded to media_objects"


def _roles(conn: Connection) -> list[tuple[object, ...]]:
    rows = conn.execute(
        select(media_objects).order_by(media_objects.c.item_id, media_objects.c.role)
    )
    return [tuple(r) for r in rows]


def test_the_revisions_with_tests_of_their_own_are_shipped_ones() -> None:
    """A ``test_migration_<revision>.py`` names a revision that exists (a renamed or removed
    revision would leave its test behind, and this test would skip the real one)."""
    assert OWN_TESTS - {"0003", "0004"} <= set(SHIPPED)
