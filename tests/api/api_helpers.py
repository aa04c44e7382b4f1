"""Helpers of the HTTP API tests: the app bundle, settings, a live uvicorn server."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from conveyor.api.server import ConveyorServer, make_server
from conveyor.config import Settings
from conveyor.runtime import Runtime


@dataclass
class Api:
    """An app, its runtime and the tokens of two owners."""

    runtime: Runtime
    app: FastAPI
    alice: dict[str, str]
    bob: dict[str, str]


def build_settings(tmp_path: Path, **sections: dict[str, Any]) -> Settings:
    base: dict[str, dict[str, Any]] = {
        "storage": {"root": tmp_path / "data"},
        "pipeline": {"workers": 0, "poll_interval": 0.1, "retry_base": 0.2, "stop_grace": 10},
        "transcription": {"poll_delay": 0.3},
        "media": {"short_workers": 0, "long_workers": 0},
        "api": {"sse_heartbeat": 0.5},
    }
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    return Settings(**base)  # type: ignore[arg-type]


class LiveServer:
    """uvicorn serving an app on 127.0.0.1 in a thread."""

    def __init__(self, app: FastAPI) -> None:
        self.server: ConveyorServer = make_server(app, "127.0.0.1", 0, log_level="warning")
        self.thread = threading.Thread(target=self.server.run, name="uvicorn-test", daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    @property
    def url(self) -> str:
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def client(self, headers: dict[str, str] | None = None, **kw: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kw)

    def __exit__(self, *exc: object) -> None:
        self.server.close_streams()
        self.server.should_exit = True
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "uvicorn did not stop"
