"""Sign-in (argon2id), sessions, CSRF, the sign-in pause, tokens page, owners kept apart."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
from argon2 import PasswordHasher
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from conveyor.accounts import SignInPaused, check_password, passwords, set_password
from conveyor.accounts.passwords import FIRST_PAUSE, MAX_FAILED_SIGN_INS
from conveyor.db.tables import users, web_sessions
from conveyor.errors import RejectedInput
from conveyor.testing import FakeClock
from tests.support.web import HTML, PASSWORDS, PRODUCTION_HASHER, MakeSite, login_csrf, sign_in

CONVEYOR = str(Path(sys.executable).with_name("conveyor"))


def test_passwords_are_argon2id_and_never_stored_plain(engine: Engine, make_site: MakeSite) -> None:
    make_site()
    with engine.connect() as conn:
        stored = conn.execute(select(users.c.name, users.c.password_hash)).all()
    for name, digest in stored:
        assert digest.startswith("$argon2id$"), digest
        assert PASSWORDS[name] not in digest
    with pytest.raises(RejectedInput):
        set_password(engine, "alice", "short")


def test_sign_in_sets_a_strict_session_cookie_and_sign_out_ends_it(make_site: MakeSite) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        assert (
            client.get("/records", headers=HTML, follow_redirects=False)
            .headers["location"]
            .startswith("/sign-in?next=/records")
        )
        token = login_csrf(client)
        reply = client.post(
            "/sign-in",
            data={"username": "alice", "password": PASSWORDS["alice"], "csrf_token": token},
            headers=HTML,
            follow_redirects=False,
        )
        assert reply.status_code == 303 and reply.headers["location"] == "/records"
        cookie = reply.headers["set-cookie"]
        assert "conveyor_session=" in cookie
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie
        assert "Secure" not in cookie  # served over plain HTTP here
        page = client.get("/records", headers=HTML)
        assert page.status_code == 200 and "alice" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        csrf = re.search(r'data-csrf="([^"]+)"', page.text)
        assert csrf
        out = client.post(
            "/sign-out", data={"csrf_token": csrf.group(1)}, headers=HTML, follow_redirects=False
        )
        assert out.status_code == 303
        again = client.get("/records", headers=HTML, follow_redirects=False)
        assert again.status_code == 303 and again.headers["location"].startswith("/sign-in")


def test_cookie_is_secure_when_served_over_https(make_site: MakeSite) -> None:
    site = make_site()
    with TestClient(site.app, base_url="https://conveyor.test") as client:
        token = login_csrf(client)
        reply = client.post(
            "/sign-in",
            data={"username": "alice", "password": PASSWORDS["alice"], "csrf_token": token},
            headers=HTML,
            follow_redirects=False,
        )
        assert "Secure" in reply.headers["set-cookie"]


def test_wrong_password_and_unknown_user_get_the_same_answer(make_site: MakeSite) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        answers = []
        for name in ("alice", "nobody"):
            reply = client.post(
                "/sign-in",
                data={
                    "username": name,
                    "password": "wrong-password",
                    "csrf_token": login_csrf(client),
                },
                headers=HTML,
            )
            answers.append((reply.status_code, "Wrong user name or password." in reply.text))
        assert answers == [(401, True), (401, True)]


def test_sign_in_pauses_after_repeated_failures(engine: Engine, make_site: MakeSite) -> None:
    clock = FakeClock()
    make_site(clock=clock)
    for _ in range(MAX_FAILED_SIGN_INS):
        assert check_password(engine, clock, "alice", "not-her-password") is None
    # Paused: even the right password is not checked now, and the pause is not extended.
    with pytest.raises(SignInPaused) as paused:
        check_password(engine, clock, "alice", PASSWORDS["alice"])
    assert paused.value.seconds == FIRST_PAUSE
    clock.advance(FIRST_PAUSE - 1)
    with pytest.raises(SignInPaused):
        check_password(engine, clock, "alice", PASSWORDS["alice"])
    clock.advance(1)
    signed = check_password(engine, clock, "alice", PASSWORDS["alice"])
    assert signed is not None and signed.name == "alice"
    # A good password starts the count again: one failure does not pause.
    assert check_password(engine, clock, "alice", "nope-nope") is None
    assert check_password(engine, clock, "alice", PASSWORDS["alice"]) is not None


class CountingHasher(PasswordHasher):
    """argon2id at the tests' small cost, counting the hashes it checks."""

    def __init__(self) -> None:
        super().__init__(time_cost=1, memory_cost=8 * 1024, parallelism=1)
        self.checked = 0

    def verify(self, hash: str | bytes, password: str | bytes) -> Literal[True]:
        self.checked += 1
        return super().verify(hash, password)


@pytest.mark.parametrize("password", ["wrong-password", "y" * 5000])
def test_unknown_and_known_names_answer_alike_including_the_pause(
    engine: Engine, make_site: MakeSite, monkeypatch: pytest.MonkeyPatch, password: str
) -> None:
    """Same answers in the same order for a real name and a made-up one: wrong, wrong, ...,
    paused after five, for the same time; every try checks one hash (a 5,000-character
    password too), so neither the answer nor its time tells the names apart."""
    clock = FakeClock()
    make_site(clock=clock)
    counting = CountingHasher()
    monkeypatch.setattr(passwords, "hasher", counting)

    def answers(name: str) -> list[str]:
        seen = []
        for _ in range(MAX_FAILED_SIGN_INS + 2):
            before = counting.checked
            try:
                result = check_password(engine, clock, name, password, address=None)
                seen.append(f"wrong ({counting.checked - before} checked)" if not result else "in")
            except SignInPaused as exc:
                seen.append(f"paused {exc.seconds} ({counting.checked - before} checked)")
        return seen

    known, unknown = answers("alice"), answers("no-such-person")
    assert known == unknown
    assert known[0] == "wrong (1 checked)"
    assert known[-1] == f"paused {int(FIRST_PAUSE)} (0 checked)"
    clock.advance(FIRST_PAUSE)
    assert answers("alice")[0] == answers("no-such-person")[0] == "wrong (1 checked)"


def test_the_pause_is_shown_on_the_sign_in_page(make_site: MakeSite) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        for _ in range(MAX_FAILED_SIGN_INS):
            client.post(
                "/sign-in",
                data={"username": "bob", "password": "x" * 9, "csrf_token": login_csrf(client)},
                headers=HTML,
            )
        reply = client.post(
            "/sign-in",
            data={
                "username": "bob",
                "password": PASSWORDS["bob"],
                "csrf_token": login_csrf(client),
            },
            headers=HTML,
        )
        assert reply.status_code == 429 and "Sign-in is paused" in reply.text


def test_sign_in_form_without_its_csrf_token_is_refused(make_site: MakeSite) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        login_csrf(client)
        reply = client.post(
            "/sign-in",
            data={"username": "alice", "password": PASSWORDS["alice"], "csrf_token": "forged"},
            headers=HTML,
            follow_redirects=False,
        )
        assert reply.status_code == 403 and "conveyor_session" not in reply.headers.get(
            "set-cookie", ""
        )


def test_every_state_changing_form_needs_the_session_csrf_token(
    engine: Engine, make_site: MakeSite
) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        posts = [
            ("/sign-out", {}),
            ("/tokens", {"label": "x"}),
            ("/albums", {"name": "Trip"}),
            ("/records/1/details", {"title": "t"}),
            ("/records/1/resume", {}),
            ("/operator/freeze", {"domain": "audio", "reason": "stuck"}),
        ]
        for path, data in posts:
            reply = client.post(path, data=data, headers=HTML, follow_redirects=False)
            assert reply.status_code == 403, path
            forged = client.post(
                path, data={**data, "csrf_token": "x" + csrf}, headers=HTML, follow_redirects=False
            )
            assert forged.status_code == 403, path
        # Uploads carry the token in a header; without it nothing is stored.
        upload = client.post("/records/upload", files={"file": ("a.wav", b"RIFF....")})
        assert upload.status_code == 403
        # A right token from another site's page (Origin) is refused as well.
        cross = client.post(
            "/albums",
            data={"name": "Trip", "csrf_token": csrf},
            headers={**HTML, "Origin": "https://evil.example"},
        )
        assert cross.status_code == 403
        ok = client.post(
            "/albums",
            data={"name": "Trip", "csrf_token": csrf},
            headers=HTML,
            follow_redirects=False,
        )
        assert ok.status_code == 303 and ok.headers["location"].startswith("/albums/")
        with engine.connect() as conn:
            assert conn.execute(select(web_sessions.c.id)).all()  # still signed in


def test_tokens_page_creates_shows_once_and_revokes(make_site: MakeSite) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        made = client.post("/tokens", data={"label": "phone", "csrf_token": csrf}, headers=HTML)
        token = re.search(r'id="new-token" class="token">([^<]+)<', made.text)
        assert token
        api = client.get("/api/records", headers={"Authorization": f"Bearer {token.group(1)}"})
        assert api.status_code == 200
        token_id = re.findall(r'id="token-(\d+)"', made.text)[-1]
        assert token.group(1) not in client.get("/tokens", headers=HTML).text
        # Bob cannot revoke Alice's token: it does not exist for him.
        with TestClient(site.app) as other:
            bob_csrf = sign_in(other, "bob")
            refused = other.post(
                f"/tokens/{token_id}/revoke", data={"csrf_token": bob_csrf}, headers=HTML
            )
            assert refused.status_code == 404
        client.post(f"/tokens/{token_id}/revoke", data={"csrf_token": csrf}, headers=HTML)
        api = client.get("/api/records", headers={"Authorization": f"Bearer {token.group(1)}"})
        assert api.status_code == 401


def test_operator_view_is_for_admins_only(make_site: MakeSite) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        sign_in(client, "alice")
        assert client.get("/operator", headers=HTML).status_code == 404
    with TestClient(site.app) as client:
        sign_in(client, "root")
        page = client.get("/operator", headers=HTML)
        assert page.status_code == 200 and "Backlog" in page.text


def test_cli_users_add_password_passwd_and_admin(tmp_path: Path) -> None:
    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CONVEYOR, *args], cwd=tmp_path, input=stdin, capture_output=True, text=True
        )

    added = run(
        "users", "add", "carol", "--password", "--admin", stdin="carol-pass-1\ncarol-pass-1\n"
    )
    assert added.returncode == 0, added.stderr
    assert "created with a password (admin)" in added.stdout
    assert "carol-pass-1" not in added.stdout + added.stderr
    changed = run("users", "passwd", "carol", stdin="new-pass-111\nnew-pass-111\n")
    assert changed.returncode == 0 and "password of 'carol' set" in changed.stdout
    weak = run("users", "passwd", "carol", stdin="short\nshort\n")
    assert weak.returncode == 2 and "at least 8 characters" in weak.stderr
    listing = run("users", "list")
    assert re.search(r"carol.*yes.*yes", listing.stdout)


def test_production_hasher_is_argon2id_at_full_cost() -> None:
    from argon2 import Type

    assert PRODUCTION_HASHER.type is Type.ID
    assert PRODUCTION_HASHER.time_cost >= 3 and PRODUCTION_HASHER.memory_cost >= 64 * 1024
