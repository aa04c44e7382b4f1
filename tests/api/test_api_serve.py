"""``conveyor serve`` as a real process: it answers, and SIGTERM stops it with a stream open."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from conveyor.accounts import add_user, create_token
from conveyor.api.app import create_app
from conveyor.config import Settings
from conveyor.db.engine import make_engine
from conveyor.runtime import Runtime
from conveyor.testing import FakeClock
from tests.support.servers import free_port


def test_serve_no_workers_stops_on_sigterm_with_a_stream_open(
    engine: Engine, tmp_path: Path
) -> None:
    add_user(engine, FakeClock(), "alice")
    token = create_token(engine, FakeClock(), "alice").token
    port = free_port()
    env = {
        **os.environ,
        "CONVEYOR_DATABASE__URL": engine.url.render_as_string(hide_password=False),
        "CONVEYOR_STORAGE__ROOT": str(tmp_path / "data"),
        "CONVEYOR_API__SSE_HEARTBEAT": "0.3",
    }
    env.pop("CONVEYOR_CONFIG", None)
    conveyor = Path(sys.executable).parent / "conveyor"
    process = subprocess.Popen(
        [str(conveyor), "serve", "--no-workers", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stdout.read() if process.stdout else ""
                assert time.monotonic() < deadline, "conveyor serve did not come up"
                time.sleep(0.1)
        assert health.json() == {
            "status": "ok",
            "database": "ok",
            "storage": "ok",
            "workers": False,
        }
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=10) as client:
            album = client.post("/api/albums", json={"name": "Live"}).json()
            with client.stream("GET", album["links"]["events"]) as stream:
                lines = stream.iter_lines()
                assert next(lines) == "retry: 2000"
                assert next(lines) == ""
                assert next(lines) == ": keep-alive"
                process.send_signal(signal.SIGTERM)
                # uvicorn re-raises the signal once it has shut down cleanly.
                assert process.wait(timeout=60) == 0  # a graceful stop is a clean exit
        assert process.stdout is not None
        log = process.stdout.read().decode()
        assert "Application shutdown complete" in log, log
        # The open stream was ended by the app, not cut by uvicorn's graceful-shutdown timeout.
        assert "timeout graceful shutdown exceeded" not in log, log
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_healthz_is_503_when_the_database_is_gone(tmp_path: Path) -> None:
    broken = make_engine("postgresql://nobody@127.0.0.1:1/nothing")  # nothing listens on port 1
    runtime = Runtime(Settings(storage={"root": tmp_path / "data"}), engine=broken)  # type: ignore[arg-type]
    with TestClient(create_app(runtime, run_workers=False)) as client:
        response = client.get("/healthz")
    broken.dispose()
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "unavailable"
