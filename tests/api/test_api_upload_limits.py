"""Uploads are fair to everyone: multipart parts counted, unknown fields refused by name, idle
uploads timed out with their partial data removed, a per-owner cap, and a client that left
while it waited for a slot is never processed."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import anyio
import pytest
from fastapi.testclient import TestClient

from tests.support.api import (
    Api,
    Live,
    LiveServer,
    MakeApi,
    counts,
    error_of,
    stored_objects,
)
from tests.support.multipart_body import multipart


def test_five_thousand_parts_under_one_name_are_400(
    api: Api, client: TestClient, wav: bytes
) -> None:
    body, ctype = multipart(*[("n", None, b"x")] * 5000, ("file", "a.wav", wav))
    response = client.post(
        "/api/records", content=body, headers={**api.alice, "Content-Type": ctype}
    )
    assert "parts" in error_of(response, 400, "bad_multipart")
    assert counts(api.runtime.engine) == (0, 0, 0, 0)
    assert stored_objects(api) == []


def test_a_field_sent_twice_is_400(api: Api, client: TestClient, wav: bytes) -> None:
    body, ctype = multipart(("title", None, b"a"), ("title", None, b"b"), ("file", "a.wav", wav))
    response = client.post(
        "/api/records", content=body, headers={**api.alice, "Content-Type": ctype}
    )
    assert "'title'" in error_of(response, 400, "bad_multipart")
    assert stored_objects(api) == []


def _one_part(headers: list[str], content: bytes) -> tuple[bytes, str]:
    """A multipart body of one part with exactly these header lines."""
    head = "".join(f"{line}\r\n" for line in headers)
    body = f"--xyz\r\n{head}\r\n".encode() + content + b"\r\n--xyz--\r\n"
    return body, "multipart/form-data; boundary=xyz"


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        # Which name holds? Neither: a part says what it is once.
        (
            [
                'Content-Disposition: form-data; name="title"',
                'Content-Disposition: form-data; name="file"; filename="a.wav"',
            ],
            "'content-disposition' twice",
        ),
        (
            [
                'Content-Disposition: form-data; name="file"; filename="a.wav"',
                "Content-Type: audio/wav",
                "content-type: text/plain",
            ],
            "'content-type' twice",
        ),
        (
            [
                'Content-Disposition: form-data; name="file"; filename="a.wav"',
                "Content-Transfer-Encoding: base64",
            ],
            "'base64'",
        ),
        (
            [
                'Content-Disposition: form-data; name="file"; filename="a.wav"',
                *[f"X-Extra-{i}: {i}" for i in range(8)],
            ],
            "malformed",
        ),
    ],
    ids=["disposition-twice", "content-type-twice", "base64", "nine-headers"],
)
def test_a_part_says_what_it_is_once_and_sends_its_bytes_as_they_are(
    api: Api, client: TestClient, wav: bytes, headers: list[str], said: str
) -> None:
    body, ctype = _one_part(headers, wav)
    response = client.post(
        "/api/records", content=body, headers={**api.alice, "Content-Type": ctype}
    )
    assert said in error_of(response, 400, "bad_multipart")
    assert counts(api.runtime.engine) == (0, 0, 0, 0)
    assert stored_objects(api) == []


@pytest.mark.parametrize(
    "names", [["raw_pcm"], ["titel", "lang"], ["Title"], ["brief", "title"], ["x" * 40]]
)
def test_unknown_record_fields_are_400_and_named(
    api: Api, client: TestClient, wav: bytes, names: list[str]
) -> None:
    parts = [(n, None, b"v") for n in names]
    body, ctype = multipart(*parts, ("file", "a.wav", wav))
    response = client.post(
        "/api/records", content=body, headers={**api.alice, "Content-Type": ctype}
    )
    message = error_of(response, 400, "unknown_field")
    for name in names:
        if name != "title":
            assert repr(name) in message
    assert "`language`" in message and "`title`" in message
    assert counts(api.runtime.engine) == (0, 0, 0, 0)
    assert stored_objects(api) == []


def test_album_items_take_no_text_fields(api: Api, client: TestClient, corpus: Path) -> None:
    assert client.post("/api/albums", json={"name": "a"}, headers=api.alice).status_code == 201
    photo = (corpus / "media" / "exif-samples__Canon_40D.jpg").read_bytes()
    body, ctype = multipart(("title", None, b"x"), ("file", "p.jpg", photo))
    response = client.post(
        "/api/albums/1/items", content=body, headers={**api.alice, "Content-Type": ctype}
    )
    assert "'title'" in error_of(response, 400, "unknown_field")
    body, ctype = multipart(("file", "p.jpg", photo))
    response = client.post(
        "/api/albums/1/items", content=body, headers={**api.alice, "Content-Type": ctype}
    )
    assert response.status_code == 201, response.text


def test_known_fields_still_work(api: Api, client: TestClient, wav: bytes) -> None:
    body, ctype = multipart(
        ("title", None, b"T"), ("language", None, b"en"), ("file", "a.wav", wav)
    )
    response = client.post(
        "/api/records", content=body, headers={**api.alice, "Content-Type": ctype}
    )
    assert response.status_code == 201, response.text
    assert response.json()["title"] == "T" and response.json()["language"] == "en"


# --- over the wire ---------------------------------------------------------------------------


@contextmanager
def raw_upload(
    server: LiveServer, token: str, length: int, first: bytes
) -> Iterator[socket.socket]:
    """An upload that sends its headers and ``first`` body bytes, then nothing."""
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    head = (
        f"POST /api/records HTTP/1.1\r\nHost: x\r\nAuthorization: {token}\r\n"
        f"Content-Type: application/octet-stream\r\nContent-Length: {length}\r\n\r\n"
    )
    sock.sendall(head.encode() + first)
    try:
        yield sock
    finally:
        sock.close()


def read_status(sock: socket.socket, timeout: float) -> tuple[int, str]:
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    # The body follows the headers; read what is there.
    sock.settimeout(1)
    with suppress(TimeoutError, OSError):
        data += sock.recv(65536)
    status = int(data.split(b" ", 2)[1])
    return status, data.decode("latin-1")


def test_an_idle_upload_gets_408_and_its_partial_data_is_removed(
    make_api: MakeApi, live: Live, wav: bytes
) -> None:
    api = make_api(api={"upload_idle_timeout": 0.5})
    with (
        live(api.app) as server,
        raw_upload(server, api.alice["Authorization"], len(wav), wav[:4096]) as sock,
    ):
        started = time.monotonic()
        status, text = read_status(sock, timeout=30)
        assert status == 408, text
        assert "upload_timeout" in text
        assert time.monotonic() - started < 20
        assert stored_objects(api) == []
        assert counts(api.runtime.engine) == (0, 0, 0, 0)
        # The slot is free again: an ordinary upload goes through.
        with server.client(api.alice) as client:
            assert client.post("/api/records", content=wav).status_code == 201


def test_a_trickling_upload_below_the_minimum_rate_gets_408(
    make_api: MakeApi, live: Live, wav: bytes
) -> None:
    # A byte every 0.2 s is never idle for 1 s, but far below 1 KiB/s over each second.
    api = make_api(api={"upload_idle_timeout": 1.0, "upload_min_rate": 1024})
    with (
        live(api.app) as server,
        raw_upload(server, api.alice["Authorization"], len(wav), wav[:1]) as sock,
    ):
        started = time.monotonic()
        sock.settimeout(0.2)
        data = b""
        sent = 1
        while time.monotonic() - started < 20 and b"\r\n\r\n" not in data:
            with suppress(TimeoutError):
                data += sock.recv(65536)
            with suppress(OSError):
                sock.sendall(wav[sent : sent + 1])
                sent += 1
        assert data.startswith(b"HTTP/1.1 408"), data
        assert b"minimum of 1 KiB/s" in data
        assert stored_objects(api) == []
        assert counts(api.runtime.engine) == (0, 0, 0, 0)


def test_one_owner_cannot_take_every_upload_slot(make_api: MakeApi, live: Live, wav: bytes) -> None:
    api = make_api(api={"uploads_per_owner": 2, "upload_idle_timeout": 60})
    with live(api.app) as server, ExitStack() as stack:
        for _ in range(2):
            stack.enter_context(raw_upload(server, api.alice["Authorization"], len(wav), wav[:100]))
        with server.client(api.alice) as alice:
            deadline = time.monotonic() + 20
            while sum(api.app.state.conveyor.uploads_by_owner.values()) < 2:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            refused = alice.post("/api/records", content=wav)
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "too_many_uploads"
            assert int(refused.headers["Retry-After"]) > 0
        with server.client(api.bob) as bob:
            assert bob.post("/api/records", content=wav).status_code == 201
    # The idle uploads' connections closed: their partial objects are gone too.
    deadline = time.monotonic() + 20
    while api.app.state.conveyor.uploads_by_owner and time.monotonic() < deadline:
        time.sleep(0.05)
    assert api.app.state.conveyor.uploads_by_owner == {}
    assert len(stored_objects(api)) == 1


def test_a_client_that_left_while_waiting_for_a_slot_is_never_processed(
    make_api: MakeApi, live: Live, wav: bytes
) -> None:
    api = make_api(api={"upload_idle_timeout": 3})
    state = api.app.state.conveyor
    state.upload_slots = anyio.CapacityLimiter(1)
    with live(api.app) as server:
        with raw_upload(server, api.alice["Authorization"], len(wav), wav[:100]) as holder:
            deadline = time.monotonic() + 20
            while state.upload_slots.borrowed_tokens < 1:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            # Headers only, then gone, while the one slot is held.
            with raw_upload(server, api.bob["Authorization"], len(wav), b""):
                while state.uploads_by_owner.get("bob") != 1:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            status, _ = read_status(holder, timeout=30)
            assert status == 408
        deadline = time.monotonic() + 20
        while state.uploads_by_owner and time.monotonic() < deadline:
            time.sleep(0.05)
        assert state.uploads_by_owner == {}
        assert state.upload_slots.borrowed_tokens == 0
        assert counts(api.runtime.engine) == (0, 0, 0, 0)
        assert stored_objects(api) == []
