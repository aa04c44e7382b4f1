"""Helpers of the HTTP API tests: the app bundle, its fixtures' types, table counts, errors,
a server-sent events reader, and the checks several API test modules share."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from conveyor.db.tables import audio_records, files, media_items, record_events
from conveyor.runtime import Runtime
from tests.support.servers import LiveServer
from tests.support.stored import object_keys

__all__ = [
    "Api",
    "Live",
    "LiveServer",
    "MakeApi",
    "SseReader",
    "assert_error",
    "check_ranges",
    "counts",
    "error_of",
    "stored_objects",
    "upload_media",
    "wait_for",
]


@dataclass
class Api:
    """An app, its runtime and the tokens of two owners."""

    runtime: Runtime
    app: FastAPI
    alice: dict[str, str]
    bob: dict[str, str]


#: ``make_api(run_workers=False, **sections)`` (the ``make_api`` fixture of tests/api).
MakeApi = Callable[..., Api]
#: ``live(app)``: a :class:`LiveServer` to use as a context manager (the ``live`` fixture).
Live = Callable[[FastAPI], LiveServer]


def counts(engine: Engine) -> tuple[int, ...]:
    with engine.connect() as conn:
        return tuple(
            conn.execute(select(func.count()).select_from(table)).scalar_one()
            for table in (files, audio_records, record_events, media_items)
        )


def stored_objects(api: Api) -> list[str]:
    return object_keys(api.runtime.store)


def error_of(response: Any, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["status"] == status and error["code"] == code, error
    return str(error["message"])


def assert_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert error["status"] == status
    assert isinstance(error["message"], str) and error["message"]
    if code is not None:
        assert error["code"] == code
    return dict(error)


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class SseReader:
    """Reads one SSE response: events as dicts, heartbeats counted."""

    def __init__(self, response: httpx.Response) -> None:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        self.lines = response.iter_lines()
        self.heartbeats = 0

    def next_event(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        block: dict[str, str] = {}
        for line in self.lines:
            if line.startswith(":"):
                self.heartbeats += 1
            elif line == "":
                if "id" in block:
                    return {
                        "id": int(block["id"]),
                        "event": block["event"],
                        **json.loads(block["data"]),
                    }
                block = {}
            else:
                name, _, value = line.partition(":")
                block[name] = value.removeprefix(" ")
            if time.monotonic() > deadline:
                break
        raise AssertionError("no event in time")

    def rest(self, seconds: float) -> tuple[list[str], bool]:
        """The stream's remaining lines, read until it ends or ``seconds`` pass (checked as each
        line arrives); and whether it ended."""
        lines: list[str] = []
        deadline = time.monotonic() + seconds
        for line in self.lines:
            lines.append(line)
            if time.monotonic() > deadline:
                return lines, False
        return lines, True


def upload_media(client: httpx.Client | TestClient, album_id: int, path: Path) -> dict[str, Any]:
    with path.open("rb") as handle:
        response = client.post(
            f"/api/albums/{album_id}/items", files={"file": (path.name, handle, "image/jpeg")}
        )
    assert response.status_code == 201, response.text
    return dict(response.json())


def check_ranges(client: httpx.Client | TestClient, playback: dict[str, Any]) -> None:
    url, size = playback["url"], playback["size"]
    whole = client.get(url)
    assert whole.status_code == 200
    assert whole.headers["content-type"] == "video/mp4"
    assert whole.headers["accept-ranges"] == "bytes"
    assert int(whole.headers["content-length"]) == size == len(whole.content)
    etag = whole.headers["etag"]
    assert etag.startswith('"') and etag.endswith('"')

    first = client.get(url, headers={"Range": "bytes=0-99"})
    assert first.status_code == 206
    assert first.headers["content-range"] == f"bytes 0-99/{size}"
    assert first.content == whole.content[:100]
    rest = client.get(url, headers={"Range": "bytes=100-"})
    assert rest.status_code == 206
    assert rest.headers["content-range"] == f"bytes 100-{size - 1}/{size}"
    assert rest.content == whole.content[100:]
    tail = client.get(url, headers={"Range": "bytes=-50"})
    assert (tail.status_code, tail.content) == (206, whole.content[-50:])
    clamped = client.get(url, headers={"Range": f"bytes={size - 10}-{size + 1000}"})
    assert (clamped.status_code, clamped.content) == (206, whole.content[-10:])
    outside = client.get(url, headers={"Range": f"bytes={size}-"})
    assert outside.status_code == 416
    assert outside.headers["content-range"] == f"bytes */{size}"
    assert outside.json()["error"]["code"] == "range_not_satisfiable"
    # Ignored, answered whole: a malformed range, several ranges, a stale If-Range.
    for headers in (
        {"Range": "bytes=abc"},
        {"Range": "bytes=0-1,5-9"},
        {"Range": "bytes=0-9", "If-Range": '"stale"'},
    ):
        again = client.get(url, headers=headers)
        assert (again.status_code, len(again.content)) == (200, size), headers
    matching = client.get(url, headers={"Range": "bytes=0-9", "If-Range": etag})
    assert matching.status_code == 206
    cached = client.get(url, headers={"If-None-Match": etag})
    assert cached.status_code == 304
    assert cached.content == b""
    head = client.head(url)
    assert head.status_code == 200, head.text
    assert int(head.headers["content-length"]) == size and head.content == b""
    head = client.head(url, headers={"Range": "bytes=0-9"})
    assert (head.status_code, head.headers["content-length"], head.content) == (206, "10", b"")
