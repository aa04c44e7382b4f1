"""The local recognizer process.

``python -m conveyor.providers.whisper_job --serve WORK_DIR SLOT IDLE_EXIT`` is a warm recognizer:
it loads the model once (again only when a job names other model settings) and takes queued job
folders of ``WORK_DIR`` one at a time, oldest first, until it has waited ``IDLE_EXIT`` seconds for
work. ``python -m conveyor.providers.whisper_job DIR`` runs the one job in ``DIR`` and exits.

``DIR/job.json`` names the input and the model settings (written by
:class:`conveyor.providers.local.LocalWhisperProvider`). Each job gets exactly one of
``DIR/result.json`` (the raw response) or ``DIR/error.json`` (``{"error": text}``), each
atomically. Running apart from the worker means a crash, a hang or an out-of-memory kill of the
recognizer never takes a worker down.

``result.json``::

    {"language": "en", "languages": ["en", "ru"], "language_probability": 0.93, "duration": 21.5,
     "segments": [{"start": 0.0, "end": 10.5, "text": " And so ...", "no_speech_prob": 0.09,
                   "avg_logprob": -0.28, "compression_ratio": 1.35, "temperature": 0.0,
                   "language": "en", "channel": null}]}

A recording that changes language is heard stretch by stretch. When no language is set, the
recording first takes the ordinary single Whisper call (language detected on its first 30 s),
exactly as faster-whisper is called directly. Only when that pass leaves a sign of a second
language is the recording examined further (see :func:`_switch_suspected`): the stretches of
speech between pauses of 0.8 s or more are each given to Whisper's language detection, and runs
of one language are transcribed with that language (one Whisper call per run). Each detection
costs an encoder pass over a 30 s window, about half the work of recognising a short clip, so a
recording in one language pays for none of them (or one, past 30 s).

With ``"channels": true`` each channel of the input (a multi-channel WAV: one channel per
recorded channel or audio track) is recognised on its own and its segments carry its label
(``"1"``, ``"2"``, ...).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import wave
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from conveyor.providers.gates import LOGPROB_FLOOR, decoded_speech
from conveyor.providers.local import (
    ERROR_FILE,
    JOB_FILE,
    LOCK_FILE,
    LOG_FILE,
    PID_FILE,
    RESULT_FILE,
    start_ticks,
    write_job_file,
)

__all__ = ["load_model", "main", "recognise", "run_job", "serve"]

_RATE = 16_000
_PAUSE_MS = 800  # a pause this long may separate two languages
_MIN_JUDGED = _RATE // 2  # shorter stretches are too short to judge their language
_MAX_DETECTIONS = 24  # bounds the extra encoder passes of a long recording
_SURE = 0.5  # detections below this probability take their neighbours' language
_SURE_WHOLE = 0.9  # a single pass's detection below this may hide a second language
_UNSURE_LOGPROB = -0.7  # a window decoded less surely than this may be in another language
_WINDOW = 30 * _RATE  # Whisper hears 30 s at a time


def load_model(job: dict[str, Any]) -> Any:
    """Load the job's Whisper model (offline), seeded so a rerun gives the same text."""
    import ctranslate2
    from faster_whisper import WhisperModel

    # Whisper's temperature fallback samples; a fixed seed makes a rerun give the same text.
    ctranslate2.set_random_seed(0)
    return WhisperModel(
        job["model"],
        device=job["device"],
        compute_type=job["compute_type"],
        cpu_threads=job["threads"],
        local_files_only=True,  # never reach a model hub
    )


def run_job(job_dir: Path) -> dict[str, Any]:
    """Recognise the job's input with faster-whisper and return the result document.

    Raises:
        Exception: anything faster-whisper or the audio decoder raises (``main`` records it).
    """
    job = json.loads((job_dir / JOB_FILE).read_text(encoding="utf-8"))
    started = time.monotonic()
    model = load_model(job)
    print(f"model loaded in {time.monotonic() - started:.2f}s", flush=True)
    result = recognise(model, job)
    print(f"recognised in {time.monotonic() - started:.2f}s", flush=True)
    return result


def recognise(model: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Recognise ``job["input"]`` with a loaded model; see the module docstring for the result."""
    channels = _read_channels(Path(job["input"]), separate=bool(job.get("channels")))
    segments: list[dict[str, Any]] = []
    languages: list[str] = []
    probability = 0.0
    duration = 0.0
    for label, audio in channels:
        duration = max(duration, audio.size / _RATE)
        # The ordinary single pass first: what calling faster-whisper directly does.
        whole = _transcribe(model, job, audio, 0, audio.size, job["language"], label)
        passes = [whole]
        if job["language"] is None:
            runs = _language_runs(model, audio, whole)
            if runs is not None:
                passes = [
                    _transcribe(model, job, audio, start, end, language, label)
                    for start, end, language in runs
                ]
        passes = [
            (_recover_loops(model, job, audio, run, label), language, probability)
            for run, language, probability in passes
        ]
        for run, language, language_probability in passes:
            if run and language not in languages:
                languages.append(language)
            probability = max(probability, language_probability)
            segments += run
    segments.sort(key=lambda s: (s["start"], s["channel"] or ""))
    return {
        "language": languages[0] if languages else job["language"],
        "languages": languages,
        "language_probability": probability,
        "duration": duration,
        "segments": segments,
    }


def _recover_loops(
    model: Any,
    job: dict[str, Any],
    audio: npt.NDArray[np.float32],
    run: list[dict[str, Any]],
    label: str | None,
) -> list[dict[str, Any]]:
    """``run`` with each looping segment decoded once more, by beam search alone.

    A window of speech said several times fails Whisper's compression check at temperature 0,
    so Whisper falls back to sampling, and a sample can loop ("ask not ..." over and over for
    the whole window): the gate drops that segment and the speech in it with it. Beam search
    without the compression fallback usually hears each saying; what it gives goes through the
    same gate, so a loop it makes too is still dropped. Costs nothing when no segment loops.
    """
    recovered: list[dict[str, Any]] = []
    for segment in run:
        if decoded_speech(segment) or float(segment["avg_logprob"]) < LOGPROB_FLOOR:
            recovered.append(segment)
            continue
        start = max(0, int(float(segment["start"]) * _RATE))
        end = min(audio.size, int(float(segment["end"]) * _RATE))
        again, _, _ = _transcribe(
            model, job, audio, start, end, segment["language"], label, beam_only=True
        )
        recovered += again
    return recovered


def _transcribe(
    model: Any,
    job: dict[str, Any],
    audio: npt.NDArray[np.float32],
    start: int,
    end: int,
    language: str | None,
    label: str | None,
    *,
    beam_only: bool = False,
) -> tuple[list[dict[str, Any]], str, float]:
    """One Whisper call on ``audio[start:end]``: its segments (times from the start of
    ``audio``), the language it used and that language's detected probability.

    ``beam_only``: beam search at temperature 0, with no fallback on the compression check and
    no conditioning on earlier text (see :func:`_recover_loops`).
    """
    extra: dict[str, Any] = {}
    if beam_only:
        extra = {
            "temperature": 0.0,
            "compression_ratio_threshold": None,
            "condition_on_previous_text": False,
        }
    found, info = model.transcribe(
        audio[start:end],
        language=language,
        beam_size=job["beam_size"],
        # Vocabulary hints (names, terms) steer the decoder's spelling of them.
        initial_prompt=job.get("initial_prompt"),
        vad_filter=True,  # faster-whisper's bundled Silero VAD: no decoding of silence
        **extra,
    )
    offset = start / _RATE
    run = [
        {
            "start": seg.start + offset,
            "end": seg.end + offset,
            "text": seg.text,
            "no_speech_prob": seg.no_speech_prob,
            "avg_logprob": seg.avg_logprob,
            "compression_ratio": seg.compression_ratio,
            "temperature": seg.temperature,
            "language": info.language,
            "channel": label,
        }
        for seg in found  # a generator: the decoding happens here
    ]
    return run, str(info.language), float(info.language_probability)


def _read_channels(
    path: Path, *, separate: bool
) -> list[tuple[str | None, npt.NDArray[np.float32]]]:
    """The input as float32 arrays at 16 kHz: one unlabelled mix, or one per channel."""
    from faster_whisper import decode_audio

    try:
        with wave.open(str(path), "rb") as source:
            count = source.getnchannels()
            if source.getframerate() == _RATE and source.getsampwidth() == 2 and count > 1:
                pcm = np.frombuffer(source.readframes(source.getnframes()), dtype="<i2")
                frames = pcm.reshape(-1, count).astype(np.float32) / 32768.0
                if separate:
                    return [(str(i + 1), np.ascontiguousarray(frames[:, i])) for i in range(count)]
                return [(None, frames.mean(axis=1).astype(np.float32))]
    except (wave.Error, EOFError):
        pass
    return [(None, decode_audio(str(path), sampling_rate=_RATE))]


def _language_runs(
    model: Any,
    audio: npt.NDArray[np.float32],
    single: tuple[list[dict[str, Any]], str, float],
) -> list[tuple[int, int, str]] | None:
    """``(start, end, language)`` sample ranges covering ``audio``, one per run of a language;
    None when the single pass ``single`` (segments, language, probability) stands."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    stamps = get_speech_timestamps(
        audio, VadOptions(min_silence_duration_ms=_PAUSE_MS, speech_pad_ms=200)
    )
    stretches = [(int(s["start"]), int(s["end"])) for s in stamps]
    judged = [i for i, (a, b) in enumerate(stretches) if b - a >= _MIN_JUDGED]
    if len(stretches) < 2 or len(judged) < 2:
        return None
    if not _switch_suspected(model, audio, stretches, judged, single):
        return None
    blocks = _blocks(stretches, _MAX_DETECTIONS)
    said: list[str | None] = []
    for first, last in blocks:
        a, b = stretches[first][0], stretches[last][1]
        if b - a < _MIN_JUDGED:
            said.append(None)
            continue
        code, probability, _ = model.detect_language(audio[a:b])
        said.append(code if probability >= _SURE else None)
    known = [code for code in said if code is not None]
    if len(set(known)) <= 1:
        if not known or known[0] == single[1]:
            return None  # one language after all, the one the single pass used
        return [(0, audio.size, known[0])]
    filled = _fill_unsure(said, [(stretches[f][0], stretches[last][1]) for f, last in blocks])
    runs: list[tuple[int, int, str]] = []
    for index, (first, _) in enumerate(blocks):
        if runs and runs[-1][2] == filled[index]:
            continue
        # A run starts in the middle of the pause before its first stretch.
        start = 0 if not runs else (stretches[first - 1][1] + stretches[first][0]) // 2
        if runs:
            runs[-1] = (runs[-1][0], start, runs[-1][2])
        runs.append((start, audio.size, filled[index]))
    return runs


def _switch_suspected(
    model: Any,
    audio: npt.NDArray[np.float32],
    stretches: list[tuple[int, int]],
    judged: list[int],
    first: tuple[list[dict[str, Any]], str, float],
) -> bool:
    """Whether the single pass may have heard a second language as the first one.

    Whisper decodes a whole 30 s window in one language: faced with a switch it either drops
    the other language's speech or makes up text in the first one. Signs, cheapest first:

    * its detection on the first 30 s was unsure (below 0.9: each language pulls its own way);
    * a stretch of speech (at least 0.5 s) that no segment of the pass covers: dropped speech;
    * a window decoded with an average log-probability below -0.7: made-up or translated text
      (Russian decoded as English came out as English at -0.96 and -1.02; English speech
      decodes at -0.2 to -0.6);
    * past 30 s (the detection saw only the start), the last stretches are detected as another
      language (one detection).

    A false sign costs detections, never the text: when they all agree with the single pass,
    it stands.
    """
    segments, language, probability = first
    if probability < _SURE_WHOLE:
        return True
    if any(float(s["avg_logprob"]) < _UNSURE_LOGPROB for s in segments):
        return True
    spans = [(float(s["start"]) * _RATE, float(s["end"]) * _RATE) for s in segments]
    for index in judged:
        a, b = stretches[index]
        if not any(start < b and end > a for start, end in spans):
            return True
    if audio.size <= _WINDOW:
        return False
    tail = judged[-1]
    a = stretches[tail][0]
    # The last stretches, up to a window's worth: enough to judge, one encoder pass.
    for index in range(tail - 1, -1, -1):
        if stretches[tail][1] - stretches[index][0] > _WINDOW:
            break
        a = stretches[index][0]
    code, sure, _ = model.detect_language(audio[a : stretches[tail][1]])
    return bool(sure >= _SURE and code != language)


def _fill_unsure(said: list[str | None], spans: list[tuple[int, int]]) -> list[str]:
    """Each unsure block takes the language of the nearest judged block (the next one on a tie)."""
    filled: list[str] = []
    for index, code in enumerate(said):
        if code is not None:
            filled.append(code)
            continue
        before = next((i for i in range(index - 1, -1, -1) if said[i] is not None), None)
        after = next((i for i in range(index + 1, len(said)) if said[i] is not None), None)
        gap_before = spans[index][0] - spans[before][1] if before is not None else None
        gap_after = spans[after][0] - spans[index][1] if after is not None else None
        if after is not None and (gap_before is None or (gap_after or 0) <= gap_before):
            filled.append(str(said[after]))
        else:
            assert before is not None
            filled.append(str(said[before]))
    return filled


def _blocks(stretches: list[tuple[int, int]], most: int) -> list[tuple[int, int]]:
    """Group consecutive stretches into at most ``most`` blocks (first, last index) of about
    equal speech length, so a long recording costs a bounded number of detections."""
    if len(stretches) <= most:
        return [(i, i) for i in range(len(stretches))]
    total = sum(b - a for a, b in stretches)
    share = total / most
    blocks: list[tuple[int, int]] = []
    first, gathered = 0, 0
    for index, (a, b) in enumerate(stretches):
        gathered += b - a
        if gathered >= share or index == len(stretches) - 1:
            blocks.append((first, index))
            first, gathered = index + 1, 0
    return blocks


_MODEL_KEYS = ("model", "device", "compute_type", "threads")
_IDLE_SLEEP = 0.1  # seconds between looks for work while idle


def serve(work_dir: Path, slot: int, idle_exit: float) -> int:
    """Take and run queued jobs of ``work_dir`` until idle for ``idle_exit`` seconds."""
    model: Any = None
    loaded: tuple[Any, ...] | None = None
    idle_since = time.monotonic()
    while True:
        job_dir = _take_job(work_dir, slot)
        if job_dir is None:
            if time.monotonic() - idle_since > idle_exit:
                print(f"idle for {idle_exit:.0f}s: exiting", flush=True)
                return 0
            time.sleep(_IDLE_SLEEP)
            continue
        started = time.monotonic()
        try:
            job = json.loads((job_dir / JOB_FILE).read_text(encoding="utf-8"))
            wanted = tuple(job[key] for key in _MODEL_KEYS)
            if wanted != loaded:
                model, loaded = load_model(job), wanted
                _note(job_dir, f"model loaded in {time.monotonic() - started:.2f}s")
            result = recognise(model, job)
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            _note(job_dir, f"recognition failed: {message}")
            write_job_file(job_dir / ERROR_FILE, {"error": message})
        else:
            _note(job_dir, f"recognised in {time.monotonic() - started:.2f}s")
            write_job_file(job_dir / RESULT_FILE, result)
        idle_since = time.monotonic()


def _take_job(work_dir: Path, slot: int) -> Path | None:
    """Claim the oldest waiting job (no ``pid.json``, no result) under the provider's lock."""
    import fcntl

    with (work_dir / LOCK_FILE).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            waiting: list[tuple[float, str, Path]] = []
            for job_dir in work_dir.iterdir():
                if job_dir.name.startswith(".") or not job_dir.is_dir():
                    continue
                if any((job_dir / n).exists() for n in (PID_FILE, RESULT_FILE, ERROR_FILE)):
                    continue
                try:
                    job = json.loads((job_dir / JOB_FILE).read_text(encoding="utf-8"))
                    waiting.append((float(job["queued_at"]), job_dir.name, job_dir))
                except (OSError, ValueError, KeyError, TypeError):
                    continue  # being created or removed
            if not waiting:
                return None
            job_dir = min(waiting)[2]
            pid = os.getpid()
            write_job_file(
                job_dir / PID_FILE,
                {"pid": pid, "start_ticks": start_ticks(pid), "started_at": time.time(),
                 "slot": slot},
            )  # fmt: skip
            return job_dir
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _note(job_dir: Path, line: str) -> None:
    print(f"{job_dir.name}: {line}", flush=True)
    with contextlib.suppress(OSError), (job_dir / LOG_FILE).open("a", encoding="utf-8") as log:
        log.write(line + "\n")


def main(argv: list[str] | None = None) -> int:
    """Serve (``--serve WORK_DIR SLOT IDLE_EXIT``) or run the job in ``argv[0]``; returns the
    process exit code."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 4 and args[0] == "--serve":
        return serve(Path(args[1]), int(args[2]), float(args[3]))
    if len(args) != 1:
        print(
            "usage: python -m conveyor.providers.whisper_job JOB_DIR\n"
            "       python -m conveyor.providers.whisper_job --serve WORK_DIR SLOT IDLE_EXIT",
            file=sys.stderr,
        )
        return 2
    job_dir = Path(args[0])
    try:
        result = run_job(job_dir)
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        print(f"recognition failed: {message}", file=sys.stderr, flush=True)
        write_job_file(job_dir / ERROR_FILE, {"error": message})
        return 1
    write_job_file(job_dir / RESULT_FILE, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
