"""The web app's doors, attacked over real sockets: a form's body is not read before its
session is checked and must arrive in time, the Origin check compares scheme, host and port,
headers are bounded, and one session holds only so many live streams."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import pytest
from fastapi.testclient import TestClient

from conveyor.web import gate
from tests.support.servers import LiveServer
from tests.support.web import HTML, MakeSite, sign_in


def _raw(url: str, head: str, body: bytes = b"") -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(head.encode() + body)
    return sock


def _status(sock: socket.socket, timeout: float) -> tuple[int, float]:
    """The response's status and how long it took to come."""
    started = time.monotonic()
    sock.settimeout(timeout)
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1]), time.monotonic() - started


def test_a_form_without_a_session_is_refused_before_its_body_is_read(
    make_site: MakeSite,
) -> None:
    site = make_site()
    with LiveServer(site.app) as server:
        # Headers promise 100 kB that never come: the answer does not wait for them.
        head = (
            "POST /records/1/details HTTP/1.1\r\nHost: x\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n"
            "Cookie: conveyor_session=not-a-session\r\n\r\n"
        )
        with _raw(server.url, head) as sock:
            status, took = _status(sock, timeout=10)
        assert status == 401
        assert took < 5


def test_api_routes_outside_api_take_their_bearer_token_not_a_session(
    make_site: MakeSite,
) -> None:
    """OpenAI's ``/v1`` route is the API's: a bearer token, no browser session, reaches it."""
    site = make_site()
    bearer = {"Authorization": f"Bearer {site.tokens['alice']}"}
    with TestClient(site.app) as client:
        # No model: the route itself refuses the field, so the gate let the request through.
        answer = client.post(
            "/v1/audio/transcriptions", files={"file": ("a.wav", b"RIFF")}, headers=bearer
        )
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == "invalid_field"
        assert client.get("/v1/models", headers=bearer).status_code == 200
        # Without a token the route answers as the API does, not as a page's form.
        anonymous = client.post("/v1/audio/transcriptions", files={"file": ("a.wav", b"RIFF")})
        assert anonymous.status_code == 401


def test_a_signed_in_form_that_trickles_is_ended_after_the_read_timeout(
    make_site: MakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gate, "FORM_READ_TIMEOUT", 0.5)
    site = make_site()
    with LiveServer(site.app) as server, httpx.Client(base_url=server.url) as client:
        csrf = sign_in(client, "alice")
        cookie = client.cookies["conveyor_session"]
        head = (
            "POST /tokens HTTP/1.1\r\nHost: x\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n"
            f"Cookie: conveyor_session={cookie}\r\nX-CSRF-Token: {csrf}\r\n\r\n"
        )
        with _raw(server.url, head, b"label=a") as sock:
            status, took = _status(sock, timeout=10)
        assert status == 408
        assert took < 5
        # A whole form in time goes through.
        made = client.post("/tokens", data={"label": "ok", "csrf_token": csrf}, headers=HTML)
        assert made.status_code == 200


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://testserver", True),
        ("http://testserver:80", True),
        ("HTTP://TestServer", True),
        ("https://testserver", False),
        ("http://testserver:8080", False),
        ("http://testserver.evil.example", False),
        ("http://evil.example", False),
        ("ftp://testserver", False),
        ("http://user@testserver", False),
        ("null", False),
    ],
)
def test_the_origin_check_compares_scheme_host_and_port(
    make_site: MakeSite, origin: str, allowed: bool
) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        reply = client.post(
            "/tokens",
            data={"label": "x", "csrf_token": csrf},
            headers={**HTML, "Origin": origin},
        )
        assert (reply.status_code == 200) is allowed, (origin, reply.status_code)
        if not allowed:
            assert reply.status_code == 403


def test_behind_a_trusted_proxy_the_forwarded_scheme_is_the_origins(
    make_site: MakeSite,
) -> None:
    site = make_site(api={"trusted_proxies": ["127.0.0.0/8"]})
    with TestClient(site.app, client=("127.0.0.1", 5000)) as client:
        csrf = sign_in(client, "alice")
        https = {**HTML, "Origin": "https://testserver", "X-Forwarded-Proto": "https"}
        reply = client.post("/tokens", data={"label": "x", "csrf_token": csrf}, headers=https)
        assert reply.status_code == 200
    # From a peer that is no trusted proxy, the forwarded scheme is not believed.
    with TestClient(site.app, client=("203.0.113.5", 5000)) as client:
        csrf = sign_in(client, "bob")
        https = {**HTML, "Origin": "https://testserver", "X-Forwarded-Proto": "https"}
        reply = client.post("/tokens", data={"label": "x", "csrf_token": csrf}, headers=https)
        assert reply.status_code == 403


def test_headers_are_bounded(make_site: MakeSite) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        many = {f"X-Filler-{n}": "v" for n in range(gate.MAX_HEADERS + 1)}
        reply = client.get("/sign-in", headers=many)
        assert reply.status_code == 431
        assert reply.json()["error"]["code"] == "headers_too_large"
        big = {"X-Big": "v" * (gate.MAX_HEADER_BYTES + 1)}
        assert client.get("/healthz", headers=big).status_code == 431
        assert client.get("/healthz").status_code == 200
    with LiveServer(site.app) as server:
        # Past what the server buffers at all: refused by the server's parser itself.
        head = f"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Huge: {'v' * 100_000}\r\n\r\n"
        with _raw(server.url, head) as sock:
            status, _ = _status(sock, timeout=10)
        assert status in (400, 431)


@contextmanager
def _stream(client: httpx.Client, path: str) -> Iterator[httpx.Response]:
    with client.stream("GET", path, headers={"Accept": "text/event-stream"}) as response:
        yield response


def test_one_session_holds_at_most_streams_per_token_live_streams(
    make_site: MakeSite,
) -> None:
    site = make_site(api={"streams_per_token": 2})
    state = site.app.state.conveyor
    with LiveServer(site.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        sign_in(client, "alice")
        with ExitStack() as open_streams:
            for _ in range(2):
                assert (
                    open_streams.enter_context(_stream(client, "/records/events")).status_code
                    == 200
                )
            refused = client.get("/records/events")
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "too_many_streams"
            assert int(refused.headers["Retry-After"]) > 0
            # Another session of another person is not counted against this one.
            with httpx.Client(base_url=server.url, timeout=10) as other:
                sign_in(other, "bob")
                with _stream(other, "/records/events") as theirs:
                    assert theirs.status_code == 200
        # Closed streams give their places back.
        deadline = time.monotonic() + 10
        while state.page_streams_by_session and time.monotonic() < deadline:
            time.sleep(0.05)
        assert state.page_streams_by_session == {}
        with _stream(client, "/records/events") as again:
            assert again.status_code == 200
