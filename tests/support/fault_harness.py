"""The fault suite's machinery: worker processes, the workload, and the tally after a fault.

A :class:`Fleet` runs worker processes (``fault_worker.py``) against one database and one
storage; :func:`seed` puts a workload in (fast test jobs, real recordings, real photos and a
video from the corpus); :func:`tally` counts everything afterwards against what was seeded and
returns the violations of the promise: no record lost, no write by a stale token landed, no
duplicate effect (texts, objects, journal events, album events, provider operations), every
record ``done`` or halted with a reason.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy import Engine, Table, func, select

from conveyor.audio.intake import accept_audio
from conveyor.clock import SystemClock
from conveyor.config import StorageSettings
from conveyor.db.tables import (
    album_events,
    audio_records,
    files,
    media_items,
    media_objects,
    recognition_attempts,
    record_events,
    texts,
)
from conveyor.media.albums import create_album
from conveyor.media.intake import accept_media
from conveyor.objects import ObjectStore, open_store, sweep_orphans
from conveyor.objects.keys import OBJECT_PREFIXES
from tests.support.jobs_domain import add_jobs, effects, jobs, test_metadata
from tests.support.needs import AUDIO_CORPUS, MEDIA_CORPUS
from tests.support.shared_provider import created_operations

WORKER = Path(__file__).resolve().parent / "fault_worker.py"

#: Recordings that normalize quickly and are real speech or real silence.
AUDIO_FILES = ("jfk.wav", "LDC93S1.flac", "silence_1s.wav", "jfk.mp3", "LDC93S1.opus")
#: Photos of several formats, and a tiny video (poster in ``short``, playback in ``long``).
PHOTO_FILES = (
    "exif-samples__Canon_40D.jpg",
    "exif-samples__DSCN0010.jpg",
    "pillow__hopper_orientation_6.webp",
    "pillow__transparent.png",
    "exif-samples__landscape_1.jpg",
)
VIDEO_FILES = ("file-type__fixture.mov",)


@dataclass
class WorkerSpec:
    """One worker process: the lanes it serves and how far off its own clock runs."""

    lanes: str
    clock_offset: float = 0.0


#: Three processes with the lanes split across them; every lane is served by two of them.
THREE_WORKERS = (
    WorkerSpec("audio,short"),
    WorkerSpec("short,long"),
    WorkerSpec("audio,long"),
)


class Fleet:
    """Worker processes of the fault suite, started, killed and restarted by the test.

    Args:
        database_url: what the workers connect to (a proxy in front of the database, usually).
        storage: the ``CONVEYOR_STORAGE__*`` variables of the store the workers and the test
            share (:func:`storage_env`).
        work: a folder for the provider's operations and the workers' logs.
        specs: one per process.
        env: further ``CONVEYOR_*`` settings for every worker.
    """

    def __init__(
        self,
        database_url: str,
        storage: dict[str, str],
        work: Path,
        specs: Sequence[WorkerSpec] = THREE_WORKERS,
        env: dict[str, str] | None = None,
    ) -> None:
        self.specs = list(specs)
        self.work = work
        self.provider_dir = work / "provider"
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * len(self.specs)
        self.restarts = 0
        base = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
        own = os.environ.get("CONVEYOR_CONFIG")
        # A user's own settings file, when given, keeps its [pipeline] and [media] tuning;
        # the suite's database, storage and provider stay the suite's.
        tuning = {} if own else self.TUNING
        if own:
            base["CONVEYOR_CONFIG"] = own
        self.env = {
            **base,
            "CONVEYOR_DATABASE__URL": database_url,
            **storage,
            **tuning,
            **(env or {}),
        }

    #: The suite's worker tuning (short polls and retry pauses), unless CONVEYOR_CONFIG is set.
    TUNING: ClassVar[dict[str, str]] = {
        "CONVEYOR_PIPELINE__WORKERS": "2",
        "CONVEYOR_PIPELINE__POLL_INTERVAL": "0.5",
        "CONVEYOR_PIPELINE__RETRY_BASE": "0.1",
        "CONVEYOR_PIPELINE__RETRY_MAX": "1.0",
        "CONVEYOR_PIPELINE__MAX_ATTEMPTS": "8",
        "CONVEYOR_PIPELINE__STOP_GRACE": "5",
        "CONVEYOR_MEDIA__SHORT_WORKERS": "2",
        "CONVEYOR_MEDIA__LONG_WORKERS": "1",
    }

    def start(self, index: int | None = None) -> None:
        """Start worker ``index`` (every worker when None)."""
        indexes = range(len(self.specs)) if index is None else [index]
        for i in indexes:
            spec = self.specs[i]
            log = (self.work / f"worker-{i}.log").open("ab")
            self.procs[i] = subprocess.Popen(
                [
                    sys.executable,
                    str(WORKER),
                    "--lanes",
                    spec.lanes,
                    "--clock-offset",
                    str(spec.clock_offset),
                    "--provider-dir",
                    str(self.provider_dir),
                ],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.work,
            )
            log.close()

    def kill(self, index: int) -> None:
        """SIGKILL worker ``index``: no stop, no release, claims left to expire."""
        proc = self.procs[index]
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        self.procs[index] = None

    def restart(self, index: int) -> None:
        """Start worker ``index`` again after a kill."""
        self.start(index)
        self.restarts += 1

    def alive(self) -> list[bool]:
        """Whether each worker process is still running (none should exit by itself)."""
        return [p is not None and p.poll() is None for p in self.procs]

    def stop(self) -> None:
        """SIGTERM every worker and wait for it (SIGKILL after a minute)."""
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            if proc is None:
                continue
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = [None] * len(self.specs)

    def lost_claims(self) -> int:
        """Claims the workers found lost at save time ("claim lost during …" in their logs):
        each is a stale result refused, nothing written (P6)."""
        return sum(
            path.read_text(errors="replace").count("claim lost during")
            for path in self.work.glob("worker-*.log")
        )

    def logs(self) -> str:
        """The tail of every worker's log (for a failure message)."""
        tails = []
        for i in range(len(self.specs)):
            path = self.work / f"worker-{i}.log"
            if path.exists():
                tails.append(f"--- worker {i} ---\n" + path.read_text(errors="replace")[-3000:])
        return "\n".join(tails)


def storage_env(keys: dict[str, Any]) -> dict[str, str]:
    """``[storage]`` keys as ``CONVEYOR_STORAGE__*`` variables for a child process."""
    return {
        f"CONVEYOR_STORAGE__{k.upper()}": str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in keys.items()
    }


def storage_of(keys: dict[str, Any], work: Path) -> ObjectStore:
    """The store ``keys`` name, as this (test) process opens it, working in ``work``."""
    return open_store(StorageSettings(**{**keys, "work_dir": str(work)}))


@dataclass
class Seeded:
    """What :func:`seed` put in: ids per domain."""

    jobs: list[int]
    audio: list[int]
    media: list[int]

    @property
    def total(self) -> int:
        return len(self.jobs) + len(self.audio) + len(self.media)


def seed(engine: Engine, store: ObjectStore, *, jobs_count: int, audio: int, photos: int) -> Seeded:
    """Put the workload in: ``jobs_count`` fast jobs, ``audio`` recordings, ``photos`` photos
    and one video per ten photos (at least one), all waiting for the workers."""
    clock = SystemClock()
    test_metadata.create_all(engine)
    job_ids = add_jobs(engine, jobs_count, clock.now()) if jobs_count else []
    audio_ids = [
        accept_audio(
            engine,
            store,
            clock,
            AUDIO_CORPUS / AUDIO_FILES[i % len(AUDIO_FILES)],
            owner="ann",
            strict=True,
            keep_duplicate=True,
        )
        for i in range(audio)
    ]
    album = create_album(engine, clock, owner="ann", name=f"faults {time.time()}")
    chosen = [PHOTO_FILES[i % len(PHOTO_FILES)] for i in range(photos)]
    chosen += [VIDEO_FILES[i % len(VIDEO_FILES)] for i in range(max(1, photos // 10))]
    media_ids = [
        accept_media(
            engine,
            store,
            clock,
            MEDIA_CORPUS / name,
            album_id=album,
            owner="ann",
            original_name=name,
            max_pixels=100_000_000,
            keep_duplicate=True,
        )
        for name in chosen
    ]
    return Seeded(job_ids, audio_ids, media_ids)


def open_records(engine: Engine, *, jobs: bool = True) -> int:
    """Records neither done nor halted, over the three domains (two without test ``jobs``)."""
    total = 0
    with engine.connect() as conn:
        for table in _tables(jobs):
            total += conn.execute(
                select(func.count())
                .select_from(table)
                .where(table.c.stage != "done", table.c.halted_at.is_(None))
            ).scalar_one()
    return total


def _tables(with_jobs: bool) -> tuple[Table, ...]:
    return (jobs, audio_records, media_items) if with_jobs else (audio_records, media_items)


def done_records(engine: Engine) -> int:
    """Records ``done``, over the three domains."""
    total = 0
    with engine.connect() as conn:
        for table in (jobs, audio_records, media_items):
            total += conn.execute(
                select(func.count()).select_from(table).where(table.c.stage == "done")
            ).scalar_one()
    return total


def wait_until(
    check: Callable[[], bool], timeout: float, *, every: float = 0.2, what: str = "condition"
) -> float:
    """Poll ``check`` until true; returns the seconds it took. Raises on ``timeout``.

    A check that raises (the database is down) counts as false.
    """
    started = time.monotonic()
    while True:
        try:
            if check():
                return time.monotonic() - started
        except Exception:  # the database may be restarting: keep polling
            pass
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{what} not reached within {timeout:.0f} s")
        time.sleep(every)


def held_claims(engine: Engine) -> dict[tuple[str, int], str]:
    """(table, id) → claim token, for every record claimed right now."""
    held: dict[tuple[str, int], str] = {}
    with engine.connect() as conn:
        for table in (jobs, audio_records, media_items):
            rows = conn.execute(
                select(table.c.id, table.c.claim_token).where(table.c.claim_token.is_not(None))
            ).all()
            held.update({(table.name, r.id): r.claim_token for r in rows})
    return held


def taken_over(engine: Engine, before: dict[tuple[str, int], str]) -> bool:
    """True once no record still carries a claim token it carried in ``before`` (every claim
    of that moment finished, or expired and was taken over)."""
    now = held_claims(engine)
    return not any(now.get(key) == token for key, token in before.items())


@dataclass
class Tally:
    """The counts after a run, and every broken promise found (empty: all kept)."""

    records: int = 0
    done: int = 0
    halted: dict[str, int] = field(default_factory=dict)
    provider_operations: int = 0
    objects: int = 0
    orphans_swept: int = 0
    violations: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "done": self.done,
            "halted": self.halted,
            "provider_operations": self.provider_operations,
            "objects": self.objects,
            "orphans_swept": self.orphans_swept,
            "violations": self.violations,
        }


def _duplicates(rows: Sequence[Any]) -> list[Any]:
    return [key for key, n in Counter(rows).items() if n > 1]


def tally(engine: Engine, store: ObjectStore, seeded: Seeded, provider_dir: Path | None) -> Tally:
    """Count everything against ``seeded`` once the run has settled; see the module doc.

    Without test jobs (``seeded.jobs`` empty) their tables are not looked at; without
    ``provider_dir`` provider operations are counted from the recognition attempts instead.
    """
    result = Tally()
    bad = result.violations
    with engine.connect() as conn:
        if seeded.jobs:
            _check_records(conn, jobs, seeded.jobs, result)
            _check_jobs(conn, bad)
        _check_records(conn, audio_records, seeded.audio, result)
        _check_records(conn, media_items, seeded.media, result)
        _check_effects(conn, bad)

    # Provider operations: one per recording, however often its step was cut short.
    if provider_dir is not None:
        operations = created_operations(provider_dir)
        per_record = Counter(op.split("-")[0] for op in operations)
    else:
        with engine.connect() as conn:
            attempts = conn.execute(
                select(recognition_attempts.c.record_id).where(
                    recognition_attempts.c.state != "started"
                )
            ).scalars()
            per_record = Counter(f"rec{r}" for r in attempts)
    result.provider_operations = sum(per_record.values())
    if twice := [k for k, n in per_record.items() if n > 1]:
        bad.append(f"provider: {len(twice)} recordings with more than one operation: {twice[:5]}")

    # Objects: what killed writers left is swept; then every object has exactly one row.
    report = sweep_orphans(engine, store, grace=0.0, now=time.time() + 1)
    result.orphans_swept = len(report.removed)
    # The journalled folders only: the storage root also holds process state (a SQLite
    # database, the local recognizer's folder), which is not an object.
    keys_stored = Counter(o.key for prefix in OBJECT_PREFIXES for o in store.list(prefix))
    result.objects = sum(keys_stored.values())
    with engine.connect() as conn:
        journal = Counter(conn.execute(select(files.c.key)).scalars())
    if without := sorted(set(keys_stored) - set(journal)):
        bad.append(f"objects: {len(without)} without a journal row, e.g. {without[:3]}")
    if missing := sorted(set(journal) - set(keys_stored)):
        bad.append(f"objects: {len(missing)} journal rows without an object, e.g. {missing[:3]}")
    if dup := _duplicates(list(journal.elements())):
        bad.append(f"objects: {len(dup)} keys with two journal rows")
    return result


def _check_jobs(conn: Any, bad: list[str]) -> None:
    """Jobs: one effect per (job, stage) it advanced through, by the claim that saved it."""
    effect_rows = conn.execute(select(effects)).all()
    keys = [(e.job_id, e.stage) for e in effect_rows]
    if dup := _duplicates(keys):
        bad.append(f"jobs: {len(dup)} (job, stage) with more than one effect, e.g. {dup[:3]}")
    advanced = conn.execute(
        select(func.count())
        .select_from(record_events)
        .where(record_events.c.domain == "jobs", record_events.c.outcome == "advanced")
    ).scalar_one()
    if advanced != len(keys):
        bad.append(f"jobs: {len(keys)} effects but {advanced} advanced events")
    final = {r.id: r.result for r in conn.execute(select(jobs.c.id, jobs.c.result, jobs.c.stage))}
    stale = [
        e.job_id for e in effect_rows if e.stage == "waiting" and final.get(e.job_id) != e.token
    ]
    if stale:
        bad.append(f"jobs: {len(stale)} final results not written by the effect's claim")


def _check_effects(conn: Any, bad: list[str]) -> None:
    """Journal, texts, album events, media roles: nothing written twice."""
    # Journal: no stage advanced twice for one record, in any domain.
    advances = conn.execute(
        select(record_events.c.domain, record_events.c.record_id, record_events.c.stage).where(
            record_events.c.outcome == "advanced"
        )
    ).all()
    if dup := _duplicates([tuple(a) for a in advances]):
        bad.append(f"journal: {len(dup)} stages advanced twice, e.g. {dup[:3]}")

    # Texts: one per (record, kind) — the schema says so too; counted anyway.
    text_keys = [tuple(t) for t in conn.execute(select(texts.c.record_id, texts.c.kind))]
    if dup := _duplicates(text_keys):
        bad.append(f"texts: {len(dup)} duplicates, e.g. {dup[:3]}")
    done_audio = set(
        conn.execute(select(audio_records.c.id).where(audio_records.c.stage == "done")).scalars()
    )
    with_transcript = {r for r, kind in text_keys if kind == "transcript"}
    if missing := done_audio - with_transcript:
        # Silence is done without a transcript (no speech); only speech must have one.
        silent = set(
            conn.execute(
                select(audio_records.c.id).where(
                    audio_records.c.id.in_(missing), audio_records.c.no_speech.is_(True)
                )
            ).scalars()
        )
        if missing - silent:
            bad.append(f"texts: done records without a transcript: {sorted(missing - silent)}")

    # Album events: one "item.ready" per item at most.
    ready = [
        r.item_id
        for r in conn.execute(
            select(album_events.c.item_id).where(album_events.c.kind == "item.ready")
        )
    ]
    if dup := _duplicates(ready):
        bad.append(f"album events: item.ready twice for items {dup[:5]}")
    roles = [tuple(r) for r in conn.execute(select(media_objects.c.item_id, media_objects.c.role))]
    if dup := _duplicates(roles):
        bad.append(f"media objects: a role twice: {dup[:5]}")


def _check_records(conn: Any, table: Table, ids: Sequence[int], result: Tally) -> None:
    rows = conn.execute(
        select(table.c.id, table.c.stage, table.c.halted_at, table.c.halt_reason)
    ).all()
    present = {r.id for r in rows}
    if lost := sorted(set(ids) - present):
        result.violations.append(f"{table.name}: {len(lost)} records lost, e.g. {lost[:5]}")
    result.records += len(rows)
    for r in rows:
        if r.stage == "done":
            result.done += 1
        elif r.halted_at is not None and r.halt_reason:
            result.halted[r.halt_reason] = result.halted.get(r.halt_reason, 0) + 1
        else:
            result.violations.append(
                f"{table.name} {r.id}: neither done nor halted with a reason ({r.stage})"
            )
