"""M4: SIGKILL a ``conveyor worker`` during a transcode, restart it, the video still finishes with
exactly one ``playback`` object and one journal row, and no half-written file is left behind.

Runs the real CLI in a subprocess on SQLite (file) and on PostgreSQL. The killed claim becomes
claimable when its lease (:data:`conveyor.media.domain.LONG_LEASE`, renewed by heartbeat while
the worker lived) runs out: no sample of the row taken before that lease end shows another
holder, and the transcode's one save comes after it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from conveyor.clock import SystemClock
from conveyor.db.tables import files, media_items, media_objects, record_events
from conveyor.media.domain import LONG_LEASE, SHORT_LANE
from conveyor.objects import LocalStore, WorkFolder
from tests.support.media import add, album, drain, make_video, media_domain
from tests.support.stored import object_keys

pytestmark = pytest.mark.slow


def _worker_env(engine: Engine, root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
    env.update(
        CONVEYOR_DATABASE__URL=engine.url.render_as_string(hide_password=False),
        CONVEYOR_STORAGE__ROOT=str(root),
        CONVEYOR_PIPELINE__WORKERS="0",
        CONVEYOR_PIPELINE__POLL_INTERVAL="0.2",
        CONVEYOR_MEDIA__SHORT_WORKERS="1",
        CONVEYOR_MEDIA__LONG_WORKERS="1",
    )
    return env


@pytest.fixture
def start_worker(
    engine: Engine, tmp_path: Path
) -> Iterator[Callable[[Path], subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(root: Path) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from conveyor.cli.app import main; main()", "worker"],
            env=_worker_env(engine, root),
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"worker{len(started)}.log").open("wb"),
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_m4_sigkill_during_transcode_then_restart(
    engine: Engine,
    tmp_path: Path,
    start_worker: Callable[[Path], subprocess.Popen[bytes]],
) -> None:
    root = tmp_path / "store"
    store = LocalStore(root, work=WorkFolder(tmp_path / "test-work"))
    clock = SystemClock()
    video = make_video(tmp_path / "long.mp4", width=1920, height=1080, seconds=8)
    album_id = album(engine, clock)
    item = add(engine, store, clock, album_id, video)
    # The short lane runs here so the worker starts straight on the long job.
    drain(engine, media_domain(store), clock, lanes=(SHORT_LANE,))

    def row() -> dict[str, object]:
        with engine.connect() as conn:
            found = conn.execute(select(media_items).where(media_items.c.id == item)).mappings()
            return dict(found.one())

    # The workers' work folder ([storage] work_dir defaults to <root>/work): each process
    # transcodes in a scratch folder of its own subfolder there.
    work = root / "work"

    def partials() -> list[Path]:
        return [p for p in work.rglob("*") if p.name.endswith(".tmp")] if work.exists() else []

    def transcoding_now() -> bool:
        return row()["claim_token"] is not None and bool(partials())

    first = start_worker(root)
    _wait(transcoding_now, 60, "the worker to start transcoding")
    time.sleep(1.0)  # well inside the transcode
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    state = row()
    assert state["stage"] == "transcoding" and state["claim_token"] is not None
    assert partials()  # the kill left debris

    dead_token, dead_lease_end = state["claim_token"], float(str(state["claim_expires_at"]))
    second = start_worker(root)
    # Who held the item, sampled until it is done: every sample read wholly before the dead
    # claim's lease end (the heartbeat had extended it) still shows the dead claim.
    before_lease_end: list[object] = []

    def sample_until_done() -> bool:
        now = row()
        if time.time() < dead_lease_end:
            before_lease_end.append(now["claim_token"])
        return now["stage"] == "done"

    _wait(sample_until_done, LONG_LEASE + 90, "the restarted worker to finish")
    assert before_lease_end and set(before_lease_end) == {dead_token}
    # The dead worker's lapsed claim counted as one failed attempt, "worker lost" (D18), and
    # the one save of the transcode came after that lease end, from the second worker.
    with engine.connect() as conn:
        events = conn.execute(
            select(
                record_events.c.created_at, record_events.c.outcome, record_events.c.outcome_text
            ).where(
                record_events.c.domain == "media",
                record_events.c.record_id == item,
                record_events.c.stage == "transcoding",
            )
        ).all()
    saves = [e.created_at for e in events if e.outcome == "advanced"]
    lost = [e for e in events if e.outcome != "advanced"]
    assert len(saves) == 1 and saves[0] >= dead_lease_end
    assert [e.outcome_text for e in lost] == ["worker lost"], events
    assert lost[0].created_at >= dead_lease_end
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=30) == 0

    with engine.connect() as conn:
        playbacks = conn.execute(
            select(media_objects).where(
                media_objects.c.item_id == item, media_objects.c.role == "playback"
            )
        ).all()
        journal = (
            conn.execute(select(files).where(files.c.id == playbacks[0].file_id)).mappings().all()
        )
        keys = set(conn.execute(select(files.c.key)).scalars())
        total_files = conn.execute(select(func.count()).select_from(files)).scalar()
        total_roles = conn.execute(select(func.count()).select_from(media_objects)).scalar()
        named = conn.execute(select(func.count(func.distinct(media_objects.c.file_id)))).scalar()
    assert len(playbacks) == 1
    key = str(journal[0]["key"])
    found = store.stat(key)
    assert len(journal) == 1 and found is not None and journal[0]["size"] == found.size
    assert total_roles == 6  # original, poster, thumb, medium, preview, playback
    # One journal row per object, every one named by a role (equal image roles share one).
    assert total_files == named
    # The killed worker's folder went when the next worker started; the second's when it exited.
    assert partials() == []
    assert [p for p in work.rglob("*") if p.is_file()] == []
    debris = [p for p in root.rglob("*") if p.name.endswith((".part", ".tmp"))]
    assert debris == []
    # Every object of the item is named by the journal: the killed transcode stored nothing.
    stored = object_keys(store, f"media/{item}")
    assert set(stored) <= keys
    # Named after the largest role they serve (equal image roles share one object).
    names = {k.split("/")[-1].split("-")[0] for k in stored}
    assert (
        {"playback", "poster", "preview"}
        <= names
        <= {
            "medium",
            "playback",
            "poster",
            "preview",
            "thumb",
        }
    )
    assert len(stored) == len(names)
