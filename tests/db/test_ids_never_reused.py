"""An id names one recording, item or album for good: after the newest is deleted, the next
upload gets a new id, never the deleted one, so a saved link or ``Location`` cannot come to
point at another upload. SQLite by ``AUTOINCREMENT`` (revision 0015), PostgreSQL by its
sequences; real files through intake and deletion, on both databases."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from conveyor.audio.deletion import delete_record
from conveyor.audio.intake import accept_audio
from conveyor.media.deletion import delete_album, delete_item
from conveyor.objects import LocalStore, ObjectStore, WorkFolder
from conveyor.testing import FakeClock
from tests.support.media import add, album

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
PHOTO = CORPUS / "media" / "exif-samples__landscape_6.jpg"
WAV = CORPUS / "audio" / "jfk.wav"


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    return LocalStore(tmp_path / "store", work=WorkFolder(tmp_path / "work"))


def upload(engine: Engine, store: ObjectStore, clock: FakeClock) -> int:
    return accept_audio(engine, store, clock, WAV, owner="ann", keep_duplicate=True)


def test_the_newest_recording_deleted_its_id_is_not_given_to_the_next_upload(
    engine: Engine, store: ObjectStore, clock: FakeClock
) -> None:
    first, newest = upload(engine, store, clock), upload(engine, store, clock)
    assert delete_record(engine, store, clock, newest)
    again = upload(engine, store, clock)
    assert again not in (first, newest) and again > newest


def test_the_newest_item_and_album_deleted_their_ids_are_not_given_out_again(
    engine: Engine, store: ObjectStore, clock: FakeClock
) -> None:
    trip = album(engine, clock, "trip")
    first = add(engine, store, clock, trip, PHOTO)
    newest = add(engine, store, clock, trip, PHOTO)
    assert delete_item(engine, store, clock, newest)
    again = add(engine, store, clock, trip, PHOTO)
    assert again not in (first, newest) and again > newest

    home = album(engine, clock, "home")
    assert delete_album(engine, store, clock, home) == 0
    later = album(engine, clock, "later")
    assert later not in (trip, home) and later > home
