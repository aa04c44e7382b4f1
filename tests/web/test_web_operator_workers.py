"""The operator page shows the worker processes and lanes; an admin pauses and resumes a lane
and drains a process from it (CSRF-checked forms)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from conveyor.processes import lane_states, list_processes
from conveyor.processes import queries as process_queries
from tests.support.web import HTML, MakeSite, sign_in


def test_the_operator_page_shows_workers_and_steers_lanes_and_drains(make_site: MakeSite) -> None:
    site = make_site()
    runtime = site.runtime
    with runtime.engine.begin() as conn:
        process_queries.register_process(
            conn,
            process_queries.now_of(runtime.clock),
            host="worker-host-1",
            pid=77,
            version="0.0.test",
            lanes={"short": 2, "long": 1},
        )
    with TestClient(site.app) as client:
        sign_in(client, "root")
        page = client.get("/operator", headers=HTML)
        assert page.status_code == 200
        assert "worker-host-1" in page.text and "short 0/2, long 0/1" in page.text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert csrf is not None
        form = {"csrf_token": csrf.group(1)}
        paused = client.post(
            "/operator/lanes",
            data={**form, "lane": "long", "action": "pause", "reason": "bad deploy"},
            headers=HTML,
            follow_redirects=False,
        )
        assert paused.status_code == 303
        states = {
            s.lane: s
            for s in lane_states(runtime.engine, runtime.clock, known=["long"], lost_after=60)
        }
        assert states["long"].reason == "bad deploy"
        assert "paused since" in client.get("/operator", headers=HTML).text
        client.post(
            "/operator/lanes", data={**form, "lane": "long", "action": "resume"}, headers=HTML
        )
        assert (
            lane_states(runtime.engine, runtime.clock, known=["long"], lost_after=60)[0].paused_at
            is None
        )
        [worker] = list_processes(runtime.engine, runtime.clock, lost_after=60)
        drained = client.post(
            "/operator/drain",
            data={**form, "target": str(worker.id)},
            headers=HTML,
            follow_redirects=False,
        )
        assert drained.status_code == 303
        assert list_processes(runtime.engine, runtime.clock, lost_after=60)[0].state == "draining"
        forged = client.post("/operator/drain", data={"target": "1"}, headers=HTML)
        assert forged.status_code == 403
