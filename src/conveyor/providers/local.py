"""The ``local`` recognition provider: faster-whisper in detached processes on this machine.

Each operation is a job folder ``<work_dir>/<operation_id>/``::

    job.json      input path, language, model folder, device, compute_type, threads, beam_size
    pid.json      {"pid", "start_ticks", "started_at"}: written when the recognizer is started
    job.log       the recognizer's stdout and stderr
    result.json   the raw response (see conveyor.providers.whisper_job), when done
    error.json    {"error": text}, when the recognizer caught an exception
    exit.json     {"returncode"}: written by the process that started the job when it reaps it

``<work_dir>/.lock`` serialises job starts between threads and processes; ``<work_dir>/.models``
holds the assembled bundled model. A job is started as
``python -m conveyor.providers.whisper_job <job dir>`` in its own session, so it survives the worker
that started it and its result is collected by whoever polls next. At most
``[transcription] processes`` recognizers run at once; further jobs wait (no ``pid.json``) and are
started by a later :meth:`LocalWhisperProvider.submit` or :meth:`LocalWhisperProvider.poll`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import conveyor
from conveyor.config import TranscriptionSettings
from conveyor.errors import ConfigError
from conveyor.files import write_atomic
from conveyor.providers.base import (
    PollResult,
    RecognitionRequest,
    Segment,
    Submission,
    Transcript,
)
from conveyor.providers.gates import decoded_speech, only_filler
from conveyor.providers.whisper_model import resolve_model

__all__ = [
    "ERROR_FILE",
    "JOB_FILE",
    "RESULT_FILE",
    "LocalWhisperProvider",
    "transcript_of_segments",
    "whisper_languages",
    "write_job_file",
]

# The job folder layout, shared with conveyor.providers.whisper_job.
JOB_FILE = "job.json"
RESULT_FILE = "result.json"
ERROR_FILE = "error.json"
_PID_FILE = "pid.json"
_EXIT_FILE = "exit.json"
_LOG_FILE = "job.log"
_LOCK_FILE = ".lock"
_MODELS_DIR = ".models"
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
            raise ConfigError(
                f"[transcription] language = {settings.language!r} is not a language code "
                "Whisper knows; use an ISO 639-1 code such as en, de, ru, or leave it unset"
            )
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._mutex = threading.Lock()
        # A job folder is keyed by the caller's id: a repeated submit finds it (D12).
        self.idempotent_submit = True
        self.hears_channels_apart = True

    # -- protocol -----------------------------------------------------------------------------

    def submit(self, audio: Path, *, operation_id: str, request: RecognitionRequest) -> Submission:
        """Queue recognition of ``audio`` under ``operation_id`` and start it if a slot is free.

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
        with self._locked():
            if not job_dir.is_dir():
                source = audio.resolve()
                if not source.is_file():
                    raise FileNotFoundError(f"no audio file at {source}")
                self._create_job(job_dir, operation_id, source, request)
            self._start_queued()
            source_url = str(_read_json(job_dir / JOB_FILE)["input"])
        return Submission(operation_id=operation_id, source_url=source_url)

    def poll(self, operation_id: str) -> PollResult:
        """Report an operation's state; also starts queued jobs when a process slot is free.

        ``running`` covers queued and working; ``failed`` carries the recognizer's error, or, when
        its process is gone without a result, the exit code or signal and the log's last lines.
        """
        if not _OPERATION_ID.fullmatch(operation_id):
            return PollResult("unknown")
        job_dir = self._work_dir / operation_id
        with self._locked():
            self._start_queued()
            return self._state(job_dir)

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
                Segment(
                    start=float(s["start"]),
                    end=float(s["end"]),
                    text=text.strip(),
                    channel=s.get("channel"),
                    language=s.get("language", language),
                )
                for s, text in zip(kept, texts, strict=True)
                if text.strip()
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

    # -- housekeeping -------------------------------------------------------------------------

    def discard(self, operation_id: str) -> None:
        """Kill the operation's recognizer if it still runs and delete its job folder.

        Call it after the raw response is stored (D2) or when the pipeline gives up on an
        operation (stuck); afterwards the id polls as ``unknown``. Unknown ids are ignored.
        """
        if not _OPERATION_ID.fullmatch(operation_id):
            return
        job_dir = self._work_dir / operation_id
        with self._locked():
            if not job_dir.is_dir():
                return
            pid = _read_pid(job_dir)
            if pid is not None and self._alive(operation_id, pid):
                with contextlib.suppress(ProcessLookupError):
                    # The job leads its own session: kill its whole process group.
                    os.killpg(pid[0], signal.SIGKILL)
                child = self._children.pop(operation_id, None)
                if child is not None:
                    child.wait()
            shutil.rmtree(job_dir, ignore_errors=True)
            self._start_queued()

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
            "queued_at": time.time(),
        }
        # Built aside and renamed into place: a job folder always has its job.json.
        staging = Path(tempfile.mkdtemp(prefix=".new-", dir=self._work_dir))
        try:
            write_job_file(staging / JOB_FILE, job)
            staging.rename(job_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _start_queued(self) -> None:
        """Start waiting jobs, oldest first, while fewer than ``processes`` run. Hold the lock."""
        self._reap_children()
        running = 0
        waiting: list[tuple[float, str, Path]] = []
        for job_dir in self._work_dir.iterdir():
            if job_dir.name.startswith(".") or not job_dir.is_dir():
                continue
            if (job_dir / RESULT_FILE).exists() or (job_dir / ERROR_FILE).exists():
                continue
            pid = _read_pid(job_dir)
            if pid is None:
                with contextlib.suppress(OSError, ValueError, KeyError):
                    queued_at = float(_read_json(job_dir / JOB_FILE)["queued_at"])
                    waiting.append((queued_at, job_dir.name, job_dir))
            elif self._alive(job_dir.name, pid):
                running += 1
        waiting.sort()
        for _, _, job_dir in waiting[: max(0, self._settings.processes - running)]:
            self._start(job_dir)

    def _start(self, job_dir: Path) -> None:
        env = dict(os.environ)
        env["HF_HUB_OFFLINE"] = "1"  # belt and braces: the job loads with local_files_only too
        package_root = str(Path(conveyor.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_root, env.get("PYTHONPATH", "")) if p
        )
        with (job_dir / _LOG_FILE).open("ab") as log:
            child = subprocess.Popen(
                [sys.executable, "-m", "conveyor.providers.whisper_job", str(job_dir)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=job_dir,
                env=env,
                start_new_session=True,  # not killed with the worker's process group
                close_fds=True,
            )
        self._children[job_dir.name] = child
        write_job_file(
            job_dir / _PID_FILE,
            {"pid": child.pid, "start_ticks": _start_ticks(child.pid), "started_at": time.time()},
        )

    def _reap_children(self) -> None:
        """Collect exit codes of recognizers this provider started (and free their zombies)."""
        for operation_id, child in list(self._children.items()):
            returncode = child.poll()
            if returncode is None:
                continue
            del self._children[operation_id]
            job_dir = self._work_dir / operation_id
            if job_dir.is_dir():
                write_job_file(job_dir / _EXIT_FILE, {"returncode": returncode})

    def _alive(self, operation_id: str, pid: tuple[int, int | None]) -> bool:
        child = self._children.get(operation_id)
        if child is not None and child.pid == pid[0]:
            if child.poll() is None:
                return True
            self._reap_children()
            return False
        return _process_alive(*pid)

    def _state(self, job_dir: Path) -> PollResult:
        if not job_dir.is_dir():
            return PollResult("unknown")
        finished = _finished(job_dir)
        if finished is not None:
            return finished
        pid = _read_pid(job_dir)
        if pid is None or self._alive(job_dir.name, pid):
            return PollResult("running")
        # The process may have written its result just before exiting: look once more.
        finished = _finished(job_dir)
        if finished is not None:
            return finished
        return PollResult(
            "failed",
            error=(
                f"recognizer process exited without a result ({_exit_text(job_dir)}); "
                f"log tail: {_log_tail(job_dir)}"
            ),
        )

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # The mutex guards this object's child table; flock makes threads and processes agree.
        with self._mutex, (self._work_dir / _LOCK_FILE).open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


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


def _finished(job_dir: Path) -> PollResult | None:
    with contextlib.suppress(FileNotFoundError):
        return PollResult("done", raw=(job_dir / RESULT_FILE).read_bytes())
    with contextlib.suppress(FileNotFoundError):
        raw = (job_dir / ERROR_FILE).read_bytes()
        try:
            error = str(json.loads(raw)["error"])
        except (ValueError, KeyError, TypeError):
            error = raw.decode("utf-8", "replace")
        return PollResult("failed", error=f"recognizer failed: {error}")
    return None


def _read_pid(job_dir: Path) -> tuple[int, int | None] | None:
    try:
        recorded = _read_json(job_dir / _PID_FILE)
        ticks = recorded.get("start_ticks")
        return int(recorded["pid"]), (int(ticks) if ticks is not None else None)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command name, which is in parentheses and may contain spaces.
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])


def _process_alive(pid: int, start_ticks: int | None) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)  # no /proc: existence is the best we can tell
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # exited, not yet reaped by the worker that started it
        return False
    return start_ticks is None or int(fields[19]) == start_ticks


def _exit_text(job_dir: Path) -> str:
    try:
        returncode = int(_read_json(job_dir / _EXIT_FILE)["returncode"])
    except (OSError, ValueError, KeyError, TypeError):
        return "exit status unknown: it was started by another worker process"
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def _log_tail(job_dir: Path, lines: int = 5, limit: int = 2000) -> str:
    try:
        with (job_dir / _LOG_FILE).open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - limit))
            tail = log.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    kept = [line.strip() for line in tail.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) if kept else "(empty log)"


def _read_json(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return document


def write_job_file(path: Path, document: dict[str, Any]) -> None:
    """Write a job file atomically (temp, fsync, rename): a reader sees all of it or nothing.

    Shared by the provider and the recognizer process (:mod:`conveyor.providers.whisper_job`).
    """
    write_atomic(path, json.dumps(document, ensure_ascii=False))


def whisper_languages() -> frozenset[str]:
    """The language codes Whisper recognises (ISO 639-1 plus a few: ``haw``, ``yue``)."""
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    return frozenset(_LANGUAGE_CODES)
