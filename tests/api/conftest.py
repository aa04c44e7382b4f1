"""Fixtures of the HTTP API tests: an app over the ``engine`` fixture, two owners, a live server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from conveyor.accounts import add_user, create_token
from conveyor.api.app import create_app
from conveyor.runtime import Runtime
from tests.support.api import Api, LiveServer, MakeApi
from tests.support.settings import build_settings


@pytest.fixture
def make_api(engine: Engine, tmp_path: Path) -> MakeApi:
    """Build an app on the test database: ``make_api(run_workers=False, api={...}, ...)``."""

    def build(*, run_workers: bool = False, **sections: dict[str, Any]) -> Api:
        runtime = Runtime(build_settings(tmp_path, **sections), engine=engine)
        tokens = {}
        for name in ("alice", "bob"):
            add_user(engine, runtime.clock, name)
            tokens[name] = create_token(engine, runtime.clock, name).token
        app = create_app(runtime, run_workers=run_workers)
        return Api(
            runtime,
            app,
            {"Authorization": f"Bearer {tokens['alice']}"},
            {"Authorization": f"Bearer {tokens['bob']}"},
        )

    return build


@pytest.fixture
def api(make_api: MakeApi) -> Api:
    """An API-only app (no workers) with a 1 MiB upload limit."""
    return make_api(api={"max_upload_bytes": 1024 * 1024})


@pytest.fixture
def client(api: Api) -> Iterator[TestClient]:
    """The ASGI test client of ``api`` (lifespan run)."""
    with TestClient(api.app) as test_client:
        yield test_client


@pytest.fixture
def live() -> Callable[[FastAPI], LiveServer]:
    """``with live(app) as server:`` — a real server on loopback."""
    return LiveServer
