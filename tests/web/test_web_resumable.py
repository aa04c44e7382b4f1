"""Resumable uploads (tus 1.0.0 core + creation): a file sent in pieces, cut off midway and
resumed from the offset the server reports, arrives whole and goes through the intake."""

from __future__ import annotations

import base64
import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import select

from conveyor.db.tables import audio_records, files
from conveyor.media.albums import create_album
from tests.support.servers import LiveServer
from tests.support.web import MakeSite, sign_in

TUS = {"Tus-Resumable": "1.0.0"}


def _meta(**fields: str) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in fields.items())


def test_a_recording_sent_in_pieces_resumes_after_a_cut(make_site: MakeSite, corpus: Path) -> None:
    site = make_site()
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        head = {**TUS, "X-CSRF-Token": csrf}
        offered = client.options("/uploads")
        assert offered.status_code == 204
        assert offered.headers["Tus-Version"] == "1.0.0"
        assert offered.headers["Tus-Extension"] == "creation"
        made = client.post(
            "/uploads",
            headers={
                **head,
                "Upload-Length": str(len(wav)),
                "Upload-Metadata": _meta(filename="speech.wav", target="records", language="en"),
            },
        )
        assert made.status_code == 201, made.text
        where = made.headers["Location"]
        assert where.startswith("/uploads/")
        patch = {**head, "Content-Type": "application/offset+octet-stream"}
        first = client.patch(where, content=wav[:100_000], headers={**patch, "Upload-Offset": "0"})
        assert first.status_code == 204 and first.headers["Upload-Offset"] == "100000"
        # The connection dropped after the first piece; the page asks where to go on.
        at = client.head(where, headers=head)
        assert at.headers["Upload-Offset"] == "100000"
        assert at.headers["Upload-Length"] == str(len(wav))
        # A piece from the wrong place is refused and says where the upload is.
        wrong = client.patch(where, content=wav[50:60], headers={**patch, "Upload-Offset": "50"})
        assert wrong.status_code == 409 and wrong.headers["Upload-Offset"] == "100000"
        assert (
            client.patch(
                where, content=b"x", headers={**head, "Upload-Offset": "100000"}
            ).status_code
            == 415
        )
        rest = client.patch(
            where, content=wav[100_000:], headers={**patch, "Upload-Offset": "100000"}
        )
        assert rest.status_code == 204, rest.text
        result = rest.headers["Conveyor-Result"]
        assert result.startswith("/records/")
        record_id = int(result.rsplit("/", 1)[1])
        # Finished: the upload is gone, the record has the whole file.
        assert client.head(where, headers=head).status_code == 404
        # Another person cannot see or add to someone's upload.
        other = client.post(
            "/uploads",
            headers={**head, "Upload-Length": "10", "Upload-Metadata": _meta(filename="a")},
        )
        assert other.status_code == 201
    with TestClient(site.app) as bob:
        bob_csrf = sign_in(bob, "bob")
        bob_head = {**TUS, "X-CSRF-Token": bob_csrf}
        assert bob.head(other.headers["Location"], headers=bob_head).status_code == 404
    with site.runtime.engine.connect() as conn:
        row = conn.execute(
            select(audio_records.c.owner, audio_records.c.language, files.c.sha256)
            .select_from(audio_records.join(files, files.c.id == audio_records.c.original_file_id))
            .where(audio_records.c.id == record_id)
        ).one()
    assert (row.owner, row.language) == ("alice", "en")
    assert row.sha256 == hashlib.sha256(wav).hexdigest()


def test_refusals_before_any_byte(make_site: MakeSite, corpus: Path) -> None:
    site = make_site(api={"max_upload_bytes": 1000})
    runtime = site.runtime
    album_id = create_album(runtime.engine, runtime.clock, owner="bob", name="Bob's")
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        head = {**TUS, "X-CSRF-Token": csrf}
        assert client.post("/uploads", headers={**head, "Upload-Length": "1001"}).status_code == 413
        assert client.post("/uploads", headers={**head, "Upload-Length": "x"}).status_code == 400
        assert client.post("/uploads", headers={"Upload-Length": "10", **TUS}).status_code == 403
        no_version = {"X-CSRF-Token": csrf, "Upload-Length": "10"}
        assert client.post("/uploads", headers=no_version).status_code == 400
        bad_option = client.post(
            "/uploads",
            headers={**head, "Upload-Length": "10", "Upload-Metadata": _meta(language="e1")},
        )
        assert bad_option.status_code == 422
        theirs = client.post(
            "/uploads",
            headers={
                **head,
                "Upload-Length": "10",
                "Upload-Metadata": _meta(target=f"albums/{album_id}"),
            },
        )
        assert theirs.status_code == 404
        assert client.head("/uploads/" + "0" * 32, headers=head).status_code == 404


def test_two_pieces_sent_at_once_are_not_both_appended(make_site: MakeSite, corpus: Path) -> None:
    """A PATCH at the offset the server announces, while an earlier PATCH of the same upload is
    still arriving, is refused (409, Retry-After) rather than appended beside it: the file that
    reaches the intake is the one that was sent, byte for byte."""
    site = make_site()
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    first_half = threading.Event()
    go_on = threading.Event()

    def slow_piece() -> Iterator[bytes]:
        yield wav[:100_000]
        first_half.set()
        assert go_on.wait(60), "the test never let the first piece go on"
        yield wav[100_000:200_000]

    with LiveServer(site.app) as server, server.client() as client:
        csrf = sign_in(client, "alice")
        head = {**TUS, "X-CSRF-Token": csrf}
        made = client.post(
            "/uploads",
            headers={
                **head,
                "Upload-Length": str(len(wav)),
                "Upload-Metadata": _meta(filename="speech.wav", target="records"),
            },
        )
        assert made.status_code == 201, made.text
        where = made.headers["Location"]
        patch = {**head, "Content-Type": "application/offset+octet-stream"}
        answers: list[httpx.Response] = []
        sender = threading.Thread(
            target=lambda: answers.append(
                client.patch(
                    where,
                    content=slow_piece(),
                    headers={**patch, "Upload-Offset": "0", "Content-Length": "200000"},
                )
            )
        )
        sender.start()
        try:
            assert first_half.wait(30)
            # Wait (bounded) until the server has part of the first piece, then send a second
            # piece from exactly where it says it is: the offset check alone would take it.
            at = "0"
            for _ in range(300):
                at = client.head(where, headers=head).headers["Upload-Offset"]
                if at != "0":
                    break
                time.sleep(0.01)
            assert at != "0"
            second = client.patch(
                where, content=wav[int(at) : 200_000], headers={**patch, "Upload-Offset": at}
            )
            assert second.status_code == 409, second.text
            assert second.headers["Retry-After"] == "1"
            assert second.headers["Upload-Offset"] == at
        finally:
            go_on.set()
            sender.join(60)
        assert [a.status_code for a in answers] == [204]
        assert answers[0].headers["Upload-Offset"] == "200000"
        rest = client.patch(
            where, content=wav[200_000:], headers={**patch, "Upload-Offset": "200000"}
        )
        assert rest.status_code == 204, rest.text
        record_id = int(rest.headers["Conveyor-Result"].rsplit("/", 1)[1])
    with site.runtime.engine.connect() as conn:
        sha256 = conn.execute(
            select(files.c.sha256)
            .select_from(audio_records.join(files, files.c.id == audio_records.c.original_file_id))
            .where(audio_records.c.id == record_id)
        ).scalar_one()
    assert sha256 == hashlib.sha256(wav).hexdigest()
