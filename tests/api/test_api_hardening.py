"""Hardening of the HTTP surface: numeric headers, authentication first, no redirects built from
requests, content safety (nosniff, attachments, raw PCM that is not PCM)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from conveyor.api.headers import header_int
from conveyor.api.objects import is_inline, parse_range
from tests.support.api import Api, assert_error, stored_objects

ODD_DIGITS = ["²", "¹", "١٢", "1_0", "+1", "-1", " 1 2", "0x10", "1e3", "٣", "9" * 5000, ""]


@pytest.mark.parametrize("value", ODD_DIGITS)
def test_header_numbers_are_ascii_digits_only(value: str) -> None:
    assert header_int(value) is None
    assert header_int(value.encode("utf-8")) is None


def test_header_numbers_accept_plain_ascii() -> None:
    assert header_int("0") == 0
    assert header_int(b"0042") == 42
    assert header_int("9" * 19) == int("9" * 19)
    assert header_int("9" * 20) is None


@pytest.mark.parametrize("odd", ["²", "¹", "١٢", "1_0", "9" * 5000])
def test_a_range_with_odd_digits_is_ignored_not_a_server_error(odd: str) -> None:
    for header in (f"bytes={odd}-", f"bytes=0-{odd}", f"bytes=-{odd}"):
        assert parse_range(header, 1000) is None, header


def upload_wav(client: TestClient, api: Api, corpus: Path) -> dict[str, Any]:
    data = (corpus / "audio" / "jfk.wav").read_bytes()
    response = client.post("/api/records?name=jfk.wav", content=data, headers=api.alice)
    assert response.status_code == 201, response.text
    return dict(response.json())


def test_odd_range_digits_answer_the_whole_file(api: Api, client: TestClient, corpus: Path) -> None:
    card = upload_wav(client, api, corpus)
    for odd in ("bytes=²-", "bytes=0-¹", "bytes=-١٢", "bytes=1_0-", "bytes=" + "7" * 4400 + "-"):
        # Bytes, so the odd digits reach the server as written.
        headers: dict[str, Any] = {**api.alice, "Range": odd.encode("utf-8")}
        response = client.get(card["links"]["original"], headers=headers)
        assert response.status_code == 200, (odd, response.status_code)
        assert "Content-Range" not in response.headers


def test_a_last_event_id_that_is_not_a_number_is_400(api: Api, client: TestClient) -> None:
    api.app.state.conveyor.closing.set()  # streams that start end at once
    assert client.post("/api/albums", json={"name": "a"}, headers=api.alice).status_code == 201
    for odd in ("¹", "١٢", "abc", "-1", "1.5", "1_0"):
        headers: dict[str, Any] = {**api.alice, "Last-Event-ID": odd.encode("utf-8")}
        response = client.get("/api/albums/1/events", headers=headers)
        assert_error(response, 400, "bad_last_event_id")
    ok = client.get("/api/albums/1/events", headers={**api.alice, "Last-Event-ID": "0"})
    assert ok.status_code == 200


# --- authentication before any body --------------------------------------------------------


def call_asgi(
    api: Api, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes
) -> tuple[int, bytes, bool]:
    """Send one request straight to the ASGI app; returns status, body, whether it read ours."""
    read = False
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        read = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "scheme": "http",
        "query_string": b"",
        "headers": [(b"host", b"testserver"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
        "app": api.app,
    }
    asyncio.run(api.app(scope, receive, send))  # type: ignore[arg-type]
    start = next(m for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return int(start["status"]), content, read


AUTH_CASES = [
    ("PATCH", "/api/records/1", b"application/json", b"{not json"),
    ("POST", "/api/albums", b"application/json", b"{not json"),
    ("POST", "/api/albums", b"application/json", b"x" * (2 * 1024 * 1024)),
    ("POST", "/api/records", b"application/octet-stream", b"RIFF" + b"\0" * 100),
    ("POST", "/api/albums/1/items", b"multipart/form-data; boundary=zz", b"--zz\r\nbroken"),
    ("POST", "/api/records/1/resume", b"application/json", b"[[["),
]


@pytest.mark.parametrize(("method", "path", "ctype", "body"), AUTH_CASES)
@pytest.mark.parametrize("token", [None, b"Bearer not-a-token", b"Basic YWxpY2U6eA=="])
def test_authentication_comes_before_any_body_is_read(
    api: Api, method: str, path: str, ctype: bytes, body: bytes, token: bytes | None
) -> None:
    headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]
    if token is not None:
        headers.append((b"authorization", token))
    status, content, read = call_asgi(api, method, path, headers, body)
    assert status == 401, content
    assert json.loads(content)["error"]["code"] in ("unauthorized", "invalid_token")
    assert not read, "the body was read before the token was checked"
    assert stored_objects(api) == []


def test_with_a_token_the_malformed_body_is_still_400(api: Api, client: TestClient) -> None:
    response = client.post(
        "/api/albums",
        content=b"{not json",
        headers={**api.alice, "Content-Type": "application/json"},
    )
    assert_error(response, 400, "bad_json")


# --- no redirect built from the request ----------------------------------------------------

HOSTILE = {
    "Host": "evil.example",
    "X-Forwarded-Host": "evil.example",
    "X-Forwarded-Proto": "https",
    "Forwarded": "host=evil.example",
}


def test_no_response_is_a_redirect_built_from_request_headers(api: Api, client: TestClient) -> None:
    paths = [r.path for r in api.app.routes if hasattr(r, "path")]
    probes = {p.replace("{record_id}", "1").replace("{album_id}", "1") for p in paths}
    probes = {p.replace("{item_id}", "1").replace("{key:path}", "k") for p in probes}
    probes |= {"//evil.example/", "//evil.example/api/records/", "/api/", "/docs/"}
    for path in sorted(probes):
        for variant in {path, path.rstrip("/") + "/"}:
            for method in ("GET", "POST"):
                response = client.request(
                    method, variant, headers={**api.alice, **HOSTILE}, follow_redirects=False
                )
                assert not 300 <= response.status_code < 400, (method, variant)
                assert "evil.example" not in response.headers.get("location", ""), variant


def test_a_trailing_slash_is_no_route(api: Api, client: TestClient) -> None:
    response = client.get("/api/records/", headers={**api.alice, "Host": "evil.example"})
    assert_error(response, 404)
    assert "location" not in response.headers


# --- content safety ------------------------------------------------------------------------


def test_every_response_says_nosniff(api: Api, client: TestClient, corpus: Path) -> None:
    card = upload_wav(client, api, corpus)
    responses = [
        client.get("/healthz"),
        client.get("/metrics"),
        client.get("/openapi.json"),
        client.get("/no/such/route"),
        client.get("/api/records"),  # 401
        client.get("/api/records", headers=api.alice),
        client.get("/api/records/999", headers=api.alice),
        client.get("/api/records/abc", headers=api.alice),  # 422
        client.get(card["links"]["original"], headers=api.alice),
        client.get(card["links"]["original"], headers={**api.alice, "Range": "bytes=0-9"}),
        client.get(card["links"]["original"], headers={**api.alice, "Range": "bytes=999999-"}),
        client.post(
            "/api/albums",
            content=b"x" * (1024 * 1024 + 1),
            headers={**api.alice, "Content-Type": "application/json"},
        ),
        client.put("/api/records", headers=api.alice),  # 405
    ]
    statuses = {r.status_code for r in responses}
    assert {200, 206, 401, 404, 405, 413, 416, 422} <= statuses
    for response in responses:
        assert response.headers.get("x-content-type-options") == "nosniff", response.url


@pytest.mark.parametrize(
    ("mime", "inline"),
    [
        ("image/jpeg", True),
        ("video/mp4", True),
        ("audio/wav", True),
        ("image/svg+xml", False),
        ("text/html", False),
        ("text/plain", False),
        ("application/json", False),
        ("application/octet-stream", False),
        ("application/pdf", False),
    ],
)
def test_only_media_is_served_inline(mime: str, inline: bool) -> None:
    assert is_inline(mime) is inline


def test_a_stored_object_that_is_not_media_is_an_attachment(
    api: Api, client: TestClient, corpus: Path
) -> None:
    pcm = (corpus / "audio" / "goforward.raw").read_bytes()
    response = client.post(
        "/api/records?raw_pcm=true&name=<b>x</b>.html", content=pcm, headers=api.alice
    )
    assert response.status_code == 201, response.text
    original = client.get(response.json()["links"]["original"], headers=api.alice)
    assert original.status_code == 200
    assert original.headers["content-type"] == "application/octet-stream"
    assert original.headers["content-disposition"].startswith("attachment")
    assert "sandbox" in original.headers["content-security-policy"]
    wav = client.get(upload_wav(client, api, corpus)["links"]["original"], headers=api.alice)
    assert wav.headers["content-disposition"].startswith("inline")


NOT_PCM = {
    "html": b"<!DOCTYPE html><html><script>alert(1)</script></html>" * 40,
    "html-bom-blank": b"\xef\xbb\xbf\n  <html><body>hi</body></html>" * 40,
    "svg": b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>" * 30,
    "pdf": b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n" * 60,
    "zip": b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(range(256)) * 8,
    "text": "просто текст, не звук\n".encode() * 80,
}


@pytest.mark.parametrize("kind", sorted(NOT_PCM))
def test_raw_pcm_uploads_are_still_sniffed_for_non_audio(
    api: Api, client: TestClient, kind: str
) -> None:
    response = client.post("/api/records?raw_pcm=true", content=NOT_PCM[kind], headers=api.alice)
    assert_error(response, 415, "not_media")
    assert stored_objects(api) == []


@pytest.mark.parametrize("image", ["exif-samples__Canon_40D.jpg", "pillow__transparent.png"])
def test_raw_pcm_uploads_that_are_images_are_refused(
    api: Api, client: TestClient, corpus: Path, image: str
) -> None:
    data = (corpus / "media" / image).read_bytes()
    response = client.post("/api/records?raw_pcm=true", content=data, headers=api.alice)
    assert_error(response, 415, "not_media")
    assert stored_objects(api) == []


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("jfk.mp3", "MP3 audio"),
        ("jfk.m4a", "MP4/M4A audio"),
        ("jfk.wav", "WAV audio"),
        ("LDC93S1.opus", "Ogg audio"),
        ("LDC93S1.flac", "FLAC audio"),
    ],
)
def test_raw_pcm_uploads_that_are_compressed_audio_are_refused(
    api: Api, client: TestClient, corpus: Path, name: str, what: str
) -> None:
    data = (corpus / "audio" / name).read_bytes()
    response = client.post("/api/records?raw_pcm=true", content=data, headers=api.alice)
    error = assert_error(response, 415, "not_media")
    assert f"this file is {what}, not headerless PCM" in error["message"]
    assert "without raw_pcm=true" in error["message"]
    assert stored_objects(api) == []


def test_raw_pcm_on_a_recording_already_held_is_refused_not_answered_as_it(
    api: Api, client: TestClient, corpus: Path
) -> None:
    """The file's refusal comes before "already there": a WAV sent with raw_pcm=true is 415
    even when the owner holds it; sent as it is, it answers the record that holds it."""
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    first = client.post("/api/records?name=jfk.wav", content=wav, headers=api.alice)
    assert first.status_code == 201, first.text
    stored = stored_objects(api)
    raw = client.post("/api/records?raw_pcm=true", content=wav, headers=api.alice)
    error = assert_error(raw, 415, "not_media")
    assert "this file is WAV audio, not headerless PCM" in error["message"]
    assert stored_objects(api) == stored
    again = client.post("/api/records", content=wav, headers=api.alice)
    assert again.status_code == 200 and again.json()["duplicate"] is True


def test_headerless_pcm_without_raw_pcm_is_refused_with_the_hint(
    api: Api, client: TestClient, corpus: Path
) -> None:
    pcm = (corpus / "audio" / "goforward.raw").read_bytes()
    error = assert_error(client.post("/api/records", content=pcm, headers=api.alice), 415)
    assert "raw_pcm=true" in error["message"]
    noise = bytes((i * 7919) % 251 for i in range(20000))
    error = assert_error(client.post("/api/records", content=noise, headers=api.alice), 415)
    assert "raw_pcm" not in error["message"]
    assert stored_objects(api) == []


def test_a_405_names_every_method_the_path_takes(api: Api, client: TestClient) -> None:
    response = client.put("/api/records/1", headers=api.alice)
    assert_error(response, 405, "method_not_allowed")
    assert set(response.headers["allow"].split(", ")) >= {"GET", "PATCH", "DELETE"}
    response = client.delete("/api/albums", headers=api.alice)
    assert set(response.headers["allow"].split(", ")) >= {"GET", "POST"}


@pytest.mark.parametrize(
    "body",
    [
        b'{"name": "caf\xe9"}',  # Latin-1, not UTF-8
        b'{"name": "\xff\xfe"}',
        b"[" * 200_000 + b"]" * 200_000,  # past the parser's depth
        b'{"name": ' + b"1" * 5000 + b"}",  # past Python's integer digit limit
    ],
    ids=["latin1", "bad-bytes", "deep", "long-integer"],
)
def test_every_unparsable_json_body_is_bad_json(api: Api, client: TestClient, body: bytes) -> None:
    for method, path in (("POST", "/api/albums"), ("PUT", "/api/vocabulary")):
        response = client.request(
            method, path, content=body, headers={**api.alice, "Content-Type": "application/json"}
        )
        assert_error(response, 400, "bad_json")
