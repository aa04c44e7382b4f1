"""A database outage: the API answers 503 with Retry-After (never 500), and the log says it once
per process when it starts and once when it ends, however many threads and requests met it."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from conveyor.accounts import add_user, create_token
from conveyor.api.app import create_app
from conveyor.db import outage
from conveyor.db.engine import make_engine
from conveyor.runtime import Runtime
from tests.support.settings import build_settings
from tests.support.tcp_proxy import TcpProxy

PG_URL = os.environ.get("CONVEYOR_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def test_an_outage_is_503_with_retry_after_and_logged_once_per_process(
    pg_proxy: TcpProxy,
    pg_engine: Engine,
    tmp_path: Path,
    corpus: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = make_url(PG_URL).set(host="127.0.0.1", port=pg_proxy.port)
    engine = make_engine(url.render_as_string(hide_password=False), pool_size=5)
    settings = build_settings(
        tmp_path,
        pipeline={"workers": 3, "poll_interval": 0.05},
        media={"short_workers": 2, "long_workers": 1},
    )
    runtime = Runtime(settings, engine=engine)
    add_user(engine, runtime.clock, "alice")
    auth = {"Authorization": f"Bearer {create_token(engine, runtime.clock, 'alice').token}"}
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    app = create_app(runtime, run_workers=True)
    caplog.set_level(logging.INFO)
    with TestClient(app) as client:
        assert client.get("/api/records", headers=auth).status_code == 200
        pg_proxy.down()
        started = time.monotonic()
        answers = []
        while time.monotonic() - started < 3.0:  # six workers retry about once a second each
            answers += [
                client.post("/api/records", content=wav, headers=auth),
                client.get("/api/records", headers=auth),
                client.post("/api/albums", json={"name": "x"}, headers=auth),
                client.get("/healthz"),
            ]
            time.sleep(0.1)
        for response in answers:
            assert response.status_code == 503, response.text
            assert int(response.headers["Retry-After"]) > 0
        assert {r.json()["error"]["code"] for r in answers} == {
            "database_unavailable",
            "unavailable",
        }
        pg_proxy.up()
        deadline = time.monotonic() + 20
        while outage.DATABASE.down:
            assert time.monotonic() < deadline, "the outage never ended"
            time.sleep(0.05)
        assert client.post("/api/records", content=wav, headers=auth).status_code == 201
    engine.dispose()
    ours = [
        r for r in caplog.records if r.name.startswith("conveyor") and r.levelno >= logging.WARNING
    ]
    began = [r for r in ours if "database unreachable" in r.getMessage()]
    ended = [r for r in ours if "database reachable again" in r.getMessage()]
    assert len(began) == 1, [r.getMessage() for r in ours]
    assert len(ended) == 1, [r.getMessage() for r in ours]
    assert [r for r in ours if r.exc_info] == [], "no tracebacks during an outage"
    # Besides the two lines, the outage left at most a line per thread that lost a step.
    assert len(ours) <= 2 + 6, [r.getMessage() for r in ours]
