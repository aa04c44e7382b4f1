"""The real thing, as a user runs it on several hosts: one API process, three worker processes.

PostgreSQL (the suite's own cluster), ``conveyor serve --no-workers``, and three
``conveyor worker --lanes …`` processes, each in its own folder with its own work folder, the
lanes split across them (recognition; photos; videos and photos). Recordings, photos and videos
are uploaded through the HTTP API; every one must end ``done``, every stored object must have
exactly one journal row (and every row its object), and nothing may be written twice (texts,
journal and album events, media roles, recognition operations) — ``harness.tally``.

The small version runs with the suite; ``-m faults_long`` runs the full size: 100 recordings,
200 photos, 10 videos.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from conveyor.accounts.tokens import add_user, create_token
from conveyor.clock import SystemClock
from conveyor.db.engine import make_engine
from conveyor.db.migrate import upgrade
from tests.support.cluster import ThrowawayCluster
from tests.support.fault_harness import (
    Seeded,
    open_records,
    storage_env,
    storage_of,
    tally,
    wait_until,
)
from tests.support.fault_report import record
from tests.support.needs import AUDIO_CORPUS, MEDIA_CORPUS
from tests.support.s3server import S3Server
from tests.support.servers import free_port

CONVEYOR = str(Path(sys.executable).with_name("conveyor"))

#: Speech in several containers and codecs.
RECORDINGS = (
    "jfk.wav",
    "LDC93S1.flac",
    "jfk.mp3",
    "LDC93S1_8k_mono.wav",
    "jfk.m4a",
    "LDC93S1.opus",
    "LDC93S1_vorbis_8k.ogg",
    "LDC93S1_44k_stereo.wav",
)
PHOTOS = (
    *sorted(p.name for p in MEDIA_CORPUS.glob("exif-samples__*.jpg")),
    "pillow__hopper_orientation_6.webp",
    "pillow__transparent.png",
    "pillow__iss634.webp",
    "immich-test-assets__IMG_2682.heic",
)
VIDEOS = ("file-type__fixture.mov", "moviepy__fire2.mp4", "lychee__train.mov")

#: pytest-timeout's bound for the full-size run (the suite's default is 600 s).
LONG_TIMEOUT = 5400

#: The lanes of the three worker processes: recognition alone, photos, videos and photos.
LANES = ("audio", "short", "long,short")


@dataclass(frozen=True)
class Size:
    recordings: int
    photos: int
    videos: int


class Processes:
    """The API process and the worker processes, each in its own folder under ``base``."""

    def __init__(self, base: Path, env: dict[str, str]) -> None:
        self.base = base
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")} | env
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, *args: str, **extra: str) -> subprocess.Popen[bytes]:
        folder = self.base / name
        folder.mkdir(parents=True)
        log = (folder / "log").open("wb")
        proc = subprocess.Popen(
            [CONVEYOR, *args],
            cwd=folder,
            env=self.env | extra,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.parent.name} ---\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.base.glob("*/log"))
        )

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    made: list[Processes] = []

    def make(env: dict[str, str]) -> Processes:
        made.append(Processes(tmp_path / "hosts", env))
        return made[-1]

    yield make  # type: ignore[misc]
    for p in made:
        p.stop()


def run_end_to_end(
    cluster: ThrowawayCluster,
    tmp_path: Path,
    make: object,
    name: str,
    size: Size,
    storage: dict[str, Any] | None = None,
) -> None:
    """Run the layout over ``size``; ``storage``: the ``[storage]`` keys (default a folder)."""
    database = cluster.create_database(name)
    engine = make_engine(database)
    upgrade(engine)
    add_user(engine, SystemClock(), "ann")
    token = create_token(engine, SystemClock(), "ann").token
    keys: dict[str, Any] = storage or {"root": str(tmp_path / "storage")}
    env = {
        "CONVEYOR_DATABASE__URL": database,
        **storage_env(keys),
        "CONVEYOR_PIPELINE__WORKERS": "2",
        "CONVEYOR_MEDIA__SHORT_WORKERS": "2",
        "CONVEYOR_MEDIA__LONG_WORKERS": "1",
        "CONVEYOR_TRANSCRIPTION__MODEL_CACHE": os.environ.get(
            "CONVEYOR_TRANSCRIPTION__MODEL_CACHE",
            str(
                Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                / "conveyor"
                / "models"
            ),
        ),
    }
    hosts: Processes = make(env)  # type: ignore[operator]
    port = free_port()
    hosts.start("api", "serve", "--no-workers", "--host", "127.0.0.1", "--port", str(port))
    for index, lanes in enumerate(LANES):
        work = tmp_path / "hosts" / f"worker-{index}" / "work"
        hosts.start(
            f"worker-{index}", "worker", "--lanes", lanes, CONVEYOR_STORAGE__WORK_DIR=str(work)
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            lambda: httpx.get(f"{base}/healthz", timeout=2).status_code == 200,
            300,
            what="API up",
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{hosts.logs()}") from None
    # The API node runs no workers: every record is moved by the worker processes.
    assert httpx.get(f"{base}/healthz", timeout=5).json()["workers"] is False

    started = time.monotonic()
    audio_ids: list[int] = []
    media_ids: list[int] = []
    with httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120
    ) as client:
        album = client.post("/api/albums", json={"name": name}).json()["id"]
        for i in range(size.recordings):
            path = AUDIO_CORPUS / RECORDINGS[i % len(RECORDINGS)]
            with path.open("rb") as body:
                answer = client.post("/api/records", files={"file": (path.name, body)})
            assert answer.status_code == 201, answer.text
            audio_ids.append(answer.json()["id"])
        chosen = [PHOTOS[i % len(PHOTOS)] for i in range(size.photos)]
        chosen += [VIDEOS[i % len(VIDEOS)] for i in range(size.videos)]
        for file_name in chosen:
            path = MEDIA_CORPUS / file_name
            with path.open("rb") as body:
                answer = client.post(
                    f"/api/albums/{album}/items", files={"file": (path.name, body)}
                )
            assert answer.status_code == 201, answer.text
            media_ids.append(answer.json()["id"])
    uploaded = time.monotonic() - started
    try:
        wait_until(
            lambda: open_records(engine, jobs=False) == 0,
            3600,
            every=1.0,
            what="every record settled",
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{hosts.logs()}") from None
    elapsed = time.monotonic() - started
    hosts.stop()
    store = storage_of(keys, tmp_path / "test-work")
    result = tally(engine, store, Seeded([], audio_ids, media_ids), None)
    record(
        {
            "fault": name,
            "summary": (
                f"API + 3 workers (lanes {' | '.join(LANES)}; store {keys.get('url', 'file:')}): "
                f"{size.recordings} recordings, "
                f"{size.photos} photos, {size.videos} videos uploaded in {uploaded:.0f} s, "
                f"all settled {elapsed:.0f} s after the first upload"
            ),
            "measured": {"upload_seconds": uploaded, "settled_seconds": elapsed},
            "drain_seconds": elapsed,
            "tally": result.as_dict(),
        }
    )
    engine.dispose()
    assert not result.violations, "\n".join(result.violations)
    assert result.done == result.records == size.recordings + size.photos + size.videos, (
        result.halted
    )


def test_end_to_end_api_and_three_workers_small(
    cluster: ThrowawayCluster, tmp_path: Path, processes: object, s3_server: S3Server
) -> None:
    # A bucket, no shared folder: each process has only its own folder and work folder.
    keys = s3_server.storage_settings(s3_server.bucket(), "conveyor")
    run_end_to_end(
        cluster, tmp_path, processes, "e2e_small", Size(recordings=2, photos=8, videos=1), keys
    )


@pytest.mark.faults_long
@pytest.mark.timeout(LONG_TIMEOUT)
def test_end_to_end_api_and_three_workers_full_size(
    cluster: ThrowawayCluster, tmp_path: Path, processes: object, s3_server: S3Server
) -> None:
    keys = s3_server.storage_settings(s3_server.bucket(), "conveyor")
    run_end_to_end(
        cluster,
        tmp_path,
        processes,
        "e2e_full",
        Size(recordings=100, photos=200, videos=10),
        keys,
    )
