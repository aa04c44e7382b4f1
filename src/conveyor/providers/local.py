"""The ``local`` recognition provider: faster-whisper in long-lived recognizer processes.

Each operation is a job folder ``<work_dir>/<operation_id>/``::

    job.json      input path, language, hints, model folder, device, compute_type, threads, ...
    pid.json      {"pid", "start_ticks", "started_at", "slot"}: written by the recognizer that
                  took the job
    job.log       what the recognizer said about this job
    result.json   the raw response (see conveyor.providers.whisper_job), when done
    error.json    {"error": text}, when the recognizer caught an exception
    exit.json     {"returncode"} or {"hung_after"}: how the recognizer running it ended

Recognizers are warm: ``[transcription] processes`` of them (``<work_dir>/.servers/slot-N.json``)
each load the model once and take queued jobs, oldest first, until they have waited
``[transcription] idle_exit`` seconds for work. They run as
``python -m conveyor.providers.whisper_job --serve <work_dir> <slot> <idle_exit>`` in their own
session, apart from every worker: a crash, a hang or an out-of-memory kill of a recognizer never
takes a worker down, and a recognizer survives the worker that started it. A recognizer that
crashed is replaced at the next submit or poll (its job polls as failed with the exit status and
the log's last lines); one that has worked on a job for longer than the hang limit is killed and
replaced the same way (:mod:`conveyor.providers.supervisor`). ``<work_dir>/.models`` holds the
assembled bundled model.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from conveyor.config import TranscriptionSettings
from conveyor.errors import ConfigError
from conveyor.providers.base import (
    PollResult,
    RecognitionRequest,
    Segment,
    Submission,
    Transcript,
)
from conveyor.providers.gates import decoded_speech, only_filler
from conveyor.providers.supervisor import (
    JOB_FILE,
    PID_FILE,
    RecognizerSupervisor,
    finished,
    read_json,
    read_pid,
    result_written,
    write_job_file,
)
from conveyor.providers.timing import split_at_pauses, words_of
from conveyor.providers.whisper_model import resolve_model

__all__ = [
    "LocalWhisperProvider",
    "device_problem",
    "transcript_of_segments",
    "whisper_languages",
]

_MODELS_DIR = ".models"
# The audio of a job, copied into its folder at submit.
_INPUT = "input.wav"
# While waiting on a job (wait), how often its folder is looked at for a result, and how often
# the recognizer working on it is checked for life and hangs (a full poll), seconds.
_LOOK_EVERY = 0.01
_FULL_POLL_EVERY = 0.5
# The queue is read at most this often (seconds) by one provider: with a backlog of thousands,
# reading it per poll would cost more than the polls. A queued job is looked at no less often
# than every _MOST_QUEUED_DELAY seconds.
_QUEUE_FRESH = 0.25
_MOST_QUEUED_DELAY = 30.0
# Operation ids become folder names: no separators, no leading dot (dot names are ours).
_OPERATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


class LocalWhisperProvider:
    """Runs faster-whisper out of the worker's process (see the module docstring for the layout).

    Args:
        settings: ``[transcription]``; ``model``, ``device``, ``compute_type``, ``threads``,
            ``beam_size``, ``language`` (used when submit gets ``language=None``) and ``processes``.
        work_dir: folder of the job folders; created when missing. Share it between every worker
            of one installation so that they agree on the process limit.
        model_cache_dir: where the bundled ``base`` model is assembled; default
            ``<work_dir>/.models``.
        hang_after: seconds a job may run before its recognizer counts as hung; default
            max(600, 10 x the audio's length).

    Raises:
        ConfigError: the model cannot be resolved (see :func:`resolve_model`); at construction, so
            a misconfigured installation fails at start-up.
    """

    def __init__(
        self,
        settings: TranscriptionSettings,
        work_dir: Path,
        *,
        model_cache_dir: Path | None = None,
        hang_after: float | None = None,
    ) -> None:
        work_dir = work_dir.resolve()  # job processes run in their own folder
        self.name = "local"
        self.model = settings.model
        self._settings = settings
        self._work_dir = work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        self._model_path = resolve_model(
            settings.model,
            model_cache_dir if model_cache_dir is not None else work_dir / _MODELS_DIR,
        )
        self.languages = whisper_languages()
        if settings.language is not None and settings.language not in self.languages:
            from conveyor.config import setting_origin

            raise ConfigError(
                f"{setting_origin(('transcription', 'language'))}[transcription] language: "
                f"{settings.language!r} is not a language code Whisper knows; use an ISO 639-1 "
                "code such as en, de, ru, or leave it unset"
            )
        self._supervisor = RecognizerSupervisor(settings, work_dir, hang_after)
        self._queue_seen: tuple[float, int, dict[str, int]] | None = None
        # A job folder is keyed by the caller's id: a repeated submit finds it (D12).
        self.idempotent_submit = True
        self.hears_channels_apart = True

    # -- protocol -----------------------------------------------------------------------------

    def submit(self, audio: Path, *, operation_id: str, request: RecognitionRequest) -> Submission:
        """Queue recognition of ``audio`` under ``operation_id``; start a recognizer if none runs.

        Idempotent: a second submit with the same id starts nothing and returns the first input.

        Returns:
            The operation (the caller's id) and the absolute path of the audio file the
            recognizer reads.

        Raises:
            ValueError: ``operation_id`` is not 1-128 characters of ``[A-Za-z0-9_.-]`` starting
                with a letter or digit.
            FileNotFoundError: ``audio`` does not exist (on the first submit).
        """
        job_dir = self._job_dir(operation_id)
        with self._supervisor.locked():
            if not job_dir.is_dir():
                source = audio.resolve()
                if not source.is_file():
                    raise FileNotFoundError(f"no audio file at {source}")
                self._create_job(job_dir, operation_id, source, request)
            self._supervisor.ensure_recognizers()
            source_url = str(read_json(job_dir / JOB_FILE)["input"])
        return Submission(operation_id=operation_id, source_url=source_url)

    def poll(self, operation_id: str) -> PollResult:
        """Report an operation's state; also replaces dead recognizers while jobs wait.

        ``running`` covers queued and working; ``failed`` carries the recognizer's error, or, when
        its process is gone without a result, the exit code or signal and the log's last lines.
        """
        if not _OPERATION_ID.fullmatch(operation_id):
            return PollResult("unknown")
        job_dir = self._work_dir / operation_id
        with self._supervisor.locked():
            self._supervisor.ensure_recognizers()
            return self._supervisor.state(job_dir)

    def wait(self, operation_id: str, timeout: float, check: Callable[[], None]) -> PollResult:
        """Wait up to ``timeout`` seconds for a job a recognizer works on or is about to take
        (LongPolling).

        A job a free (or starting) recognizer takes next, or one already taken, is waited on:
        its folder is looked at every 10 ms (a few ``stat`` calls: nothing for the recognizer's
        CPUs to lose) and fully polled every 0.5 s, so a recognizer that died or hung is still
        noticed and replaced. A job queued behind busy recognizers answers at once
        (``running``) with ``retry_after`` growing with its place in the queue: ``poll_delay``
        x (1 + place / processes) / 2, at most 30 s, so a backlog of thousands is not polled
        thousands of times a second, and no worker is held for it.

        Raises:
            Exception: whatever ``check`` raises (the worker is stopping or lost its claim).
        """
        ends = time.monotonic() + timeout
        result = self.poll(operation_id)
        job_dir = self._work_dir / operation_id
        while result.state == "running":
            place = self._place(job_dir)
            if place is not None:
                later = self._settings.poll_delay * (1 + place / self._settings.processes) / 2
                return PollResult("running", retry_after=min(_MOST_QUEUED_DELAY, later))
            left = ends - time.monotonic()
            if left <= 0:
                break
            check()
            look_until = time.monotonic() + min(left, _FULL_POLL_EVERY)
            while time.monotonic() < look_until and not result_written(job_dir):
                time.sleep(_LOOK_EVERY)
            result = self.poll(operation_id)
        return result

    def _place(self, job_dir: Path) -> int | None:
        """None when a recognizer works on the job or a free one takes it next; otherwise how
        many queued jobs wait beyond the free recognizers before it (0: next in line)."""
        if (job_dir / PID_FILE).exists():
            return None
        now = time.monotonic()
        seen = self._queue_seen
        if seen is None or now - seen[0] > _QUEUE_FRESH or job_dir.name not in seen[2]:
            # Read again when old, or when the job is newer than the last reading.
            seen = self._queue_seen = (now, *self._queue())
        _, busy, order = seen
        ahead = order.get(job_dir.name)
        if ahead is None:
            return None  # not queued: taken, or finished, just now
        free = self._settings.processes - busy
        return None if ahead < free else ahead - max(0, free)

    def _queue(self) -> tuple[int, dict[str, int]]:
        """(recognizers busy, queued job name -> its place in the queue, oldest first)."""
        busy = 0
        queued: list[tuple[float, str]] = []
        for other in self._supervisor.job_dirs():
            if result_written(other):
                continue
            if (other / PID_FILE).exists():
                busy += 1
                continue
            try:
                queued.append((float(read_json(other / JOB_FILE)["queued_at"]), other.name))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # being created or removed
        return busy, {name: place for place, (_, name) in enumerate(sorted(queued))}

    def parse(self, raw: bytes) -> Transcript:
        """Turn a ``result.json`` into a :class:`Transcript`, never inventing speech.

        Segments that failed the decoder's checks at every temperature are dropped: any left with
        avg_logprob < -1.0 (this covers Whisper's no-speech rule, no_speech_prob > 0.6 with
        avg_logprob < -1.0, and random text on noise) or compression_ratio > 2.4 (a decoding
        loop that repeats a sentence). When nothing but filler ("uh", "um",
        "hmm", "oh", markup like "[Music]", punctuation) remains, the transcript is
        ``no_speech`` with empty text and no language.

        Raises:
            ValueError: ``raw`` is not a result of this provider.
        """
        try:
            document = json.loads(raw)
            kept = [s for s in document["segments"] if decoded_speech(s)]
            texts = [str(s["text"]) for s in kept]
            language = document["language"]
            segments = tuple(
                part
                for s, text in zip(kept, texts, strict=True)
                if text.strip()
                for part in split_at_pauses(
                    Segment(
                        start=float(s["start"]),
                        end=float(s["end"]),
                        text=text.strip(),
                        channel=s.get("channel"),
                        language=s.get("language", language),
                        words=words_of(s.get("words") or ()),
                    )
                )
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a local recognizer result: {type(exc).__name__}: {exc}") from exc
        # Whisper's segment texts carry their own leading space where the language uses spaces.
        text = "".join(texts).strip()
        if only_filler(text):
            return Transcript(text="", segments=(), language=None, no_speech=True)
        return transcript_of_segments(
            segments, text, language if isinstance(language, str) else None
        )

    def poll_delay(self, duration: float, waited: float) -> float:
        """``[transcription] poll_delay``: polling a local job folder costs nothing."""
        return self._settings.poll_delay

    def deadline(self, duration: float) -> float:
        """No deadline of its own: a dead recognizer is seen at once, a hung one by the stuck
        watchdog (``[pipeline] foreign_work_limit``)."""
        return math.inf

    def cancel(self, operation_id: str) -> PollResult:
        """Stop the job (its recognizer is killed and replaced) and forget it: ``failed``. Never
        needed by the pipeline (no deadline: see :meth:`deadline`)."""
        self.discard(operation_id)
        return PollResult("failed", error="cancelled")

    # -- housekeeping -------------------------------------------------------------------------

    def discard(self, operation_id: str) -> None:
        """Forget the operation: delete its job folder; a recognizer still working on it is
        killed (and replaced when work waits).

        Call it after the raw response is stored (D2) or when the pipeline gives up on an
        operation; afterwards the id polls as ``unknown``. Unknown ids are ignored.
        """
        if not _OPERATION_ID.fullmatch(operation_id):
            return
        job_dir = self._work_dir / operation_id
        with self._supervisor.locked():
            if not job_dir.is_dir():
                return
            pid = read_pid(job_dir)
            if finished(job_dir) is None and pid is not None and self._supervisor.alive(pid):
                self._supervisor.kill(pid)
            shutil.rmtree(job_dir, ignore_errors=True)
            self._supervisor.ensure_recognizers()

    def job_folders(self) -> list[tuple[str, float]]:
        """Every job folder as (operation id, when it last changed in epoch seconds), for a
        sweep; unfinished creations (``.new-*``) older than an hour are removed on the way."""
        found: list[tuple[str, float]] = []
        for entry in self._work_dir.iterdir():
            try:
                changed = entry.stat().st_mtime
            except FileNotFoundError:
                continue  # removed meanwhile
            if entry.name.startswith(".new-") and time.time() - changed > 3600:
                shutil.rmtree(entry, ignore_errors=True)  # a creator died between mkdir and rename
            elif entry.is_dir() and _OPERATION_ID.fullmatch(entry.name):
                found.append((entry.name, changed))
        return found

    # -- internals ----------------------------------------------------------------------------

    def _job_dir(self, operation_id: str) -> Path:
        if not _OPERATION_ID.fullmatch(operation_id):
            raise ValueError(
                f"operation id {operation_id!r} must be 1-128 characters of [A-Za-z0-9_.-] "
                "starting with a letter or digit"
            )
        return self._work_dir / operation_id

    def _create_job(
        self, job_dir: Path, operation_id: str, source: Path, request: RecognitionRequest
    ) -> None:
        language = request.language if request.language is not None else self._settings.language
        job = {
            "operation_id": operation_id,
            "input": str(source),
            "language": language,
            "initial_prompt": request.hints,
            "channels": request.channels > 1,
            "model": self._model_path,
            "device": self._settings.device,
            "compute_type": self._settings.compute_type,
            "threads": self._settings.threads,
            "beam_size": self._settings.beam_size,
            "duration": request.duration,
            "queued_at": time.time(),
        }
        # Built aside and renamed into place: a job folder always has its job.json. The audio
        # is copied in: the caller's file is a working copy that goes when submit returns.
        staging = Path(tempfile.mkdtemp(prefix=".new-", dir=self._work_dir))
        try:
            shutil.copyfile(source, staging / _INPUT)
            job["input"] = str(job_dir / _INPUT)
            write_job_file(staging / JOB_FILE, job)
            staging.rename(job_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def transcript_of_segments(
    segments: tuple[Segment, ...], text: str, language: str | None
) -> Transcript:
    """A transcript of kept speech: channel-labelled lines when channels were heard apart, and
    every language heard, in order of first appearance."""
    languages: list[str] = []
    for segment in segments:
        if segment.language and segment.language not in languages:
            languages.append(segment.language)
    if any(segment.channel for segment in segments):
        text = "\n".join(f"[{s.channel}] {s.text}" for s in segments)
    first = languages[0] if languages else language
    return Transcript(
        text=text,
        segments=segments,
        language=first,
        no_speech=False,
        languages=tuple(languages) if languages else ((first,) if first else ()),
    )


def whisper_languages() -> frozenset[str]:
    """The language codes Whisper recognises (ISO 639-1 plus a few: ``haw``, ``yue``)."""
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    return frozenset(_LANGUAGE_CODES)


def device_problem(settings: TranscriptionSettings) -> str | None:
    """Why ``[transcription] device`` and ``compute_type`` cannot run here, or None."""
    import ctranslate2

    device = settings.device
    if device == "auto":
        device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
    if device == "cuda" and ctranslate2.get_cuda_device_count() == 0:
        return (
            "[transcription] device = 'cuda', but no usable CUDA GPU is found; set device = "
            "'cpu' (or 'auto')"
        )
    if settings.compute_type in ("default", "auto"):
        return None
    supported = sorted(ctranslate2.get_supported_compute_types(device))
    if settings.compute_type not in supported:
        return (
            f"[transcription] compute_type = {settings.compute_type!r} is not supported on "
            f"{device} here; use one of {', '.join(supported)}"
        )
    return None
