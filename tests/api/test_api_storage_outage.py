"""A storage outage: uploads answer 503 ``storage_unavailable`` with Retry-After (never 500, no
traceback), ``/healthz`` says the storage does not answer, and the log says it once when the
outage starts and once when it ends."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from conveyor.accounts import add_user, create_token
from conveyor.api.app import create_app
from conveyor.objects import STORAGE
from conveyor.runtime import Runtime
from tests.support.s3server import S3Server
from tests.support.settings import build_settings
from tests.support.tcp_proxy import TcpProxy


@pytest.fixture
def bucket_proxy(s3_server: S3Server) -> Iterator[TcpProxy]:
    where = urlsplit(s3_server.endpoint)
    tcp = TcpProxy((where.hostname or "127.0.0.1", where.port or 80))
    STORAGE.reset()
    yield tcp
    tcp.down()
    STORAGE.reset()


def test_a_bucket_outage_is_503_with_retry_after_and_logged_once(
    bucket_proxy: TcpProxy,
    s3_server: S3Server,
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    storage = {
        **s3_server.storage_settings(s3_server.bucket()),
        "endpoint": f"http://127.0.0.1:{bucket_proxy.port}",
        "root": tmp_path / "data",
    }
    runtime = Runtime(build_settings(tmp_path, storage=storage), engine=engine)
    add_user(engine, runtime.clock, "alice")
    auth = {"Authorization": f"Bearer {create_token(engine, runtime.clock, 'alice').token}"}
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    caplog.set_level(logging.INFO)
    with TestClient(create_app(runtime), raise_server_exceptions=False) as client:
        assert client.get("/healthz").json()["storage"] == "ok"
        album = client.post("/api/albums", json={"name": "trip"}, headers=auth).json()["id"]
        photo = (corpus / "media" / "exif-samples__Canon_40D.jpg").read_bytes()
        bucket_proxy.down()
        answers = [
            client.post("/api/records?name=a.wav", content=wav, headers=auth),
            client.get("/healthz"),
            client.post(f"/api/albums/{album}/items?name=p.jpg", content=photo, headers=auth),
            client.post("/api/records?name=b.wav", content=wav, headers=auth),
        ]
        for response in answers:
            assert response.status_code == 503, response.text
            assert int(response.headers["Retry-After"]) > 0
        codes = [r.json()["error"]["code"] for r in answers]
        assert codes == ["storage_unavailable", "unavailable"] + ["storage_unavailable"] * 2
        assert "storage" in answers[1].json()["error"]["message"]
        # The database kept answering: nothing was journaled for the refused uploads.
        assert client.get("/api/records", headers=auth).json()["items"] == []
        bucket_proxy.up()
        deadline = time.monotonic() + 20
        while STORAGE.down:  # answers for a moment (the settle time) end the outage
            assert time.monotonic() < deadline, "the outage never ended"
            assert client.get("/healthz").status_code in (200, 503)
            time.sleep(0.1)
        assert client.post("/api/records?name=c.wav", content=wav, headers=auth).status_code == 201
    ours = [
        r for r in caplog.records if r.name.startswith("conveyor") and r.levelno >= logging.WARNING
    ]
    began = [r for r in ours if "storage unreachable" in r.getMessage()]
    ended = [r for r in ours if "storage reachable again" in r.getMessage()]
    assert len(began) == 1, [r.getMessage() for r in ours]
    assert len(ended) == 1, [r.getMessage() for r in ours]
    assert [r for r in ours if r.exc_info] == [], "no tracebacks during an outage"
    # Only the storage's pair: a database line here would come from another test's database
    # going away (a throwaway cluster stopped earlier in the same process), not from this one.
    storage_lines = [r for r in ours if r.name == "conveyor.objects"]
    assert len(storage_lines) == 2, [r.getMessage() for r in ours]
