"""Helpers of the web app tests: settings, the site with three users, signing in."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from conveyor.accounts import add_user, create_token, passwords, set_admin, set_password
from conveyor.runtime import Runtime
from conveyor.web import create_app
from tests.support.settings import build_settings

# The process's hasher before any test swaps it (see ``cheap_argon2``).
PRODUCTION_HASHER = passwords.hasher
PASSWORDS = {"alice": "alice-password-1", "bob": "bob-password-22", "root": "root-password-333"}


@dataclass
class Site:
    """The app, its runtime, and each user's API token."""

    runtime: Runtime
    app: FastAPI
    tokens: dict[str, str]


MakeSite = Callable[..., Site]


def build_site(
    engine: Engine,
    tmp_path: Path,
    *,
    run_workers: bool = False,
    clock: Any = None,
    **sections: dict[str, Any],
) -> Site:
    """The site on ``engine`` with three users: alice, bob, and root (an admin)."""
    runtime = Runtime(build_settings(tmp_path, **sections), clock, engine=engine)
    tokens = {}
    for name, password in PASSWORDS.items():
        add_user(engine, runtime.clock, name)
        set_password(engine, name, password)
        tokens[name] = create_token(engine, runtime.clock, name).token
    set_admin(engine, "root", True)
    return Site(runtime, create_app(runtime, run_workers=run_workers), tokens)


HTML = {"Accept": "text/html"}


def login_csrf(client: httpx.Client | TestClient) -> str:
    page = client.get("/sign-in", headers=HTML)
    assert page.status_code == 200
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found
    return found.group(1)


def sign_in(client: httpx.Client | TestClient, name: str, password: str | None = None) -> str:
    """Sign ``name`` in (on the app, or on a live server); returns the session's CSRF token
    (from the next page)."""
    token = login_csrf(client)
    reply = client.post(
        "/sign-in",
        data={"username": name, "password": password or PASSWORDS[name], "csrf_token": token},
        headers=HTML,
        follow_redirects=False,
    )
    assert reply.status_code == 303, reply.text
    page = client.get("/records", headers=HTML)
    found = re.search(r'data-csrf="([^"]+)"', page.text)
    assert found
    return found.group(1)
