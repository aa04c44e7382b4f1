"""The audio pipeline end to end on the real corpus, on SQLite and PostgreSQL.

Every speech clip reaches ``done`` with a word error rate within the MANIFEST's faster-whisper
baseline + 0.1 (jfk.wav exactly right, the Russian clips in Russian); every broken or non-audio
file is halted with a readable reason while the workers carry on; silence and noise give an
empty transcript flagged ``no_speech``. Also D12 (attempt before call) and P7 on real records.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import jiwer
import pytest
from sqlalchemy import Engine, func, select, update

from conveyor.audio import queries
from conveyor.audio.cards import transcript_of
from conveyor.audio.intake import accept_audio
from conveyor.config import Settings
from conveyor.db.tables import audio_records, files, recognition_attempts
from conveyor.errors import RejectedInput
from conveyor.providers import RecognitionRequest, Submission
from conveyor.runtime import Runtime
from tests.support.s3server import S3Server
from tests.support.stored import object_keys, stored_bytes

SPEECH: dict[str, tuple[str, float]] = {
    "jfk.wav": (
        "and so my fellow americans ask not what your country can do for you "
        "ask what you can do for your country",
        0.0,
    ),
    "jfk.mp3": (
        "and so my fellow americans ask not what your country can do for you "
        "ask what you can do for your country",
        0.0,
    ),
    "jfk.m4a": (
        "and so my fellow americans ask not what your country can do for you "
        "ask what you can do for your country",
        0.0,
    ),
    "goforward.raw": ("go forward ten meters", 0.25),
    "sense_and_sensibility_0880.wav": ("he was not an ill disposed young man", 0.0),
    "cards_005.wav": ("eight of spades four of clubs seven of hearts", 0.444),
    "LDC93S1.opus": ("she had your dark suit in greasy wash water all year", 0.273),
    "LDC93S1_vorbis_8k.ogg": ("she had your dark suit in greasy wash water all year", 0.364),
    "LDC93S1.flac": ("she had your dark suit in greasy wash water all year", 0.364),
    "LDC93S1_8k_mono.wav": ("she had your dark suit in greasy wash water all year", 0.364),
    "LDC93S1_44k_stereo.wav": ("she had your dark suit in greasy wash water all year", 0.364),
    "ru_deepspeech.wav": ("бедняга ребят на его месте должен был быть я", 0.111),
    "ru_neural_networks.wav": ("нейронные сети это хорошо", 0.25),
}
NO_SPEECH = ["silence_1s.wav", "noise_no_speech_10s.wav"]
BROKEN = {
    "header_only_null.wav": "empty_audio",
    "corrupt_bad_header.wav": "undecodable",
    "corrupt_evil_chunks.wav": "undecodable",
    "corrupt_awful_samplerate.wav": "bad_sample_rate",
    "not_audio_text.wav": "not_audio",
}


def normalize_words(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s']", " ", text.lower()).split())


def make_runtime(
    engine: Engine, tmp_path: Path, storage: dict[str, Any] | None = None, **pipeline: Any
) -> Runtime:
    settings = Settings(
        storage={"root": tmp_path / "data", **(storage or {})},  # type: ignore[arg-type]
        pipeline={"workers": 2, "poll_interval": 0.1, "retry_base": 0.2, **pipeline},  # type: ignore[arg-type]
        transcription={"poll_delay": 0.3},  # type: ignore[arg-type]
    )
    return Runtime(settings, engine=engine)


def wait_settled(runtime: Runtime, ids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with runtime.engine.connect() as conn:
            open_ = conn.execute(
                select(func.count())
                .select_from(audio_records)
                .where(
                    audio_records.c.id.in_(ids),
                    audio_records.c.stage != "done",
                    audio_records.c.halted_at.is_(None),
                )
            ).scalar_one()
        if open_ == 0:
            return
        time.sleep(0.25)
    raise AssertionError("records did not settle in time")


@pytest.mark.slow
def test_corpus_through_the_pipeline(
    engine: Engine, tmp_path: Path, corpus: Path, request: pytest.FixtureRequest
) -> None:
    """The whole audio corpus, end to end: on SQLite with a folder, and on PostgreSQL with an
    S3 bucket (a real moto server): the deployment shape of several hosts."""
    storage: dict[str, Any] = {}
    if engine.dialect.name == "postgresql":
        server: S3Server = request.getfixturevalue("s3_server")
        storage = server.storage_settings(server.bucket(), "audio-corpus")
    runtime = make_runtime(engine, tmp_path, storage)
    audio = corpus / "audio"
    names = [*SPEECH, *NO_SPEECH, *BROKEN, "stereo_two_speakers.wav"]
    originals = {n: (audio / n).read_bytes() for n in names}
    ids: dict[str, int] = {}
    for name in names:
        ids[name] = accept_audio(
            runtime.engine,
            runtime.store,
            runtime.clock,
            audio / name,
            owner="ann",
            raw_pcm=name.endswith(".raw"),
            keep_duplicate=True,
        )
    pool = runtime.pool()
    pool.start()
    try:
        wait_settled(runtime, list(ids.values()), timeout=900)
    finally:
        pool.stop()
    problems: list[str] = []
    with runtime.engine.connect() as conn:
        for name, rid in ids.items():
            row = queries.record_by_id(conn, rid)
            assert row is not None
            text = transcript_of(conn, rid)
            if name in BROKEN:
                if row["halt_reason"] != BROKEN[name] or not row["halt_error"]:
                    problems.append(f"{name}: {row['stage']} {row['halt_reason']}")
                elif row["stage"] != "uploaded":
                    problems.append(f"{name}: halted at {row['stage']}")
                continue
            if row["stage"] != "done":
                problems.append(f"{name}: {row['stage']} {row['halt_reason']} {row['halt_error']}")
                continue
            assert text is not None
            if name in NO_SPEECH:
                if text["body"] != "" or not row["no_speech"]:
                    problems.append(f"{name}: expected no speech, got {text['body']!r}")
                continue
            if name not in SPEECH:
                continue
            reference, baseline = SPEECH[name]
            wer = jiwer.wer(reference, normalize_words(text["body"]))
            if wer > baseline + 0.1:
                problems.append(f"{name}: WER {wer:.3f} > {baseline} + 0.1: {text['body']!r}")
            if name == "jfk.wav" and text["body"] != (
                "And so my fellow Americans, ask not what your country can do for you, "
                "ask what you can do for your country."
            ):
                problems.append(f"jfk.wav not exactly right: {text['body']!r}")
            if name.startswith("ru_") and (
                row["detected_language"] != "ru" or not re.search("[а-я]", text["body"].lower())
            ):
                problems.append(f"{name}: not Russian: {text['body']!r}")
            if not text["segments"] or text["segments"][0]["end"] <= 0:
                problems.append(f"{name}: no timed segments")
        # The originals are kept byte for byte, including for halted records.
        for name, rid in ids.items():
            row = queries.record_by_id(conn, rid)
            assert row is not None
            key = conn.execute(
                select(files.c.key).where(files.c.id == row["original_file_id"])
            ).scalar_one()
            if stored_bytes(runtime.store, key) != originals[name]:
                problems.append(f"{name}: original changed")
        journal = set(conn.execute(select(files.c.key)).scalars())
    assert problems == []
    # Every stored object has its journal row and every row its object (M1).
    stored = {k for prefix in ("uploads", "audio") for k in object_keys(runtime.store, prefix)}
    assert stored == journal


def test_empty_upload_is_refused_and_nothing_is_written(engine: Engine, tmp_path: Path) -> None:
    runtime = make_runtime(engine, tmp_path)
    empty = tmp_path / "empty.ogg"
    empty.write_bytes(b"")
    with pytest.raises(RejectedInput) as caught:
        accept_audio(
            runtime.engine, runtime.store, runtime.clock, empty, owner="ann", keep_duplicate=True
        )
    assert caught.value.reason == "empty_file"
    with runtime.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(files)).scalar_one() == 0
        assert conn.execute(select(func.count()).select_from(audio_records)).scalar_one() == 0
    assert [p for p in (tmp_path / "data").rglob("*") if p.is_file()] == []


def test_d12_attempt_row_is_written_before_the_provider_call_and_never_twice(
    engine: Engine, tmp_path: Path, corpus: Path
) -> None:
    runtime = make_runtime(engine, tmp_path)
    rid = accept_audio(
        runtime.engine,
        runtime.store,
        runtime.clock,
        corpus / "audio" / "sense_and_sensibility_0880.wav",
        owner="ann",
        keep_duplicate=True,
    )
    domain = runtime.audio
    executor = runtime.pool({}).executor
    seen: list[int] = []
    provider = runtime.provider
    real_submit = provider.submit

    def observing_submit(
        audio: Path, *, operation_id: str, request: RecognitionRequest
    ) -> Submission:
        with runtime.engine.connect() as conn:
            rows = conn.execute(
                select(recognition_attempts).where(
                    recognition_attempts.c.operation_id == operation_id
                )
            ).all()
        seen.append(len(rows))
        return real_submit(audio, operation_id=operation_id, request=request)

    provider.submit = observing_submit  # type: ignore[method-assign]
    assert executor.run_once(domain, "audio")  # normalize
    assert executor.run_once(domain, "audio")  # submit
    assert seen == [1]  # the attempt row existed when the provider was called
    # Pretend the worker died after the provider call but before advancing: the record is
    # back at "normalized" with its attempt "started". The next submit must not start another.
    with runtime.engine.begin() as conn:
        conn.execute(update(audio_records).values(stage="normalized"))
    assert executor.run_once(domain, "audio")
    with runtime.engine.connect() as conn:
        attempts = queries.attempts_of(conn, rid)
        row = queries.record_by_id(conn, rid)
    assert len(attempts) == 1 and seen == [1]
    assert row is not None and row["stage"] == "submitted"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        executor.run_once(domain, "audio")
        with runtime.engine.connect() as conn:
            row = queries.record_by_id(conn, rid)
        assert row is not None
        if row["stage"] == "done" or row["halted_at"] is not None:
            break
        time.sleep(0.3)
    assert row["stage"] == "done", dict(row)


def test_p7_owner_title_edit_during_the_pipeline_survives(
    engine: Engine, tmp_path: Path, corpus: Path
) -> None:
    runtime = make_runtime(engine, tmp_path)
    rid = accept_audio(
        runtime.engine,
        runtime.store,
        runtime.clock,
        corpus / "audio" / "silence_1s.wav",
        owner="ann",
        title="before",
        keep_duplicate=True,
    )
    executor = runtime.pool({}).executor
    assert executor.run_once(runtime.audio, "audio")  # normalize
    with runtime.engine.begin() as conn:
        assert queries.update_owner_fields(conn, rid, "ann", {"title": "mine", "brief": "b"})
    while executor.run_once(runtime.audio, "audio"):
        pass
    with runtime.engine.connect() as conn:
        row = queries.record_by_id(conn, rid)
    assert row is not None and row["stage"] == "done"
    assert (row["title"], row["brief"], row["owner"]) == ("mine", "b", "ann")


def test_p9_resume_at_submitted_gives_recognition_a_fresh_set_of_tries(
    engine: Engine, tmp_path: Path, corpus: Path
) -> None:
    runtime = make_runtime(engine, tmp_path, max_attempts=2, retry_base=0.05, retry_max=0.1)
    rid = accept_audio(
        runtime.engine,
        runtime.store,
        runtime.clock,
        corpus / "audio" / "sense_and_sensibility_0880.wav",
        owner="ann",
        keep_duplicate=True,
    )
    # A language the recognizer refuses makes every recognition attempt fail.
    with runtime.engine.begin() as conn:
        conn.execute(update(audio_records).values(language="xx"))
    executor = runtime.pool({}).executor

    def run_until_settled() -> Any:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            executor.run_once(runtime.audio, "audio")
            with runtime.engine.connect() as conn:
                row = queries.record_by_id(conn, rid)
            assert row is not None
            if row["stage"] == "done" or row["halted_at"] is not None:
                return row
            time.sleep(0.1)
        raise AssertionError("record did not settle")

    row = run_until_settled()
    assert (row["stage"], row["halt_reason"]) == ("submitted", "attempts_exhausted")
    with runtime.engine.connect() as conn:
        assert len(queries.attempts_of(conn, rid)) == 2
    from conveyor.pipeline import resume

    with runtime.engine.begin() as conn:
        conn.execute(update(audio_records).values(language="en"))
    assert resume(runtime.engine, runtime.audio, rid, clock=runtime.clock) == "submitted"
    row = run_until_settled()
    assert row["stage"] == "done", dict(row)
    with runtime.engine.connect() as conn:
        attempts = queries.attempts_of(conn, rid)
    assert [a["state"] for a in attempts] == ["failed", "failed", "done"]


def test_d2_raw_response_is_a_stored_object_and_never_re_requested(
    engine: Engine, tmp_path: Path, corpus: Path
) -> None:
    runtime = make_runtime(engine, tmp_path)
    rid = accept_audio(
        runtime.engine,
        runtime.store,
        runtime.clock,
        corpus / "audio" / "sense_and_sensibility_0880.wav",
        owner="ann",
        keep_duplicate=True,
    )
    executor = runtime.pool({}).executor
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        executor.run_once(runtime.audio, "audio")
        with runtime.engine.connect() as conn:
            row = queries.record_by_id(conn, rid)
        assert row is not None
        if row["stage"] == "done" or row["halted_at"] is not None:
            break
        time.sleep(0.2)
    assert row is not None and row["stage"] == "done"
    with runtime.engine.connect() as conn:
        (attempt,) = queries.attempts_of(conn, rid)
        raw_row = (
            conn.execute(select(files).where(files.c.id == attempt["raw_response_file_id"]))
            .mappings()
            .one()
        )
    assert raw_row["mime_type"] == "application/json"
    assert stored_bytes(runtime.store, raw_row["key"])
    # The provider has forgotten the operation; finishing again reads only our stored object.
    assert runtime.provider.poll(attempt["operation_id"]).state == "unknown"
    with runtime.engine.begin() as conn:
        conn.execute(update(audio_records).values(stage="transcribed"))
    assert executor.run_once(runtime.audio, "audio")
    with runtime.engine.connect() as conn:
        row = queries.record_by_id(conn, rid)
        text = transcript_of(conn, rid)
    # Finished again: on to the stage after ``transcribed`` (``done``, or an optional one).
    assert row is not None and row["stage"] == runtime.audio.next_stage("transcribed").name
    assert text is not None and "young man" in text["body"]


def test_collect_sees_the_local_result_at_once_whatever_the_poll_delay(
    engine: Engine, tmp_path: Path, corpus: Path
) -> None:
    """The local recognizer is waited on while it works (LongPolling), not polled on a timer:
    with a poll delay of 60 s, jfk.wav moves from ``submitted`` to ``transcribed`` within seconds
    of its recognition ending, and a stopping pool is not held by the wait."""
    settings = Settings(
        storage={"root": tmp_path / "data"},  # type: ignore[arg-type]
        pipeline={"workers": 2, "poll_interval": 0.1},  # type: ignore[arg-type]
        transcription={"poll_delay": 60.0},  # type: ignore[arg-type]
    )
    runtime = Runtime(settings, engine=engine)
    pool = runtime.pool()
    pool.start()
    try:
        rid = accept_audio(
            runtime.engine,
            runtime.store,
            runtime.clock,
            corpus / "audio" / "jfk.wav",
            owner="ann",
            keep_duplicate=True,
        )
        runtime.notifier.publish()
        wait_settled(runtime, [rid], timeout=120)
        with runtime.engine.connect() as conn:
            events = {
                (e["stage"], e["outcome"]): float(e["created_at"])
                for e in queries.events_of(conn, rid)
            }
        submitted = events[("normalized", "advanced")]
        transcribed = events[("submitted", "advanced")]
        # jfk.wav takes a few seconds to recognise; a timer would have come back after 60 s.
        assert transcribed - submitted < 50
        log = (tmp_path / "data").rglob("slot-0.log")
        recognised = [
            float(m) for f in log for m in re.findall(r"recognised in ([\d.]+)s", f.read_text())
        ]
        # The margin covers handing the result over on a loaded machine (1.2 s were seen at a
        # load of 12 on two cores), far below the poll delay a timer would cost.
        assert recognised and transcribed - submitted < recognised[-1] + 5.0
        # A worker waiting on a recording gives it back when the pool stops, without delay.
        second = accept_audio(
            runtime.engine,
            runtime.store,
            runtime.clock,
            corpus / "audio" / "jfk.mp3",
            owner="ann",
            keep_duplicate=True,
        )
        runtime.notifier.publish()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with runtime.engine.connect() as conn:
                row = queries.record_by_id(conn, second)
            if row is not None and row["stage"] == "submitted" and row["claim_token"]:
                break
            time.sleep(0.05)
        stopping = time.monotonic()
    finally:
        pool.stop()
    assert time.monotonic() - stopping < 5
    with runtime.engine.connect() as conn:
        row = queries.record_by_id(conn, second)
    assert row is not None and row["claim_token"] is None and row["halted_at"] is None
