"""``/api/admin``: administrators see the worker processes and lanes and steer them; any other
token gets 403."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import Engine

from conveyor.accounts import set_admin
from conveyor.processes import queries as process_queries
from tests.support.api import MakeApi


def test_admins_see_and_steer_workers_others_get_403(make_api: MakeApi, engine: Engine) -> None:
    api = make_api()
    set_admin(engine, "alice", True)
    clock = api.runtime.clock
    with engine.begin() as conn:
        process_queries.register_process(
            conn, process_queries.now_of(clock), host="w1", pid=7, version="1", lanes={"audio": 2}
        )
    with TestClient(api.app) as client:
        assert client.get("/api/admin/workers", headers=api.bob).status_code == 403
        assert client.post("/api/admin/lanes/audio/pause", headers=api.bob).status_code == 403
        [worker] = client.get("/api/admin/workers", headers=api.alice).json()["workers"]
        assert (worker["host"], worker["state"], worker["lanes"]) == ("w1", "running", {"audio": 2})
        paused = client.post("/api/admin/lanes/audio/pause?reason=outage", headers=api.alice)
        assert paused.json() == {"lane": "audio", "paused": True, "changed": True}
        lanes = {
            r["lane"]: r for r in client.get("/api/admin/lanes", headers=api.alice).json()["lanes"]
        }
        assert lanes["audio"]["paused"] and lanes["audio"]["reason"] == "outage"
        assert lanes["audio"]["workers"] == 2 and not lanes["short"]["paused"]
        bad = client.post("/api/admin/lanes/nope/pause", headers=api.alice)
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "unknown_lane"
        resumed = client.post("/api/admin/lanes/audio/resume", headers=api.alice).json()
        assert resumed == {"lane": "audio", "paused": False, "changed": True}
        drained = client.post("/api/admin/workers/w1/drain", headers=api.alice)
        assert drained.json() == {"draining": [worker["id"]]}
        assert client.post("/api/admin/workers/w1/drain", headers=api.alice).status_code == 404
