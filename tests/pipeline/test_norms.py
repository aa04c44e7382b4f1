"""One test per engine norm (NORMS P1-P12, D3, D6-D8, D11, D13, D14), on SQLite and PostgreSQL."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import Connection, Engine, event, select, update

from conveyor.config import PipelineSettings, Settings
from conveyor.db.tables import record_events
from conveyor.errors import Conflict, DeclarationError, NotFound
from conveyor.pipeline import (
    Advance,
    Domain,
    Executor,
    Fail,
    Halt,
    Postpone,
    Stage,
    StepContext,
    WorkerPool,
    queries,
    resume,
)
from conveyor.pipeline.outcomes import Outcome
from conveyor.pipeline.rescuer import rescue
from conveyor.runtime import Runtime
from conveyor.testing import FakeClock
from tests.support.jobs_domain import (
    JobHalt,
    add_jobs,
    default_step,
    events_of,
    job,
    jobs,
    make_domain,
)


def lost_count(stage: str) -> float:
    return (
        REGISTRY.get_sample_value("conveyor_claims_lost_total", {"domain": "jobs", "stage": stage})
        or 0.0
    )


def test_p1_claim_is_one_update_returning_id_and_token(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain()
    add_jobs(db, 1, clock.now())
    statements: list[str] = []

    def capture(_c: Any, _cur: Any, statement: str, *_a: Any) -> None:
        statements.append(statement)

    event.listen(db, "before_cursor_execute", capture)
    try:
        claim = Executor(db, clock, settings).claim(domain, "default")
    finally:
        event.remove(db, "before_cursor_execute", capture)
    assert claim is not None
    # Transaction control (and the claim's asynchronous commit setting) is not work.
    control = ("BEGIN", "SAVEPOINT", "SET LOCAL SYNCHRONOUS_COMMIT")
    work = [s for s in statements if not s.strip().upper().startswith(control)]
    assert len(work) == 1, work
    sql = work[0].upper()
    assert sql.lstrip().startswith("UPDATE")
    returning = " ".join(sql.split()).rsplit("RETURNING", 1)[1].replace("TEST_JOBS.", "")
    assert [c.strip() for c in returning.split(",")] == ["ID", "CLAIM_TOKEN"]
    if db.dialect.name == "postgresql":
        assert "FOR UPDATE SKIP LOCKED" in sql
    assert len(claim.token) == 32


def test_p2_d4_reissued_claim_has_new_token_and_fences_the_first(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    """P2 (restated as D4): a token unique per claim; a re-issued claim refuses the first."""
    domain = make_domain(new_lease=10)
    (jid,) = add_jobs(db, 1, clock.now())
    executor = Executor(db, clock, settings)
    first = executor.claim(domain, "default")
    assert first is not None
    assert executor.claim(domain, "default") is None  # held and not expired
    clock.advance(11)
    second = executor.claim(domain, "default")
    assert second is not None and second.record_id == jid
    assert second.token != first.token
    with db.begin() as conn:
        assert not queries.save_if_held(conn, domain, first, {"result": "stale"})
        assert queries.save_if_held(conn, domain, second, {"result": "fresh"})
    assert job(db, jid)["result"] == "fresh"

    # A human resume also re-issues: the holder before the halt is fenced out.
    with db.begin() as conn:
        conn.execute(update(jobs).values(halted_at=clock.now(), halt_reason="x"))
    resume(db, domain, jid, clock=clock)
    third = executor.claim(domain, "default")
    assert third is not None and third.token not in (first.token, second.token)
    with db.begin() as conn:
        assert not queries.save_if_held(conn, domain, second, {"result": "stale"})


def test_p3_three_concurrent_claims_one_winner(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain()
    for _round in range(10):
        with db.begin() as conn:
            conn.execute(jobs.delete())
        add_jobs(db, 1, clock.now())
        barrier = threading.Barrier(3)
        results: list[Any] = []
        lock = threading.Lock()

        def claimer(
            barrier: threading.Barrier = barrier,
            lock: threading.Lock = lock,
            results: list[Any] = results,
        ) -> None:
            executor = Executor(db, clock, settings)
            barrier.wait()
            got = executor.claim(domain, "default")
            with lock:
                results.append(got)

        threads = [threading.Thread(target=claimer) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [r for r in results if r is not None]
        assert len(results) == 3
        assert len(winners) == 1, results


def test_p4_lease_comes_from_the_stage_as_a_number(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain(new_lease=100, waiting_lease=7)
    a, b = add_jobs(db, 2, clock.now())
    with db.begin() as conn:
        conn.execute(update(jobs).where(jobs.c.id == b).values(stage="waiting"))
    executor = Executor(db, clock, settings)
    now = clock.now()
    claims = [executor.claim(domain, "default"), executor.claim(domain, "default")]
    assert {c.record_id for c in claims if c} == {a, b}
    assert job(db, a)["claim_expires_at"] == pytest.approx(now + 100)
    assert job(db, b)["claim_expires_at"] == pytest.approx(now + 7)
    assert isinstance(job(db, a)["claim_expires_at"], float)


def test_p5_order_is_sort_value_then_primary_key(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain()
    sorts = [3.0, 1.0, 2.0, 1.0, 3.0, 1.0]
    ids = add_jobs(db, len(sorts), clock.now(), sort=lambda i: sorts[i])
    executor = Executor(db, clock, settings)
    got = []
    while (claim := executor.claim(domain, "default")) is not None:
        got.append(claim.record_id)
    expected = [i for _, i in sorted(zip(sorts, ids, strict=True))]
    assert got == expected


def test_p6_step_that_lost_its_claim_writes_nothing(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    stolen = threading.Event()

    def slow(ctx: StepContext) -> Outcome:
        # While this step works, its lease runs out: its worker counts as lost (D18), and
        # after the retry pause another worker takes the record.
        clock.advance(61)
        assert rescue(db, domain, settings, queries.now_of(clock)) == 1
        clock.advance(settings.retry_max)
        other = Executor(db, clock, settings).claim(domain, "default")
        assert other is not None
        stolen.set()

        def side_write(conn: Connection) -> None:
            conn.execute(jobs.update().values(title="side write"))

        return Advance({"result": "from the first holder"}, writes=side_write)

    domain = make_domain(new=slow, new_lease=60)
    (jid,) = add_jobs(db, 1, clock.now())
    before = lost_count("new")
    assert Executor(db, clock, settings).run_once(domain, "default")
    assert stolen.is_set()
    row = job(db, jid)
    assert row["stage"] == "new" and row["result"] is None and row["title"] == "job 0"
    assert [(e["outcome"], e["outcome_text"]) for e in events_of(db, jid)] == [
        ("failed", "worker lost")
    ]
    assert lost_count("new") == before + 1


def test_p7_owner_edit_during_a_step_survives_its_save(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    def edits_midway(ctx: StepContext) -> Outcome:
        with db.begin() as conn:
            conn.execute(
                update(jobs).where(jobs.c.id == ctx.claim.record_id).values(title="owner's")
            )
        return Advance({"result": "done"})

    domain = make_domain(new=edits_midway)
    (jid,) = add_jobs(db, 1, clock.now())
    Executor(db, clock, settings).run_once(domain, "default")
    row = job(db, jid)
    assert row["title"] == "owner's" and row["result"] == "done" and row["stage"] == "waiting"

    # A step that tries to write an owner field is refused and halted, writing nothing of it.
    domain = make_domain(waiting=lambda ctx: Advance({"title": "pipeline's"}))
    Executor(db, clock, settings).run_once(domain, "default")
    row = job(db, jid)
    assert row["title"] == "owner's"
    assert row["halt_reason"] == "step_error" and row["stage"] == "waiting"


def test_p8_halt_is_a_flag_and_keeps_the_stage(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain(waiting=lambda ctx: Halt(JobHalt.BAD_INPUT, "the file is not audio"))
    (jid,) = add_jobs(db, 1, clock.now())
    executor = Executor(db, clock, settings)
    executor.run_once(domain, "default")
    executor.run_once(domain, "default")
    row = job(db, jid)
    assert row["stage"] == "waiting"
    assert row["halted_at"] == clock.now()
    assert row["halt_reason"] == "bad_input" and row["halt_error"] == "the file is not audio"
    assert row["claim_token"] is None


def test_p9_resume_clears_every_guard_keeps_stage_and_writes_a_human_event(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    calls: list[str] = []

    def fails(ctx: StepContext) -> Outcome:
        calls.append(ctx.stage.name)
        return Fail("provider down")

    domain = make_domain(waiting=fails)
    (jid,) = add_jobs(db, 1, clock.now())
    executor = Executor(db, clock, settings)
    executor.run_once(domain, "default")  # new → waiting
    for _ in range(settings.max_attempts):
        clock.advance(1000)
        executor.run_once(domain, "default")
    row = job(db, jid)
    assert row["halt_reason"] == "attempts_exhausted" and row["stage"] == "waiting"
    # What resume must clear: the failure count and the pause of the last failure before it.
    assert row["attempts"] == settings.max_attempts - 1 and row["retry_at"] is not None
    clock.advance(5)
    with pytest.raises(Conflict):
        resume(db, domain, add_jobs(db, 1, clock.now())[0], clock=clock)
    with pytest.raises(NotFound):
        resume(db, domain, 999_999, clock=clock)

    # The halt released the claim; give the row one back, so that resume has it to clear.
    with db.begin() as conn:
        conn.execute(
            update(jobs)
            .where(jobs.c.id == jid)
            .values(claim_token="f" * 32, claim_expires_at=clock.now() + 600)
        )
    assert resume(db, domain, jid, clock=clock) == "waiting"
    row = job(db, jid)
    assert row["halted_at"] is None and row["halt_reason"] is None and row["halt_error"] is None
    assert row["claim_token"] is None and row["claim_expires_at"] is None
    assert row["attempts"] == 0 and row["retry_at"] is None
    assert row["state_entered_at"] == clock.now() and row["stage"] == "waiting"
    last = events_of(db, jid)[-1]
    assert last["origin"] == "human" and last["outcome"] == "resumed"
    calls.clear()
    executor.run_once(domain, "default")
    assert calls == ["waiting"]  # continues from the reached stage, not from "new"


def test_p10_halted_records_are_never_claimed_and_no_failed_stage_exists(
    db: Engine, clock: FakeClock, settings: PipelineSettings, tmp_path: Path
) -> None:
    domain = make_domain(new=lambda ctx: Halt(JobHalt.NOPE, "cannot"))
    (jid,) = add_jobs(db, 1, clock.now())
    executor = Executor(db, clock, settings)
    halted_at = clock.now()
    assert executor.run_once(domain, "default")
    clock.advance(10**7)
    assert not executor.run_once(domain, "default")
    row = job(db, jid)
    assert (row["halted_at"], row["halt_reason"], row["stage"]) == (halted_at, "nope", "new")
    # The real domains have no failed or dead stage: a halt is a flag, and the one terminal
    # stage is done (tests/db/test_names.py holds the spec's stage names).
    runtime = Runtime(Settings(storage={"root": tmp_path}), engine=db)  # type: ignore[arg-type]
    for domain in (runtime.audio, runtime.media):
        names = {s.name for s in domain.stages}
        assert not names & {"failed", "dead", "error", "halted"}
        assert domain.terminal_stages == ["done"]


def test_p11_outcome_reaches_the_card_log_and_journal_not_the_sender(
    db: Engine, clock: FakeClock, settings: PipelineSettings, caplog: pytest.LogCaptureFixture
) -> None:
    domain = make_domain(new=lambda ctx: Halt(JobHalt.NOT_AUDIO, "the upload is text"))
    (jid,) = add_jobs(db, 1, clock.now())
    with caplog.at_level(logging.WARNING, logger="conveyor.pipeline"):
        Executor(db, clock, settings).run_once(domain, "default")
    assert any("not_audio" in r.getMessage() for r in caplog.records)
    assert job(db, jid)["halt_reason"] == "not_audio"
    assert events_of(db, jid)[-1]["outcome_text"] == "not_audio: the upload is text"


def test_p12_no_work_is_a_value_not_a_failure(
    db: Engine, clock: FakeClock, settings: PipelineSettings, caplog: pytest.LogCaptureFixture
) -> None:
    domain = make_domain()
    executor = Executor(db, clock, settings)
    with caplog.at_level(logging.DEBUG):
        results = [executor.run_once(domain, "default") for _ in range(5)]
    assert results == [False] * 5
    assert [r for r in caplog.records if r.name.startswith("conveyor")] == []
    with db.connect() as conn:
        assert conn.execute(select(record_events)).first() is None


def test_d3_stuck_records_are_halted_by_their_claimer(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    ran: list[int] = []

    def never_done(ctx: StepContext) -> Outcome:
        ran.append(ctx.claim.record_id)
        return Fail("again")

    domain = make_domain(new=never_done, waiting=lambda ctx: Postpone(5.0))
    own, foreign = add_jobs(db, 2, clock.now())
    with db.begin() as conn:
        conn.execute(update(jobs).where(jobs.c.id == foreign).values(stage="waiting"))
    executor = Executor(db, clock, settings.model_copy(update={"max_attempts": 100}))
    # The first claim in a stage starts the countdown (D3 clarified); waiting before it is not.
    while executor.run_once(domain, "default"):
        pass
    assert ran == [own]
    assert job(db, own)["work_started_at"] == clock.now()
    clock.advance(settings.own_work_limit + 1)
    while executor.run_once(domain, "default"):
        pass
    assert job(db, own)["halt_reason"] == "stuck"
    assert ran == [own]  # halted by its claimer, the step not run again
    # foreign work has its own, longer limit
    assert job(db, foreign)["halted_at"] is None
    clock.advance(settings.foreign_work_limit)
    assert executor.run_once(domain, "default")
    assert job(db, foreign)["halt_reason"] == "stuck"


def test_d3_backlog_is_never_stuck_bulk_import_at_one_worker(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    """40 records, one worker, a 10 s limit and 1 s steps: the last waits 80 s, none halts."""

    def one_second(ctx: StepContext) -> Outcome:
        clock.advance(1.0)
        return Advance({"result": "ok"})

    domain = make_domain(new=one_second, waiting=one_second)
    ids = add_jobs(db, 40, clock.now())
    tight = settings.model_copy(update={"own_work_limit": 10.0, "foreign_work_limit": 10.0})
    executor = Executor(db, clock, tight)
    while executor.run_once(domain, "default"):
        pass
    rows = [job(db, i) for i in ids]
    assert [r["halt_reason"] for r in rows] == [None] * 40
    assert {r["stage"] for r in rows} == {"done"}
    assert clock.now() - rows[-1]["state_entered_at"] < 80  # it did wait that long


def test_d3_backlog_is_never_stuck_workers_off_longer_than_the_limit(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain()
    ids = add_jobs(db, 5, clock.now())
    clock.advance(settings.foreign_work_limit * 3)  # workers off for days
    executor = Executor(db, clock, settings)
    while executor.run_once(domain, "default"):
        pass
    assert [job(db, i)["stage"] for i in ids] == ["done"] * 5
    assert all(job(db, i)["halted_at"] is None for i in ids)


def test_d6_hundred_postpones_keep_state_entered_at_and_the_stuck_countdown(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    # A failure first, so that the postpones have a failure count to reset.
    outcomes: Iterator[Outcome] = iter([Fail("provider busy"), *[Postpone(30.0)] * 100])
    domain = make_domain(new=lambda ctx: next(outcomes))
    (jid,) = add_jobs(db, 1, clock.now())
    entered = job(db, jid)["state_entered_at"]
    executor = Executor(db, clock, settings)
    assert executor.run_once(domain, "default")
    row = job(db, jid)
    assert (row["attempts"], row["stage"], row["state_entered_at"]) == (1, "new", entered)
    clock.advance(row["retry_at"] - clock.now())  # ≤ retry_base: the pause of one failure
    for _ in range(100):
        assert executor.run_once(domain, "default")
        row = job(db, jid)
        assert row["state_entered_at"] == entered and row["stage"] == "new"
        assert row["attempts"] == 0 and row["claim_token"] is None
        assert not executor.run_once(domain, "default")  # retry pause holds
        clock.advance(30)
    # Up to 2 s + 100 x 30 s = 3002 s in stage; 601 s more passes own_work_limit (3600 s)
    # only if the countdown was never reset by the postpones.
    assert clock.now() - entered <= 3000 + settings.retry_base
    clock.advance(601)
    assert executor.run_once(domain, "default")
    assert job(db, jid)["halt_reason"] == "stuck"


def test_d7_claim_returns_the_id_and_the_step_reads_the_record(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    seen: list[dict[str, Any]] = []

    def reads(ctx: StepContext) -> Outcome:
        seen.append(dict(ctx.record))
        return Advance()

    domain = make_domain(new=reads)
    (jid,) = add_jobs(db, 1, clock.now())
    executor = Executor(db, clock, settings)
    claim = executor.claim(domain, "default")
    assert claim is not None and claim.record_id == jid
    assert set(vars(claim)) == {"record_id", "token"}
    executor.run_claimed(domain, claim)
    assert seen[0]["title"] == "job 0" and seen[0]["claim_token"] == claim.token


def test_d8_zero_workers_is_legal_and_records_wait(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain()
    (jid,) = add_jobs(db, 1, clock.now())
    pool = WorkerPool(db, [domain], {"default": 0}, clock=clock, settings=settings)
    pool.start()
    time.sleep(0.3)
    pool.stop()
    assert job(db, jid)["stage"] == "new"
    pool = WorkerPool(db, [domain], {"default": 3}, clock=clock, settings=settings)
    pool.start()
    deadline = time.monotonic() + 20
    while job(db, jid)["stage"] != "done" and time.monotonic() < deadline:
        time.sleep(0.05)
    pool.stop()
    assert job(db, jid)["stage"] == "done"


def test_d11_stages_declared_once_and_every_non_terminal_stage_is_claimable(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    with pytest.raises(DeclarationError):
        Domain("bad", jobs, [Stage("new"), Stage("done")], [jobs.c.sort_value], frozenset())
    with pytest.raises(DeclarationError):
        Domain("bad", jobs, [Stage("new", default_step)], [jobs.c.sort_value], frozenset())
    domain = make_domain(new_lane="short", waiting_lane="long")
    claimed = []
    for stage in domain.stages:
        if stage.terminal:
            continue
        with db.begin() as conn:
            conn.execute(jobs.delete())
        add_jobs(db, 1, clock.now(), stage=stage.name)
        claim = Executor(db, clock, settings).claim(domain, stage.lane)
        assert claim is not None, stage.name
        claimed.append(stage.name)
    assert claimed == ["new", "waiting"]
    assert domain.lanes == ["short", "long"]


def test_d13_metrics_are_labelled_by_stage_and_outcome_not_worker(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain(waiting_lane="elsewhere")
    add_jobs(db, 2, clock.now())

    def sample(stage: str) -> float:
        return (
            REGISTRY.get_sample_value(
                "conveyor_step_outcomes_total",
                {"domain": "jobs", "stage": stage, "outcome": "advanced"},
            )
            or 0.0
        )

    before = sample("new")
    executor = Executor(db, clock, settings)
    executor.run_once(domain, "default")
    executor.run_once(domain, "default")
    assert sample("new") == before + 2
    labelled = [
        s
        for metric in REGISTRY.collect()
        if metric.name.startswith("conveyor_")
        for s in metric.samples
        if s.labels
    ]
    assert any(s.labels.get("stage") == "new" for s in labelled)  # the loop has work to see
    for s in labelled:
        assert "worker" not in s.labels and "thread" not in s.labels


def test_d14_event_journal_keeps_history_with_origins(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    outcomes: Iterator[Outcome] = iter([Fail("flaky"), Advance()])
    domain = make_domain(new=lambda ctx: next(outcomes), waiting=lambda ctx: Halt(JobHalt.X, "y"))
    (jid,) = add_jobs(db, 1, clock.now())
    executor = Executor(db, clock, settings)
    executor.run_once(domain, "default")
    clock.advance(100)
    executor.run_once(domain, "default")
    executor.run_once(domain, "default")
    resume(db, domain, jid, clock=clock)
    got = [(e["stage"], e["outcome"], e["origin"]) for e in events_of(db, jid)]
    assert got == [
        ("new", "failed", "pipeline"),
        ("new", "advanced", "pipeline"),
        ("waiting", "halted", "pipeline"),
        ("waiting", "resumed", "human"),
    ]
    assert events_of(db, jid)[0]["outcome_text"] == "flaky"


def test_failure_backs_off_with_jitter_then_halts_attempts_exhausted(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain(new=lambda ctx: Fail("boom"))
    (jid,) = add_jobs(db, 1, clock.now())
    executor = Executor(db, clock, settings)
    for attempt in (1, 2):
        executor.run_once(domain, "default")
        row = job(db, jid)
        pause = row["retry_at"] - clock.now()
        ceiling = settings.retry_base * 2 ** (attempt - 1)
        assert row["attempts"] == attempt and ceiling / 2 <= pause <= ceiling
        assert not executor.run_once(domain, "default")
        clock.advance(pause)
    executor.run_once(domain, "default")
    row = job(db, jid)
    assert row["halt_reason"] == "attempts_exhausted" and "boom" in row["halt_error"]


def test_heartbeat_extends_the_lease_only_while_the_claim_holds(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    observed: dict[str, Any] = {}

    def long_step(ctx: StepContext) -> Outcome:
        clock.advance(50)
        ctx.heartbeat()
        observed["extended"] = job(db, ctx.claim.record_id)["claim_expires_at"]
        with db.begin() as conn:  # a human resume/re-claim takes the record away
            conn.execute(update(jobs).values(claim_token="someone-else"))
        try:
            ctx.heartbeat()
        except Exception as exc:
            observed["error"] = type(exc).__name__
            raise
        return Advance()

    domain = make_domain(new=long_step, new_lease=60)
    (jid,) = add_jobs(db, 1, clock.now())
    Executor(db, clock, settings).run_once(domain, "default")
    assert observed["extended"] == pytest.approx(clock.now() + 60)
    assert observed["error"] == "ClaimLost"
    assert job(db, jid)["stage"] == "new"


def test_pool_stop_releases_claims_of_long_steps_at_once(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    started = threading.Event()

    def long_step(ctx: StepContext) -> Outcome:
        started.set()
        while True:
            ctx.check()
            time.sleep(0.01)

    domain = make_domain(new=long_step, heartbeat=True, new_lease=3600)
    (jid,) = add_jobs(db, 1, clock.now())
    pool = WorkerPool(db, [domain], {"default": 1}, clock=clock, settings=settings)
    pool.start()
    assert started.wait(10)
    pool.stop()
    row = job(db, jid)
    assert row["claim_token"] is None and row["stage"] == "new"
    assert Executor(db, clock, settings).claim(domain, "default") is not None


def test_d16_credentials_never_reach_outcome_texts_events_or_logs(
    db: Engine, clock: FakeClock, settings: PipelineSettings, caplog: pytest.LogCaptureFixture
) -> None:
    leak = (
        "POST https://alice:s3cr3t-pw@asr.example/v1 failed; Authorization: Bearer abcdef123456; "
        "retry with api_key=KEY-987654 token: tok_55555"
    )

    def fails(ctx: StepContext) -> Outcome:
        raise RuntimeError(leak)

    domain = make_domain(new=fails, waiting=lambda ctx: Halt(JobHalt.PROVIDER, leak))
    a, b = add_jobs(db, 2, clock.now())
    with db.begin() as conn:
        conn.execute(update(jobs).where(jobs.c.id == b).values(stage="waiting"))
    executor = Executor(db, clock, settings)
    with caplog.at_level(logging.DEBUG):
        executor.run_once(domain, "default")
        executor.run_once(domain, "default")
    texts = [e["outcome_text"] for e in events_of(db, a) + events_of(db, b)]
    texts += [job(db, b)["halt_error"], caplog.text]
    for secret in ("s3cr3t-pw", "abcdef123456", "KEY-987654", "tok_55555"):
        assert all(secret not in (t or "") for t in texts), secret
    assert "asr.example" in texts[0]  # the readable part stays
