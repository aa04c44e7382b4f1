"""SpeechKit v3 over real HTTP against a loopback server built from the published API, through the
whole audio pipeline on SQLite and PostgreSQL, on a fake clock.

D12: a submit whose answer is lost is never repeated on its own; D2: the raw stream is stored
before parsing; D16: the key appears nowhere we store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from conveyor.audio.cards import transcript_of
from conveyor.errors import ConfigError
from conveyor.pipeline import resume
from conveyor.providers import RecognitionRequest
from conveyor.providers.backends.speechkit import SpeechKitSettings
from conveyor.providers.speechkit import SpeechKitProvider, iter_stream
from conveyor.testing import FakeClock
from tests.support.loopback import KEY, Loopback, SpeechKitState, speechkit_server
from tests.support.remote import (
    attempts,
    drive,
    everything_stored,
    ingest,
    make_runtime,
    record,
)


@pytest.fixture
def server() -> Iterator[Loopback]:
    loopback = speechkit_server()
    yield loopback
    loopback.close()


def state_of(server: Loopback) -> SpeechKitState:
    state: SpeechKitState = server.state
    return state


def provider_for(
    server: Loopback,
    tmp_path: Path,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    **extra: object,
) -> SpeechKitProvider:
    monkeypatch.setenv("SPEECHKIT_API_KEY", KEY)
    settings = SpeechKitSettings(
        endpoint=server.url,
        operation_endpoint=server.url,
        timeout=5.0,
        **extra,  # type: ignore[arg-type]
    )
    return SpeechKitProvider(settings, tmp_path / "sk", clock=clock)


def test_d2_d16_happy_path_ru_maps_to_ru_ru_and_the_stream_is_stored(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = make_runtime(
        engine, tmp_path, provider_for(server, tmp_path, clock, monkeypatch), clock
    )
    rid = ingest(runtime, corpus / "audio" / "ru_neural_networks.wav", language="ru")
    row, pauses = drive(runtime, clock, rid)
    assert row["stage"] == "done", dict(row)
    assert row["detected_language"] == "ru"
    state = state_of(server)
    assert state.submits == 1
    (op,) = state.operations.values()
    model = op.request["recognitionModel"]
    assert model["languageRestriction"] == {
        "restrictionType": "WHITELIST",
        "languageCode": ["ru-RU"],
    }
    assert "content" in op.request and "uri" not in op.request
    (attempt,) = attempts(runtime, rid)
    assert attempt["operation_id"] == op.id  # the provider's id, not ours
    assert attempt["state"] == "done" and attempt["source_url"] == "inline"
    from conveyor.audio.cards import transcript_of

    with runtime.engine.connect() as conn:
        text = transcript_of(conn, rid)
    assert text is not None and text["body"] == "Привет мир."  # the refined (normalised) final
    assert text["segments"][0]["start"] == 0.0 and text["segments"][0]["end"] == 1.8
    # The first check waits about 10 s per minute of audio (at least 5 s).
    assert pauses and pauses[0] >= 5.0
    assert KEY not in everything_stored(runtime)


def test_d12_lost_answer_after_submit_halts_and_is_never_resubmitted_on_its_own(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = make_runtime(
        engine, tmp_path, provider_for(server, tmp_path, clock, monkeypatch), clock
    )
    state = state_of(server)
    state.lose_next_submit_answer = True
    rid = ingest(runtime, corpus / "audio" / "jfk.wav")
    row, _ = drive(runtime, clock, rid)
    assert (row["stage"], row["halt_reason"]) == ("normalized", "submit_unknown")
    assert "resume" in row["halt_error"] and "billed twice" in row["halt_error"]
    assert state.submits == 1  # the provider did start (and bill) one operation
    (attempt,) = attempts(runtime, rid)
    assert attempt["state"] == "submit_unknown"
    # Nothing more happens until a person decides.
    clock.advance(7200)
    row, _ = drive(runtime, clock, rid, steps=5)
    assert state.submits == 1 and row["halt_reason"] == "submit_unknown"
    # The operator resumes: one new submit, then done.
    resume(runtime.engine, runtime.audio, rid, clock=runtime.clock)
    row, _ = drive(runtime, clock, rid)
    assert row["stage"] == "done", dict(row)
    assert state.submits == 2
    assert [a["state"] for a in attempts(runtime, rid)] == ["submit_unknown", "done"]


def test_d12_a_worker_killed_mid_submit_halts_instead_of_paying_twice(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The attempt row exists but the worker died before writing the provider's answer."""
    provider = provider_for(server, tmp_path, clock, monkeypatch)
    runtime = make_runtime(engine, tmp_path, provider, clock)
    rid = ingest(runtime, corpus / "audio" / "jfk.wav")
    executor = runtime.pool({}).executor
    assert executor.run_once(runtime.audio, "audio")  # normalize

    def killed(*args: object, **kwargs: object) -> object:
        raise SystemExit("worker killed")

    monkeypatch.setattr(provider, "submit", killed)
    with pytest.raises(SystemExit):
        executor.run_once(runtime.audio, "audio")
    monkeypatch.undo()
    clock.advance(600)  # the lease runs out
    row, _ = drive(runtime, clock, rid, steps=5)
    assert row["halt_reason"] == "submit_unknown"
    assert state_of(server).submits == 0


def test_429_storm_honours_retry_after_and_starts_one_operation(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = make_runtime(
        engine, tmp_path, provider_for(server, tmp_path, clock, monkeypatch), clock
    )
    state = state_of(server)
    state.throttle = 6
    state.retry_after = "7"
    rid = ingest(runtime, corpus / "audio" / "jfk.wav")
    row, pauses = drive(runtime, clock, rid)
    assert row["stage"] == "done", dict(row)
    assert state.submits == 1
    assert sum(1 for p in pauses if p >= 7.0) >= 6  # every 429 waited its Retry-After
    assert row["halted_at"] is None


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("done_without_result", "provider_no_result"),
        ("result_expired", "result_expired"),
        ("error_before_done", "provider_error"),
    ],
)
def test_operation_outcomes_end_with_a_clear_halt_reason(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
    reason: str,
) -> None:
    runtime = make_runtime(
        engine, tmp_path, provider_for(server, tmp_path, clock, monkeypatch), clock
    )
    state = state_of(server)
    setattr(state, fault, True)
    rid = ingest(runtime, corpus / "audio" / "jfk.wav")
    row, _ = drive(runtime, clock, rid)
    assert (row["stage"], row["halt_reason"]) == ("submitted", reason), dict(row)
    assert row["halt_error"]
    assert state.submits == 1  # a failed operation is never paid for again on its own


def test_malformed_stream_is_kept_and_halts_unreadable(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = make_runtime(
        engine, tmp_path, provider_for(server, tmp_path, clock, monkeypatch), clock
    )
    state_of(server).malformed_stream = True
    rid = ingest(runtime, corpus / "audio" / "jfk.wav")
    row, _ = drive(runtime, clock, rid)
    assert (row["stage"], row["halt_reason"]) == ("transcribed", "unreadable_response")
    (attempt,) = attempts(runtime, rid)
    assert attempt["raw_response_file_id"] is not None  # kept (D2): never downloaded again


def test_provider_down_for_minutes_is_waited_out(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Down at submit (connection refused: nothing started) and again while polling."""
    runtime = make_runtime(
        engine, tmp_path, provider_for(server, tmp_path, clock, monkeypatch), clock
    )
    state = state_of(server)
    state.polls_until_done = 3
    rid = ingest(runtime, corpus / "audio" / "jfk.wav")
    server.down()
    start = clock.now()
    row, _ = drive(runtime, clock, rid, until=start + 300)
    assert row["stage"] == "normalized" and row["halted_at"] is None
    server.up()
    clock.advance(float(record(runtime, rid)["retry_at"]) - clock.now() + 0.001)
    assert runtime.pool({}).executor.run_once(runtime.audio, "audio")
    row = record(runtime, rid)
    assert row["stage"] == "submitted"
    server.down()
    row, _ = drive(runtime, clock, rid, until=clock.now() + 600)
    assert row["stage"] == "submitted" and row["halted_at"] is None
    server.up()
    row, _ = drive(runtime, clock, rid)
    assert row["stage"] == "done", dict(row)
    assert state.submits == 1
    assert {a["state"] for a in attempts(runtime, rid)} == {"refused", "done"}


def test_wrong_key_halts_provider_auth_without_quoting_it(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key_file = tmp_path / "speechkit.key"
    key_file.write_text("AQVN-wrong-key-value-123\n")
    provider = provider_for(server, tmp_path, clock, monkeypatch, key_file=key_file)
    runtime = make_runtime(engine, tmp_path, provider, clock)
    rid = ingest(runtime, corpus / "audio" / "jfk.wav")
    row, _ = drive(runtime, clock, rid)
    assert row["halt_reason"] == "provider_auth"
    assert "AQVN-wrong-key-value-123" not in everything_stored(runtime)


def test_poll_quota_per_hour_is_never_exceeded(
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = provider_for(server, tmp_path, clock, monkeypatch, poll_quota_per_hour=4)
    state = state_of(server)
    state.polls_until_done = 1000
    op = provider.submit(
        corpus / "audio" / "jfk.wav", operation_id="k", request=RecognitionRequest()
    ).operation_id
    results = [provider.poll(op) for _ in range(10)]
    assert state.checks == 4
    waits = [r.retry_after for r in results[4:]]
    assert all(w is not None and 3599 <= w <= 3600 for w in waits)
    clock.advance(3600)
    provider.poll(op)
    assert state.checks == 5


def test_poll_schedule_scales_with_duration_and_backs_off(
    tmp_path: Path, server: Loopback, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = provider_for(server, tmp_path, clock, monkeypatch)
    assert provider.poll_delay(600, 0) == 100  # 10 s per minute of audio
    assert provider.poll_delay(10, 0) == 5
    assert provider.poll_delay(10, 40) == 40
    assert provider.poll_delay(10, 4000) == 120
    assert provider.deadline(60) == 3600
    assert provider.deadline(10 * 3600) == 24 * 3600


def test_missing_credential_is_a_config_error_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPEECHKIT_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="SPEECHKIT_API_KEY"):
        SpeechKitProvider(SpeechKitSettings(), tmp_path)


def test_parse_concatenated_stream_with_two_channels(
    tmp_path: Path, server: Loopback, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.loopback import _recognition_stream

    state = SpeechKitState(
        two_channels=True, finals=[(0, 900, "left words", "en-US"), (1000, 2000, "more", "en-US")]
    )
    raw = _recognition_stream(state)
    assert len(list(iter_stream(raw))) == 16
    transcript = provider_for(server, tmp_path, clock, monkeypatch).parse(raw)
    assert [(s.channel, s.text) for s in transcript.segments] == [
        ("0", "Left words."),
        ("1", "Left words (right)."),
        ("0", "More."),
        ("1", "More (right)."),
    ]
    assert transcript.language == "en"
    with pytest.raises(ValueError, match="not a SpeechKit recognition stream"):
        provider_for(server, tmp_path, clock, monkeypatch).parse(b'{"result": {}} [1')


def test_past_its_deadline_an_operation_is_cancelled_then_halts_and_resume_submits_anew(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = provider_for(server, tmp_path, clock, monkeypatch)
    runtime = make_runtime(engine, tmp_path, provider, clock)
    state = state_of(server)
    state.polls_until_done = 10**6  # never finishes on its own
    rid = ingest(runtime, corpus / "audio" / "jfk.wav")
    start = clock.now()
    row, _ = drive(runtime, clock, rid, steps=400)
    assert (row["stage"], row["halt_reason"]) == ("submitted", "provider_timeout"), dict(row)
    assert clock.now() - start >= provider.deadline(11.0) == 3600
    assert state.cancels == 1 and state.submits == 1
    (cancelled,) = state.operations.values()
    assert cancelled.cancelled
    (attempt,) = attempts(runtime, rid)
    assert attempt["state"] == "failed" and "cancelled at its deadline" in attempt["error"]
    assert "so Conveyor cancelled it" in row["halt_error"]
    assert "code 1: Operation cancelled" in row["halt_error"]
    assert "submit the recording again" in row["halt_error"]
    # Resume: a new operation (the operator's choice, billed again), which now finishes.
    state.polls_until_done = 1
    resume(runtime.engine, runtime.audio, rid, clock=clock)
    row, _ = drive(runtime, clock, rid)
    assert row["stage"] == "done", dict(row)
    assert state.submits == 2 and state.cancels == 1
    assert [a["state"] for a in attempts(runtime, rid)] == ["failed", "done"]


def test_a_refused_cancel_halts_and_resume_keeps_waiting_for_the_same_operation(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = provider_for(server, tmp_path, clock, monkeypatch)
    runtime = make_runtime(engine, tmp_path, provider, clock)
    state = state_of(server)
    state.polls_until_done = 10**6
    state.cancellable = False
    rid = ingest(runtime, corpus / "audio" / "jfk.wav")
    row, _ = drive(runtime, clock, rid, steps=400)
    assert (row["stage"], row["halt_reason"]) == ("submitted", "provider_timeout"), dict(row)
    assert state.cancels == 1
    assert "may still run" in row["halt_error"] and "HTTP 400" in row["halt_error"]
    assert "keep waiting for the same operation" in row["halt_error"]
    (attempt,) = attempts(runtime, rid)
    assert attempt["state"] == "submitted"
    (operation,) = state.operations.values()
    operation.polls = 10**6  # it finishes after all
    resume(runtime.engine, runtime.audio, rid, clock=clock)
    row, _ = drive(runtime, clock, rid)
    assert row["stage"] == "done", dict(row)
    assert state.submits == 1  # never paid twice


def test_cancel_reads_the_operation_the_service_answers(
    tmp_path: Path, server: Loopback, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = provider_for(server, tmp_path, clock, monkeypatch)
    state = state_of(server)
    assert provider.cancel("e03nosuchoperation").state == "failed"
    server.down()
    unanswered = provider.cancel("e03nosuchoperation")
    assert unanswered.state == "running" and "no answer" in (unanswered.error or "")
    server.up()
    assert state.cancels == 0


@pytest.mark.parametrize("refine", [False, True])
def test_word_times_split_a_final_at_its_pause_and_time_each_part(
    engine: Engine,
    tmp_path: Path,
    corpus: Path,
    server: Loopback,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    refine: bool,
) -> None:
    """SpeechKit's own word times (``startTimeMs``/``endTimeMs``) land in the transcript: a final
    whose words pause for 9 s becomes two segments timed by their words, each word kept;
    a normalised refinement of a final that needs no split keeps its text and its words' span."""
    runtime = make_runtime(
        engine, tmp_path, provider_for(server, tmp_path, clock, monkeypatch), clock
    )
    state = state_of(server)
    state.refine = refine
    state.finals = [(0, 11000, "and so my fellow", "en-US"), (11500, 14000, "ask not", "en-US")]

    def said(text: str, start: int, end: int) -> dict[str, str]:
        return {"text": text, "startTimeMs": str(start), "endTimeMs": str(end)}

    state.words = {
        0: [
            said("and", 320, 600),
            said("so", 600, 900),
            said("my", 10100, 10300),
            said("fellow", 10300, 10900),
        ],
        1: [said("ask", 12_000, 12_400), said("not", 12_400, 13_100)],
    }
    rid = ingest(runtime, corpus / "audio" / "jfk.wav")
    row, _ = drive(runtime, clock, rid)
    assert row["stage"] == "done", dict(row)
    with runtime.engine.connect() as conn:
        text = transcript_of(conn, rid)
    assert text is not None
    timed = [(s["start"], s["end"], s["text"]) for s in text["segments"]]
    last = "Ask not." if refine else "ask not"
    assert timed == [(0.32, 0.9, "and so"), (10.1, 10.9, "my fellow"), (12.0, 13.1, last)]
    assert [w["text"] for w in text["segments"][0]["words"]] == ["and", "so"]
    assert text["segments"][1]["words"][0] == {
        "start": 10.1,
        "end": 10.3,
        "text": "my",
        "probability": None,
    }
    assert [w["text"] for w in text["segments"][2]["words"]] == ([] if refine else ["ask", "not"])
