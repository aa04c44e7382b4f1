"""The local provider's job lifecycle: idempotent submit (D12), process limit, crash, unknown ids,
and the parse rules that keep silence and noise from becoming sentences. Real recognizer processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

import conveyor.providers
from conveyor.config import TranscriptionSettings
from conveyor.providers import (
    LocalWhisperProvider,
    LongPolling,
    PollResult,
    RecognitionProvider,
    RecognitionRequest,
    Segment,
    Submission,
    Transcript,
)
from tests.support.needs import AUDIO_CORPUS

AUDIO = AUDIO_CORPUS
MODEL_CACHE = Path(tempfile.gettempdir()) / "conveyor-test-models"  # shared with the other modules
TIMEOUT = 120.0


def make_provider(
    work_dir: Path, processes: int = 1, hang_after: float | None = None
) -> LocalWhisperProvider:
    settings = TranscriptionSettings(processes=processes, threads=1, idle_exit=10)
    return LocalWhisperProvider(
        settings, work_dir, model_cache_dir=MODEL_CACHE, hang_after=hang_after
    )


def wait(provider: LocalWhisperProvider, operation_id: str) -> PollResult:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        result = provider.poll(operation_id)
        if result.state != "running":
            return result
        time.sleep(0.1)
    raise AssertionError(f"{operation_id} still running after {TIMEOUT}s")


def pid_of(job_dir: Path) -> int | None:
    try:
        return int(json.loads((job_dir / "pid.json").read_text(encoding="utf-8"))["pid"])
    except FileNotFoundError:
        return None


def test_public_surface() -> None:
    assert sorted(conveyor.providers.__all__) == [
        "BASE_MODEL_SHA256",
        "BASE_MODEL_SIZE",
        "LocalWhisperProvider",
        "LongPolling",
        "PollResult",
        "PollState",
        "ProviderBusy",
        "ProviderError",
        "ProviderRejected",
        "RecognitionProvider",
        "RecognitionRequest",
        "Segment",
        "Submission",
        "SubmitOutcomeUnknown",
        "Transcript",
        "resolve_model",
    ]
    for name in conveyor.providers.__all__:
        assert hasattr(conveyor.providers, name)


def test_poll_of_unknown_operation_is_unknown(tmp_path: Path) -> None:
    provider: RecognitionProvider = make_provider(tmp_path)  # also a static protocol check
    assert provider.name == "local"
    assert provider.model == "base"
    assert provider.poll("never-submitted") == PollResult("unknown")
    assert provider.poll("../escape") == PollResult("unknown")


def test_operation_id_must_be_a_plain_name(tmp_path: Path) -> None:
    provider = make_provider(tmp_path)
    for bad in ("", "../x", "a/b", ".hidden"):
        with pytest.raises(ValueError, match="operation id"):
            provider.submit(
                AUDIO / "silence_1s.wav", operation_id=bad, request=RecognitionRequest()
            )


@pytest.mark.usefixtures("audio_corpus")
def wait_taken(job_dir: Path) -> int:
    """The pid of the recognizer that took the job (waits for it to be taken)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        pid = pid_of(job_dir)
        if pid is not None:
            return pid
        time.sleep(0.05)
    raise AssertionError(f"{job_dir.name} was never taken")


def test_d12_submit_is_idempotent_and_a_warm_recognizer_takes_every_job(tmp_path: Path) -> None:
    """Two submits of one id make one job; one recognizer (processes = 1) loads the model once
    and runs both jobs; a fresh provider on the same work_dir (a restarted worker) collects."""
    work = tmp_path / "work"
    first = make_provider(work, processes=1)
    silence = AUDIO / "silence_1s.wav"

    submission = first.submit(silence, operation_id="op-a", request=RecognitionRequest())
    # The audio is copied into the job: the caller's file may be a working copy that goes.
    assert submission == Submission(
        operation_id="op-a", source_url=str(work / "op-a" / "input.wav")
    )
    assert (work / "op-a" / "input.wav").read_bytes() == silence.read_bytes()
    again = first.submit(silence, operation_id="op-a", request=RecognitionRequest(language="en"))
    assert again == submission
    assert json.loads((work / "op-a" / "job.json").read_text(encoding="utf-8"))["language"] is None
    first.submit(silence, operation_id="op-b", request=RecognitionRequest())
    assert first.poll("op-b").state == "running"

    restarted = make_provider(work, processes=1)
    assert wait(restarted, "op-a").state == "done"
    result_b = wait(restarted, "op-b")
    assert result_b.state == "done"
    assert restarted.parse(result_b.raw or b"").no_speech
    # One warm recognizer ran both: same process, the model loaded once.
    assert pid_of(work / "op-a") == pid_of(work / "op-b")
    log = (work / ".servers" / "slot-0.log").read_text()
    assert log.count("model loaded") == 1 and log.count("recognised in") == 2
    assert len(list((work / ".servers").glob("slot-*.json"))) == 1
    assert first.poll("op-a").state == "done"


@pytest.mark.usefixtures("audio_corpus")
def test_killed_recognizer_fails_its_job_with_reason_and_is_replaced(tmp_path: Path) -> None:
    provider = make_provider(tmp_path)
    provider.submit(AUDIO / "jfk.wav", operation_id="doomed", request=RecognitionRequest())
    pid = wait_taken(tmp_path / "doomed")
    assert provider.poll("doomed").state == "running"
    os.kill(pid, signal.SIGKILL)
    result = wait(provider, "doomed")
    assert result.state == "failed"
    assert result.error is not None
    assert "exited without a result" in result.error
    assert "SIGKILL" in result.error
    assert result.raw is None
    # The next job gets a fresh recognizer.
    provider.submit(AUDIO / "silence_1s.wav", operation_id="next", request=RecognitionRequest())
    assert wait(provider, "next").state == "done"
    assert pid_of(tmp_path / "next") != pid


@pytest.mark.usefixtures("audio_corpus")
def test_hung_recognizer_is_killed_its_job_fails_and_it_is_replaced(tmp_path: Path) -> None:
    provider = make_provider(tmp_path, hang_after=2.0)
    provider.submit(AUDIO / "jfk.wav", operation_id="stuck", request=RecognitionRequest())
    pid = wait_taken(tmp_path / "stuck")
    os.kill(pid, signal.SIGSTOP)  # alive but doing nothing: a hang
    try:
        result = wait(provider, "stuck")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert result.state == "failed"
    assert result.error is not None and "hung" in result.error
    assert not Path(f"/proc/{pid}/stat").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    fresh = make_provider(tmp_path)  # a normal limit again
    fresh.submit(AUDIO / "silence_1s.wav", operation_id="after", request=RecognitionRequest())
    assert wait(fresh, "after").state == "done"


@pytest.mark.usefixtures("audio_corpus")
def test_undecodable_input_polls_as_failed_with_recognizer_error(tmp_path: Path) -> None:
    provider = make_provider(tmp_path)
    provider.submit(AUDIO / "not_audio_text.wav", operation_id="text", request=RecognitionRequest())
    result = wait(provider, "text")
    assert result.state == "failed"
    assert result.error is not None
    assert result.error.startswith("recognizer failed: ")


@pytest.mark.usefixtures("audio_corpus")
def test_discard_kills_and_forgets(tmp_path: Path) -> None:
    provider = make_provider(tmp_path)
    provider.submit(AUDIO / "jfk.wav", operation_id="gone", request=RecognitionRequest())
    pid = wait_taken(tmp_path / "gone")
    provider.discard("gone")
    assert provider.poll("gone") == PollResult("unknown")
    assert not Path(f"/proc/{pid}").exists()


# -- parse: synthetic raw responses in the recognizer's own format --------------------------------


def raw(*segments: tuple[str, float, float], language: str = "en", ratio: float = 1.0) -> bytes:
    """A result.json with ``(text, no_speech_prob, avg_logprob)`` segments one second apart."""
    return json.dumps(
        {
            "language": language,
            "language_probability": 0.9,
            "duration": float(len(segments)),
            "segments": [
                {
                    "start": float(i),
                    "end": float(i + 1),
                    "text": text,
                    "no_speech_prob": nsp,
                    "avg_logprob": lp,
                    "compression_ratio": ratio,
                    "temperature": 0.0,
                }
                for i, (text, nsp, lp) in enumerate(segments)
            ],
        }
    ).encode()


def test_parse_keeps_speech_and_whisper_spacing(tmp_path: Path) -> None:
    provider = make_provider(tmp_path)
    transcript = provider.parse(raw((" Hello there.", 0.1, -0.3), (" General Kenobi.", 0.2, -0.4)))
    assert transcript == Transcript(
        text="Hello there. General Kenobi.",
        segments=(
            Segment(0.0, 1.0, "Hello there.", language="en"),
            Segment(1.0, 2.0, "General Kenobi.", language="en"),
        ),
        language="en",
        no_speech=False,
        languages=("en",),
    )


def test_parse_drops_segments_whisper_marks_as_non_speech(tmp_path: Path) -> None:
    provider = make_provider(tmp_path)
    transcript = provider.parse(raw((" Thank you.", 0.9, -1.5), (" Real words.", 0.7, -0.5)))
    assert transcript.text == "Real words."  # high no_speech_prob alone is not enough to drop
    assert provider.parse(raw((" Thank you.", 0.61, -1.01))).no_speech


def test_parse_drops_segments_every_fallback_temperature_failed(tmp_path: Path) -> None:
    """What Whisper gave on noise_no_speech_10s.wav in one run: random sampled text."""
    provider = make_provider(tmp_path)
    noise = (" A-a-a-a-a-a-a-a-a-a-a-a-a beta scuba.", 0.56, -1.096)
    assert provider.parse(raw(noise, ratio=2.23)).no_speech
    assert provider.parse(raw((" the the the the the the", 0.7, -0.2), ratio=2.5)).no_speech


def test_parse_never_keeps_a_loop_that_failed_at_every_temperature(tmp_path: Path) -> None:
    """A sentence said three times came back fourteen times: the decoder's compression check
    failed at every fallback temperature, and such a segment is never kept; the confident
    segments around it are."""
    provider = make_provider(tmp_path)
    loop = " Ask not what your country can do for you." * 14
    document = json.loads(raw((" First.", 0.01, -0.2), (loop, 0.01, -0.2), (" Last.", 0.01, -0.2)))
    document["segments"][1].update(compression_ratio=6.1, temperature=1.0)
    transcript = provider.parse(json.dumps(document).encode())
    assert transcript.text == "First. Last."
    assert [s.text for s in transcript.segments] == ["First.", "Last."]


def test_parse_keeps_a_sentence_said_again_in_a_window_that_failed(tmp_path: Path) -> None:
    """Whisper reports one compression ratio for its whole 30 s window: jfk.wav said twice in
    one window gave 2.48 on both segments. Each segment's own text is one saying, so both are
    kept (before, the recording came out as "no speech"); a segment that loops on its own is
    still dropped."""
    provider = make_provider(tmp_path)
    jfk = (
        " And so my fellow Americans, ask not what your country can do for you, ask what you can"
        " do for your country."
    )
    twice = provider.parse(raw((jfk, 0.02, -0.18), (jfk, 0.02, -0.18), ratio=2.48))
    assert not twice.no_speech
    assert [s.text for s in twice.segments] == [jfk.strip(), jfk.strip()]
    looped = provider.parse(raw((jfk, 0.02, -0.18), (jfk * 3, 0.02, -0.18), ratio=2.48))
    assert [s.text for s in looped.segments] == [jfk.strip()]


@pytest.mark.parametrize(
    "text", [" uh", " Oh", " Um, hmm...", " [Music]", " ♪", " ...", " Эм.", ""]
)
def test_parse_filler_only_is_no_speech(tmp_path: Path, text: str) -> None:
    provider = make_provider(tmp_path)
    assert provider.parse(raw((text, 0.1, -0.5))) == Transcript("", (), None, True)


def test_parse_filler_inside_speech_is_kept(tmp_path: Path) -> None:
    provider = make_provider(tmp_path)
    assert provider.parse(raw((" Um, take the umbrella.", 0.1, -0.3))).text == (
        "Um, take the umbrella."
    )


def test_parse_refuses_foreign_documents(tmp_path: Path) -> None:
    provider = make_provider(tmp_path)
    for bad in (b"not json", b"[]", b'{"segments": [{"text": "x"}]}'):
        with pytest.raises(ValueError, match="not a local recognizer result"):
            provider.parse(bad)


class _Stop(Exception):
    pass


@pytest.mark.usefixtures("audio_corpus")
def test_wait_holds_only_for_a_job_being_worked_on_and_ends_when_its_result_is_written(
    tmp_path: Path,
) -> None:
    """LongPolling: the job a free recognizer takes is waited on and seen within a moment of
    its result; a job queued behind a busy recognizer answers at once; ``check`` ends a wait."""
    provider = make_provider(tmp_path, processes=1)
    assert isinstance(provider, LongPolling)
    never = "never-submitted"
    assert provider.wait(never, 5.0, lambda: None) == PollResult("unknown")
    provider.submit(AUDIO / "jfk.wav", operation_id="first", request=RecognitionRequest())
    provider.submit(AUDIO / "jfk.mp3", operation_id="second", request=RecognitionRequest())
    # The recognizer may still be starting: "first" is the one it takes next, so it is waited on.
    before = time.monotonic()
    result = provider.wait("first", 0.3, lambda: None)
    assert result.state == "running"
    assert time.monotonic() - before >= 0.25
    wait_taken(tmp_path / "first")
    # Queued behind the busy recognizer: no worker is held, and the later in the queue, the
    # later the next look (a backlog of thousands is not polled thousands of times a second).
    provider.submit(AUDIO / "cards_005.wav", operation_id="third", request=RecognitionRequest())
    before = time.monotonic()
    second = provider.wait("second", TIMEOUT, lambda: None)
    third = provider.wait("third", TIMEOUT, lambda: None)
    assert time.monotonic() - before < 2.0
    assert second.state == third.state == "running"
    assert second.retry_after == 0.5 and third.retry_after == 1.0  # poll_delay 1 s, 1 recognizer
    # A check that raises (a stopping worker) ends the wait with its exception.
    looks: list[float] = []

    def stop_on_second_look() -> None:
        looks.append(time.monotonic())
        if len(looks) == 2:
            raise _Stop()

    with pytest.raises(_Stop):
        provider.wait("first", TIMEOUT, stop_on_second_look)
    assert looks[1] - looks[0] < 1.5  # checked about twice a second
    result = provider.wait("first", TIMEOUT, lambda: None)
    finished_at = time.time()
    assert result.state == "done" and result.raw is not None
    written_at = (tmp_path / "first" / "result.json").stat().st_mtime
    assert finished_at - written_at < 0.5, "the result was seen late"
    assert wait(provider, "second").state == "done"
    assert wait(provider, "third").state == "done"


def test_the_configured_language_is_taken_in_any_case(tmp_path: Path) -> None:
    """``[transcription] language = "EN"`` is ``en``, as a language given at upload is; a blank
    one is unset (detect)."""
    assert TranscriptionSettings(language=" EN ").language == "en"
    assert TranscriptionSettings(language="  ").language is None
    provider = LocalWhisperProvider(
        TranscriptionSettings(language="RU"), tmp_path / "work", model_cache_dir=MODEL_CACHE
    )
    assert provider.languages >= {"ru"}
