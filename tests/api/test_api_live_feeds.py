"""One reader per album per process feeds every stream: idle streams cost no query each, every
stream still gets every event, PostgreSQL's NOTIFY wakes the reader across processes, an album
deletion ends its streams, and a token holds a bounded number of streams."""

from __future__ import annotations

import time
from contextlib import ExitStack

from sqlalchemy import Engine

from conveyor.db.engine import is_postgresql
from conveyor.media.queries import insert_album_event
from tests.support.api import Live, MakeApi, SseReader

STREAMS = 20


def write_event(engine: Engine, album_id: int, n: int) -> None:
    """An album event written as another process would: no wake-up of this process."""
    with engine.begin() as conn:
        insert_album_event(
            conn, album_id=album_id, item_id=0, kind="item.note", payload={"n": n}, created_at=0
        )


def test_m5_many_idle_streams_share_one_reader_and_all_get_every_event(
    make_api: MakeApi, live: Live, engine: Engine
) -> None:
    api = make_api(api={"streams_per_token": STREAMS})
    hub = api.app.state.conveyor.live
    with live(api.app) as server, ExitStack() as stack:
        client = stack.enter_context(server.client(api.alice))
        album_id = client.post("/api/albums", json={"name": "Crowd"}).json()["id"]
        readers = []
        for _ in range(STREAMS):
            response = stack.enter_context(client.stream("GET", f"/api/albums/{album_id}/events"))
            readers.append(SseReader(response))
        deadline = time.monotonic() + 20
        while sum(hub.streams_by_token.values()) < STREAMS:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert len(hub.feeds) == 1
        before = hub.reads
        time.sleep(3.0)
        idle_reads = hub.reads - before
        # One reader polls about once a second on SQLite and not at all while PostgreSQL's
        # LISTEN is up; one reader per stream would have read about 60 times.
        assert idle_reads <= 8, idle_reads
        write_event(api.runtime.engine, album_id, 1)
        api.runtime.notifier.wake_local()
        for reader in readers:
            assert reader.next_event(20)["payload"] == {"n": 1}


def test_m5_notify_wakes_the_reader_for_events_of_another_process(
    make_api: MakeApi, live: Live, engine: Engine
) -> None:
    api = make_api()
    state = api.app.state.conveyor
    if not is_postgresql(engine):
        return  # SQLite has no cross-process signal: its reader polls (tested above)
    state.broadcast.poll_interval = 600.0  # only NOTIFY can wake the reader in time
    with live(api.app) as server, server.client(api.alice) as client:
        album_id = client.post("/api/albums", json={"name": "Far"}).json()["id"]
        deadline = time.monotonic() + 20
        while not state.signals.listening:
            assert time.monotonic() < deadline, "the album listener never started"
            time.sleep(0.05)
        with client.stream("GET", f"/api/albums/{album_id}/events") as response:
            reader = SseReader(response)
            time.sleep(0.5)
            started = time.monotonic()
            write_event(api.runtime.engine, album_id, 7)
            assert reader.next_event(10)["payload"] == {"n": 7}
            assert time.monotonic() - started < 5


def test_deleting_an_album_ends_its_streams_with_album_deleted(
    make_api: MakeApi, live: Live
) -> None:
    api = make_api()
    with live(api.app) as server, server.client(api.alice) as client:
        album_id = client.post("/api/albums", json={"name": "Gone"}).json()["id"]
        with client.stream("GET", f"/api/albums/{album_id}/events") as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            assert client.delete(f"/api/albums/{album_id}").status_code == 204
            seen: list[str] = []
            deadline = time.monotonic() + 20
            for line in lines:
                seen.append(line)
                if "album.deleted" in line or time.monotonic() > deadline:
                    break
            assert "event: album.deleted" in seen, seen
            rest = list(lines)  # the stream ends
            assert any(f'"album_id": {album_id}' in line for line in rest[:2]), rest
    assert api.app.state.conveyor.live.streams_by_token == {}


def test_a_token_holds_a_bounded_number_of_streams(make_api: MakeApi, live: Live) -> None:
    api = make_api(api={"streams_per_token": 2})
    hub = api.app.state.conveyor.live
    with live(api.app) as server, ExitStack() as stack:
        alice = stack.enter_context(server.client(api.alice))
        bob = stack.enter_context(server.client(api.bob))
        album_id = alice.post("/api/albums", json={"name": "A"}).json()["id"]
        url = f"/api/albums/{album_id}/events"
        first = stack.enter_context(alice.stream("GET", url))
        second = stack.enter_context(alice.stream("GET", url))
        assert first.status_code == second.status_code == 200
        third = alice.get(url)
        assert third.status_code == 429
        assert third.json()["error"]["code"] == "too_many_streams"
        assert int(third.headers["Retry-After"]) > 0
        bobs_album = bob.post("/api/albums", json={"name": "B"}).json()["id"]
        with bob.stream("GET", f"/api/albums/{bobs_album}/events") as other:
            assert other.status_code == 200
        second.close()
        deadline = time.monotonic() + 20
        while sum(hub.streams_by_token.values()) > 1:
            assert time.monotonic() < deadline, hub.streams_by_token
            time.sleep(0.05)
        with alice.stream("GET", url) as again:
            assert again.status_code == 200
