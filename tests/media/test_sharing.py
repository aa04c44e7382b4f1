"""Shared albums in the model: who reaches an album, as what, and what a link is worth; an
outsider's answer is always NotFound, as for what does not exist."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from conveyor.accounts import add_user
from conveyor.config import StorageSettings
from conveyor.errors import Duplicate, NotFound, RejectedInput
from conveyor.kinds import ShareRole
from conveyor.media import sharing
from conveyor.media.albums import create_album, item_view
from conveyor.media.intake import accept_media
from conveyor.objects import ObjectStore, open_store
from conveyor.testing import FakeClock

PHOTO = "media/exif-samples__Canon_40D.jpg"


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    return open_store(StorageSettings(root=tmp_path / "objects", work_dir=tmp_path / "work"))


def test_sharing_with_the_owner_is_refused_even_when_the_owner_has_no_user_row(
    engine: Engine, clock: FakeClock
) -> None:
    # The shell's owner (`me`) owns albums without being a user: the refusal is still
    # share_with_owner, not "no such user".
    add_user(engine, clock, "bob")
    album = create_album(engine, clock, owner="me", name="Trip")
    with pytest.raises(RejectedInput) as refused:
        sharing.share_album(engine, clock, album, owner="me", user=" me ", role=ShareRole.VIEWER)
    assert refused.value.reason == "share_with_owner"
    with engine.connect() as conn:
        assert sharing.list_shares(conn, album, owner="me") == []


def test_shares_give_their_role_and_nothing_else(
    engine: Engine, clock: FakeClock, store: ObjectStore, corpus: Path
) -> None:
    for name in ("alice", "bob", "carol", "dave"):
        add_user(engine, clock, name)
    album = create_album(engine, clock, owner="alice", name="Trip")
    other = create_album(engine, clock, owner="alice", name="Private")
    shared = sharing.share_album(
        engine, clock, album, owner="alice", user="bob", role=ShareRole.VIEWER
    )
    assert (shared["user"], shared["role"]) == ("bob", "viewer")
    sharing.share_album(engine, clock, album, owner="alice", user="carol", role=ShareRole.VIEWER)
    # A second share changes the role.
    sharing.share_album(
        engine, clock, album, owner="alice", user="carol", role=ShareRole.CONTRIBUTOR
    )
    with engine.connect() as conn:
        assert sharing.album_access(conn, album, "alice").role == "owner"
        assert sharing.album_access(conn, album, "bob").role == "viewer"
        carol = sharing.album_access(conn, album, "carol")
        assert (carol.role, carol.may_add, carol.owner) == ("contributor", True, "alice")
        assert not sharing.album_access(conn, album, "bob").may_add
        for user, album_id in (("dave", album), ("bob", other), ("bob", 999)):
            with pytest.raises(NotFound):
                sharing.album_access(conn, album_id, user)
        # Only the owner lists or manages shares: a viewer's answer is the stranger's.
        assert [s["user"] for s in sharing.list_shares(conn, album, owner="alice")] == [
            "bob",
            "carol",
        ]
        with pytest.raises(NotFound):
            sharing.list_shares(conn, album, owner="bob")
        assert [(a["name"], a["role"]) for a in sharing.shared_with(conn, "carol")] == [
            ("Trip", "contributor")
        ]
        assert sharing.shared_with(conn, "dave") == []
    with pytest.raises(NotFound):
        sharing.share_album(engine, clock, album, owner="bob", user="dave", role=ShareRole.VIEWER)
    with pytest.raises(NotFound):
        sharing.share_album(engine, clock, album, owner="alice", user="eve", role=ShareRole.VIEWER)
    with pytest.raises(RejectedInput) as refused:
        sharing.share_album(
            engine, clock, album, owner="alice", user="alice", role=ShareRole.VIEWER
        )
    assert refused.value.reason == "share_with_owner"

    # A contributor's upload is the owner's item, added by the contributor, who may delete it.
    photo = corpus / PHOTO
    item_id = accept_media(
        engine,
        store,
        clock,
        photo,
        album_id=album,
        owner="alice",
        max_pixels=10**9,
        added_by="carol",
    )
    with engine.connect() as conn:
        view = item_view(conn, item_id)
        assert (view["owner"], view["added_by"]) == ("alice", "carol")
        item, access = sharing.item_access(conn, item_id, "carol")
        assert sharing.may_delete(item, access, "carol")
        item, access = sharing.item_access(conn, item_id, "bob")
        assert not sharing.may_delete(item, access, "bob")
        with pytest.raises(NotFound):
            sharing.item_access(conn, item_id, "dave")
    # The contributor's duplicate is found in the shared album only, never in the owner's others.
    with pytest.raises(Duplicate) as again:
        accept_media(
            engine,
            store,
            clock,
            photo,
            album_id=album,
            owner="alice",
            max_pixels=10**9,
            added_by="carol",
        )
    assert again.value.existing_id == item_id

    assert sharing.unshare_album(engine, album, owner="alice", user="bob")
    assert not sharing.unshare_album(engine, album, owner="alice", user="bob")
    with engine.connect() as conn, pytest.raises(NotFound):
        sharing.album_access(conn, album, "bob")


def test_a_link_shows_its_album_until_it_expires_or_is_revoked(
    engine: Engine, clock: FakeClock
) -> None:
    add_user(engine, clock, "alice")
    add_user(engine, clock, "bob")
    album = create_album(engine, clock, owner="alice", name="Trip")
    forever = sharing.create_link(engine, clock, album, owner="alice", label="family")
    day = sharing.create_link(engine, clock, album, owner="alice", expires_in=86_400)
    assert forever.token != day.token and len(forever.token) >= 43
    with engine.connect() as conn:
        access = sharing.link_access(conn, forever.token, clock.now())
        assert (access.album_id, access.role, access.may_add) == (album, "link", False)
        assert sharing.link_access(conn, day.token, clock.now()).link_id == day.id
        listed = sharing.list_links(conn, album, owner="alice", now=clock.now())
        assert [(x["id"], x["label"], x["expired"]) for x in listed] == [
            (forever.id, "family", False),
            (day.id, None, False),
        ]
        assert "token" not in listed[0]
        with pytest.raises(NotFound):
            sharing.list_links(conn, album, owner="bob", now=clock.now())
        for token in ("", "x" * 43, forever.token + "x", "x" * 10_000):
            with pytest.raises(NotFound):
                sharing.link_access(conn, token, clock.now())
    clock.advance(86_400)
    with engine.connect() as conn:
        with pytest.raises(NotFound):
            sharing.link_access(conn, day.token, clock.now())
        assert [
            x["expired"] for x in sharing.list_links(conn, album, owner="alice", now=clock.now())
        ] == [False, True]
    with pytest.raises(NotFound):
        sharing.revoke_link(engine, album, forever.id, owner="bob")
    assert sharing.revoke_link(engine, album, forever.id, owner="alice")
    assert not sharing.revoke_link(engine, album, forever.id, owner="alice")
    with engine.connect() as conn, pytest.raises(NotFound):
        sharing.link_access(conn, forever.token, clock.now())
    for expires_in in (0.0, -1.0, 11 * 365 * 86_400.0):
        with pytest.raises(RejectedInput):
            sharing.create_link(engine, clock, album, owner="alice", expires_in=expires_in)
