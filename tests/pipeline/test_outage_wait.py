"""A step that meets an outage of a service its domain depends on waits for it, on SQLite and
PostgreSQL: no attempt is spent however long the outage lasts (D6), the journal says once why
the record waits, the pause follows the outage's length, the stuck watchdog (D3) still bounds
the wait, and any other error is still a failed attempt."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from conveyor.config import PipelineSettings
from conveyor.db.outage import Outage
from conveyor.objects import LocalStore, StorageUnavailable, WorkFolder, is_storage_outage
from conveyor.objects.outage import is_storage_full
from conveyor.pipeline import Advance, Executor, StepContext
from conveyor.pipeline import executor as executor_module
from conveyor.pipeline.outcomes import Outcome
from conveyor.pipeline.stages import Domain
from conveyor.testing import FakeClock
from tests.support.full_disk import file_size_limit, fill, small_disk
from tests.support.jobs_domain import add_jobs, events_of, job, make_domain


def storage_of(clock: FakeClock) -> Outage:
    """A storage outage state of its own (the process's one is left alone), on ``clock``."""
    return Outage(
        "storage",
        lambda exc: isinstance(exc, StorageUnavailable),
        logging.getLogger("tests.storage"),
        clock=clock.now,
    )


def test_a_step_meeting_a_storage_outage_waits_and_spends_no_attempt(
    db: Engine, clock: FakeClock, settings: PipelineSettings, caplog: pytest.LogCaptureFixture
) -> None:
    storage = storage_of(clock)
    down = settings.max_attempts * 3  # far more tries than a failing record gets

    def stores(ctx: StepContext) -> Outcome:
        if down_for[0] > 0:
            down_for[0] -= 1
            raise StorageUnavailable("the bucket's endpoint answered 503 Slow Down")
        ctx.produced_object("uploads/1")
        return Advance()

    down_for = [down]
    domain = make_domain(new=stores, outages=(storage,))
    (jid,) = add_jobs(db, 1, clock.now())
    entered = job(db, jid)["state_entered_at"]
    executor = Executor(db, clock, settings)
    pauses = []
    with caplog.at_level(logging.INFO, logger="tests.storage"):
        for _ in range(down):
            assert executor.run_once(domain, "default")
            row = job(db, jid)
            assert row["halted_at"] is None, row["halt_error"]
            assert (row["stage"], row["attempts"], row["state_entered_at"]) == ("new", 0, entered)
            assert row["claim_token"] is None
            pause = row["retry_at"] - clock.now()
            pauses.append(pause)
            assert not executor.run_once(domain, "default")  # the pause holds
            clock.advance(pause)
        # The pause follows the outage: the retry base at first, half its length later on.
        assert pauses[0] == pytest.approx(settings.retry_base)
        assert pauses[-1] > pauses[0]
        assert max(pauses) <= settings.retry_max
        assert executor.run_once(domain, "default")
    assert job(db, jid)["stage"] == "waiting"
    # Told once: one journal row of the wait, one log line of the outage.
    waits = [e for e in events_of(db, jid) if e["outcome"] == "postponed"]
    assert len(waits) == 1
    assert waits[0]["outcome_text"].startswith("waiting for the storage, which does not answer")
    assert "503 Slow Down" in waits[0]["outcome_text"]
    lines = [r.getMessage() for r in caplog.records if r.name == "tests.storage"]
    assert len([m for m in lines if "storage unreachable" in m]) == 1, lines
    assert storage.failures == down


def test_an_outage_longer_than_the_stage_allows_halts_stuck(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    """D3 bounds the wait: postpones keep the stuck countdown, so an outage that outlasts
    ``own_work_limit`` halts the record ``stuck`` (a person resumes it), not sooner."""
    storage = storage_of(clock)

    def down(_ctx: StepContext) -> Outcome:
        raise StorageUnavailable("connection refused")

    domain = make_domain(new=down, outages=(storage,))
    (jid,) = add_jobs(db, 1, clock.now())
    entered = job(db, jid)["state_entered_at"]
    executor = Executor(db, clock, settings)
    for _ in range(1000):
        assert executor.run_once(domain, "default")
        row = job(db, jid)
        if row["halted_at"] is not None:
            break
        assert row["attempts"] == 0
        clock.advance(row["retry_at"] - clock.now())
    assert row["halt_reason"] == "stuck"
    assert clock.now() - entered > settings.own_work_limit


def test_other_errors_and_other_domains_still_fail(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    storage = storage_of(clock)
    errors: Iterator[Exception] = iter([ValueError("bad frame"), StorageUnavailable("503")])

    def raises(_ctx: StepContext) -> Outcome:
        raise next(errors)

    (first, other) = add_jobs(db, 2, clock.now())
    executor = Executor(db, clock, settings)
    # A step's own error is a failed attempt even in a domain that waits for the storage.
    assert executor.run_once(make_domain(new=raises, outages=(storage,)), "default")
    assert job(db, first)["attempts"] == 1
    # A domain that declares no dependency on the storage fails on its outage as before.
    clock.advance(settings.retry_max)
    assert executor.run_once(make_domain(new=raises), "default")
    assert job(db, first)["attempts"] == 2
    assert job(db, other)["attempts"] == 0
    assert not storage.down


def test_a_step_writing_to_a_full_folder_waits_naming_the_folder(
    db: Engine,
    clock: FakeClock,
    settings: PipelineSettings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A full disk is said as the storage's, not as a bare ``[Errno 28]``: the journal's note
    and the outage's log line name the folder that is full; a file too large for the folder
    (no waiting makes it fit) is a failed attempt that names it too."""
    storage = Outage(
        "storage",
        is_storage_outage,
        logging.getLogger("tests.storage"),
        clock=clock.now,
        is_full=is_storage_full,
    )
    with small_disk(tmp_path / "disk") as disk:
        store = LocalStore(disk, work=WorkFolder(tmp_path / "work"))
        fill(disk)

        def stores(_ctx: StepContext) -> Outcome:
            store.put("media/1/thumb.webp", [b"x" * 8192])
            return Advance()

        (jid,) = add_jobs(db, 1, clock.now())
        with caplog.at_level(logging.INFO, logger="tests.storage"):
            assert Executor(db, clock, settings).run_once(
                make_domain(new=stores, outages=(storage,)), "default"
            )
    row = job(db, jid)
    assert (row["halted_at"], row["attempts"]) == (None, 0)
    (wait,) = [e for e in events_of(db, jid) if e["outcome"] == "postponed"]
    assert wait["outcome_text"] == (
        f"waiting for the storage, which is full: StorageFull: the storage folder {disk} is full "
        "(No space left on device)"
    )
    (line,) = [r.getMessage() for r in caplog.records if r.name == "tests.storage"]
    assert line.startswith(
        "storage full (first met by the record step): StorageFull: "
        f"the storage folder {disk} is full"
    )

    store = LocalStore(tmp_path / "data", work=WorkFolder(tmp_path / "work"))

    def too_large(_ctx: StepContext) -> Outcome:
        with file_size_limit(4096):
            store.put("media/2/thumb.webp", [b"x" * 8192])
        return Advance()

    (other,) = add_jobs(db, 1, clock.now())
    assert Executor(db, clock, settings).run_once(make_domain(new=too_large), "default")
    assert job(db, other)["attempts"] == 1
    failed = events_of(db, other)[-1]["outcome_text"]
    assert failed == (
        f"StorageFull: the storage folder {store.root} cannot take a file this large "
        "(File too large)"
    )


def _recovering_domain(storage: Outage, recovered: set[int]) -> Domain:
    """The jobs domain whose step meets the outage except for the ``recovered`` records."""

    def stores(ctx: StepContext) -> Outcome:
        if ctx.claim.record_id not in recovered:
            raise StorageUnavailable("the bucket's endpoint answered 503 Slow Down")
        ctx.produced_object(f"uploads/{ctx.claim.record_id}")
        return Advance()

    return make_domain(new=stores, outages=(storage,))


def _told(executor: Executor) -> set[int]:
    return {rid for ids in executor._waiting.values() for _, rid in ids}


def _run_all(
    executor: Executor, domain: Domain, clock: FakeClock, settings: PipelineSettings
) -> None:
    while executor.run_once(domain, "default"):
        pass
    clock.advance(settings.retry_max)


def test_a_record_told_to_wait_is_forgotten_once_its_step_ends_another_way(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    """While an outage lasts, the executor keeps only the records still waiting for it: one
    whose step then goes through (it stores its object) is forgotten; the others, still
    waiting, are told once."""
    storage = storage_of(clock)
    recovered: set[int] = set()
    domain = _recovering_domain(storage, recovered)
    ids = add_jobs(db, 3, clock.now())
    executor = Executor(db, clock, settings)
    _run_all(executor, domain, clock, settings)
    assert _told(executor) == set(ids)
    recovered.add(ids[1])  # its bucket write goes through; the outage goes on
    _run_all(executor, domain, clock, settings)
    assert job(db, ids[1])["stage"] != "new" and storage.down
    assert _told(executor) == {ids[0], ids[2]}, "a record whose step went through is forgotten"
    _run_all(executor, domain, clock, settings)
    for jid in (ids[0], ids[2]):
        assert len([e for e in events_of(db, jid) if e["outcome"] == "postponed"]) == 1


def test_the_records_told_to_wait_are_at_most_waiting_max(
    db: Engine, clock: FakeClock, settings: PipelineSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``WAITING_MAX`` records told to wait for one outage, the longest-told is
    forgotten (and told again if it meets the outage again): the memory is bounded however
    large the backlog the outage holds up."""
    monkeypatch.setattr(executor_module, "WAITING_MAX", 2)
    storage = storage_of(clock)
    domain = _recovering_domain(storage, set())
    ids = add_jobs(db, 3, clock.now())
    executor = Executor(db, clock, settings)
    _run_all(executor, domain, clock, settings)
    assert _told(executor) == set(ids[1:])
