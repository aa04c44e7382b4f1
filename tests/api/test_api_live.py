"""Through a real server on loopback (uvicorn in a thread, httpx), workers in the same process.

* a corpus recording: upload (chunked, streamed) → card → text in every format;
* photos and a video: the album stream delivers each item event; the client drops the
  connection, more events happen, and a reconnect with ``Last-Event-ID`` gets exactly the rest;
* Range requests on the ``playback`` video, as a browser seeking it sends them;
* a subscriber that never reads does not stall another subscriber or the workers.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import select

from conveyor.accounts import authenticate, revoke_token
from conveyor.api.server import make_server
from conveyor.db.tables import album_events, audio_records, files
from conveyor.media.queries import insert_album_event
from tests.support.api import (
    Live,
    MakeApi,
    SseReader,
    check_ranges,
    upload_media,
    wait_for,
)
from tests.support.stored import object_keys

JFK = "and so my fellow americans ask not what your country can do for you"


def test_audio_upload_card_text(make_api: MakeApi, live: Live, corpus: Path) -> None:
    api = make_api(run_workers=True, pipeline={"workers": 1})
    path = corpus / "audio" / "jfk.wav"

    def body() -> Iterator[bytes]:
        with path.open("rb") as handle:
            while chunk := handle.read(32 * 1024):
                yield chunk

    with live(api.app) as server, server.client(api.alice) as client:
        response = client.post("/api/records?name=jfk.wav&language=en", content=body())
        assert response.status_code == 201, response.text
        card = response.json()
        assert card["stage"] == "uploaded"

        def settled() -> dict[str, Any] | None:
            now = client.get(card["links"]["self"]).json()
            return now if now["done"] or now["halted"] else None

        final = wait_for(settled, 180, "the record to settle")
        assert final["done"] is True and final["halted"] is False, final
        assert final["duration"] == pytest.approx(11.0, abs=0.2)
        assert final["detected_language"] == "en"
        text = client.get(card["links"]["text"])
        assert text.status_code == 200
        words = " ".join(
            "".join(c for c in text.text.lower() if c.isalpha() or c.isspace()).split()
        )
        assert words.startswith(JFK)
        as_json = client.get(card["links"]["text"], params={"format": "json"}).json()
        assert as_json["language"] == "en" and as_json["segments"]
        assert as_json["segments"][-1]["end"] <= final["duration"] + 0.5
        srt = client.get(card["links"]["text"], params={"format": "srt"}).text
        assert srt.startswith("1\n00:00:00,") and "-->" in srt
        vtt = client.get(card["links"]["text"], params={"format": "vtt"}).text
        assert vtt.startswith("WEBVTT\n\n00:00:")
        events = [e["outcome"] for e in client.get(card["links"]["events"]).json()]
        assert events[0] == "accepted" and len(events) >= 5
        health = client.get("/healthz").json()
        assert health == {"status": "ok", "database": "ok", "storage": "ok", "workers": True}
        metrics = client.get("/metrics").text
        assert 'conveyor_step_outcomes_total{domain="audio"' in metrics


def test_album_stream_delivers_and_resumes_without_a_gap(
    make_api: MakeApi, live: Live, corpus: Path
) -> None:
    api = make_api(run_workers=True, media={"short_workers": 1, "long_workers": 1})
    media = corpus / "media"
    with live(api.app) as server, server.client(api.alice) as client:
        album = client.post("/api/albums", json={"name": "Holidays"})
        assert album.status_code == 201, album.text
        album_id = album.json()["id"]
        events_url = album.json()["links"]["events"]
        assert client.get(f"/api/albums/{album_id}").json()["last_event_id"] == 0

        received: list[dict[str, Any]] = []
        with client.stream("GET", events_url, params={"last_event_id": 0}) as response:
            reader = SseReader(response)
            photo = upload_media(client, album_id, media / "exif-samples__Canon_40D.jpg")
            assert set(photo["roles"]) == {"original"}  # M2: nothing else yet
            received.append(reader.next_event(60))
            # Idle now: the heartbeat keeps the connection alive.
            time.sleep(1.2)
            assert next(reader.lines) == ": keep-alive"
        # The connection is dropped; more happens while nobody listens.
        assert [(e["event"], e["item_id"]) for e in received] == [("item.ready", photo["id"])]
        second = upload_media(client, album_id, media / "pillow__transparent.png")
        video = upload_media(client, album_id, media / "file-type__fixture.mov")
        assert video["kind"] == "video"

        def video_done() -> bool:
            item = client.get(f"/api/items/{video['id']}").json()
            assert not item["halted"], item
            return bool(item["done"])

        wait_for(video_done, 120, "the video's playback")
        with client.stream(
            "GET", events_url, headers={"Last-Event-ID": str(received[-1]["id"])}
        ) as response:
            reader = SseReader(response)
            for _ in range(3):
                received.append(reader.next_event(30))
        with api.runtime.engine.connect() as conn:
            outbox = conn.execute(
                select(album_events.c.id, album_events.c.kind, album_events.c.item_id)
                .where(album_events.c.album_id == album_id)
                .order_by(album_events.c.id)
            ).all()
        assert [(e["id"], e["event"], e["item_id"]) for e in received] == [tuple(r) for r in outbox]
        assert sorted((e["event"], e["item_id"]) for e in received) == sorted(
            [
                ("item.ready", photo["id"]),
                ("item.ready", second["id"]),
                ("item.ready", video["id"]),
                ("item.playback_ready", video["id"]),
            ]
        )
        view = client.get(f"/api/albums/{album_id}").json()
        assert view["item_count"] == 3
        by_id = {item["id"]: item for item in view["items"]}
        assert set(by_id[photo["id"]]["roles"]) == {"original", "thumb", "medium", "preview"}
        assert set(by_id[video["id"]]["roles"]) == {
            "original",
            "thumb",
            "medium",
            "preview",
            "poster",
            "playback",
        }
        check_ranges(client, by_id[video["id"]]["roles"]["playback"])


def test_a_subscriber_that_never_reads_stalls_nobody(
    make_api: MakeApi, live: Live, corpus: Path
) -> None:
    api = make_api(run_workers=True, media={"short_workers": 1, "long_workers": 0})
    with live(api.app) as server, server.client(api.alice) as client:
        album_id = client.post("/api/albums", json={"name": "Busy"}).json()["id"]
        # Enough history to fill every buffer between the server and a client that stops reading.
        with api.runtime.engine.begin() as conn:
            for n in range(6000):
                insert_album_event(
                    conn,
                    album_id=album_id,
                    item_id=0,
                    kind="item.note",
                    payload={"n": n, "pad": "x" * 2000},
                    created_at=0.0,
                )
        host, port = server.url.removeprefix("http://").split(":")
        slow = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect((host, int(port)))
        token = api.alice["Authorization"]
        slow.sendall(
            f"GET /api/albums/{album_id}/events?last_event_id=0 HTTP/1.1\r\n"
            f"Host: {host}\r\nAuthorization: {token}\r\n\r\n".encode()
        )
        try:
            time.sleep(1.0)  # the slow stream is now stuck on a full socket
            photo = upload_media(client, album_id, corpus / "media" / "exif-samples__Canon_40D.jpg")
            with client.stream(
                "GET",
                f"/api/albums/{album_id}/events",
                params={"last_event_id": 6000},
            ) as response:
                event = SseReader(response).next_event(30)
            assert (event["event"], event["item_id"]) == ("item.ready", photo["id"])
            # The slow stream was still stalled when the other one got its event: its bytes sit
            # unread in its socket, so the server served the album around it.
            slow.setblocking(False)
            assert slow.recv(1, socket.MSG_PEEK) == b"H"
            assert client.get("/healthz").status_code == 200
        finally:
            slow.close()


def test_oversized_uploads_over_the_wire_are_413_and_leave_nothing(
    make_api: MakeApi, live: Live
) -> None:
    api = make_api(api={"max_upload_bytes": 1024 * 1024})

    def chunked() -> Iterator[bytes]:
        for _ in range(40):
            yield b"RIFF" + b"\0" * (512 * 1024 - 4)

    with live(api.app) as server, server.client(api.alice) as client:
        declared = client.post("/api/records", content=b"\0" * (8 * 1024 * 1024))
        streamed = client.post("/api/records", content=chunked())
        for response in (declared, streamed):
            assert response.status_code == 413
            assert response.json()["error"]["code"] == "too_large"
        assert client.get("/healthz").status_code == 200
        assert client.get("/api/records").json()["items"] == []
    with api.runtime.engine.connect() as conn:
        assert conn.execute(select(files.c.id)).first() is None
    assert object_keys(api.runtime.store) == []


def test_json_bodies_over_a_mebibyte_are_413_and_never_read_whole(
    make_api: MakeApi, live: Live, corpus: Path
) -> None:
    # A 200 MB JSON body was read whole before validation. Now: 413 from Content-Length at
    # once, and while reading a chunked body; the streaming uploads keep their own limit.
    api = make_api(api={"max_upload_bytes": 8 * 1024 * 1024})
    sent = 0

    def huge() -> Iterator[bytes]:
        nonlocal sent
        yield b'{"title": "'
        for _ in range(200):
            sent += 1024 * 1024
            yield b"x" * (1024 * 1024)
        yield b'"}'

    with live(api.app) as server, server.client(api.alice) as client:
        wav = (corpus / "audio" / "jfk.wav").read_bytes()
        record = client.post("/api/records?name=jfk.wav", content=wav).json()
        url = f"/api/records/{record['id']}"
        declared = client.patch(
            url,
            content=huge(),
            headers={"Content-Type": "application/json", "Content-Length": str(200 * 1024**2 + 13)},
        )
        assert sent <= 32 * 1024 * 1024, sent  # refused from the header, not read
        sent = 0
        streamed = client.patch(url, content=huge(), headers={"Content-Type": "application/json"})
        assert sent <= 32 * 1024 * 1024, sent
        album = client.post("/api/albums", json={"name": "n" * 2 * 1024 * 1024})
        for response in (declared, streamed, album):
            assert response.status_code == 413, response.text
            error = response.json()["error"]
            assert (error["status"], error["code"]) == (413, "too_large")
        assert client.get(url).json()["title"] is None
        assert client.get("/api/albums").json() == []
        # A small JSON body is fine; an upload over 1 MiB (under its own limit) is too.
        assert client.patch(url, json={"title": "t" * 200}).status_code == 200
        padded = wav + b"\0" * (2 * 1024 * 1024)
        assert client.post("/api/records?name=long.wav", content=padded).status_code == 201
        assert client.get("/healthz").status_code == 200


def test_a_revoked_token_ends_its_open_event_stream(make_api: MakeApi, live: Live) -> None:
    api = make_api()  # heartbeat 0.5 s: the token is checked again every 0.5 s
    runtime = api.runtime
    token = api.alice["Authorization"].removeprefix("Bearer ")
    account = authenticate(runtime.engine, runtime.clock, token)
    assert account is not None

    def album_event(album_id: int, n: int) -> None:
        with runtime.engine.begin() as conn:
            insert_album_event(
                conn, album_id=album_id, item_id=0, kind="item.note", payload={"n": n}, created_at=0
            )
        runtime.notifier.publish()

    with live(api.app) as server, server.client(api.alice) as client:
        album_id = client.post("/api/albums", json={"name": "Shared"}).json()["id"]
        with client.stream("GET", f"/api/albums/{album_id}/events") as response:
            reader = SseReader(response)
            album_event(album_id, 1)
            assert reader.next_event(10)["payload"] == {"n": 1}
            revoke_token(runtime.engine, account.token_id)
            time.sleep(1.5)
            album_event(album_id, 2)
            rest, ended = reader.rest(5)
            assert ended, "the stream of a revoked token went on"
            assert not any(line.startswith("id:") for line in rest), rest
        assert client.get(f"/api/albums/{album_id}/events").status_code == 401


def test_an_upload_cut_by_a_server_stop_is_a_json_503_and_leaves_nothing(
    make_api: MakeApi, live: Live, corpus: Path
) -> None:
    # It was: uvicorn waited 30 s, cancelled the upload and answered a plain-text 500.
    assert make_server(FastAPI(), "127.0.0.1", 0).config.timeout_graceful_shutdown == 10
    api = make_api(api={"max_upload_bytes": 8 * 1024 * 1024})
    state = api.app.state.conveyor
    assert state.upload_stop_grace == 8.0
    state.upload_stop_grace = 1.0
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    with live(api.app) as server:
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=20) as conn:
            conn.sendall(
                f"POST /api/records?name=jfk.wav HTTP/1.1\r\nHost: {host}\r\n"
                f"Authorization: {api.alice['Authorization']}\r\n"
                f"Content-Length: {len(wav)}\r\n\r\n".encode()
                + wav[: 64 * 1024]
            )
            time.sleep(0.5)  # the upload is streaming into storage; the rest never comes
            started = time.monotonic()
            server.server.handle_exit(signal.SIGTERM, None)
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                answer += chunk
        took = time.monotonic() - started
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503"), answer
        assert b"content-type: application/json" in head.lower()
        error = json.loads(body)["error"]
        assert (error["status"], error["code"]) == (503, "shutting_down")
        # The answer came from the upload's stop grace (it waited for the rest that long), not
        # from uvicorn's graceful-shutdown timeout, which would have answered a plain-text 500.
        assert took >= state.upload_stop_grace, took
        server.thread.join(timeout=15)
        assert not server.thread.is_alive()
    with api.runtime.engine.connect() as conn_db:
        assert conn_db.execute(select(files.c.id)).first() is None
        assert conn_db.execute(select(audio_records.c.id)).first() is None
    assert object_keys(api.runtime.store) == []


def test_a_request_that_is_not_valid_http_gets_the_json_error_shape(
    make_api: MakeApi, live: Live
) -> None:
    """The server's own refusal (before any route runs) has the API's error shape, not
    uvicorn's plain text: a Content-Length that is not a number is ``bad_request``."""
    api = make_api()
    with live(api.app) as server:
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(
                b"POST /api/records HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\nhello"
            )
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 ")
        assert b"content-type: application/json" in head.lower()
        error = json.loads(body)["error"]
        assert (error["status"], error["code"]) == (400, "bad_request")
        assert "Content-Length" in error["message"]
        with server.client(api.alice) as client:
            assert client.get("/healthz").status_code == 200
