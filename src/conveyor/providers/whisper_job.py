"""One local recognition job in its own process: ``python -m conveyor.providers.whisper_job DIR``.

``DIR/job.json`` names the input and the model settings (written by
:class:`conveyor.providers.local.LocalWhisperProvider`). The job writes exactly one of
``DIR/result.json`` (the raw response) or ``DIR/error.json`` (``{"error": text}``), each atomically,
and exits 0 or 1. Running apart from the worker means a crash, a hang or an out-of-memory kill of
the recognizer never takes a worker down.

``result.json``::

    {"language": "en", "language_probability": 0.93, "duration": 11.0,
     "segments": [{"start": 0.0, "end": 10.5, "text": " And so ...", "no_speech_prob": 0.09,
                   "avg_logprob": -0.28, "compression_ratio": 1.35, "temperature": 0.0}]}
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from conveyor.providers.local import ERROR_FILE, JOB_FILE, RESULT_FILE, write_job_file

__all__ = ["main", "run_job"]


def run_job(job_dir: Path) -> dict[str, Any]:
    """Recognise the job's input with faster-whisper and return the result document.

    Raises:
        Exception: anything faster-whisper or the audio decoder raises (``main`` records it).
    """
    job = json.loads((job_dir / JOB_FILE).read_text(encoding="utf-8"))
    # Imported here so that ``--help``-like failures (bad job.json) are reported without paying
    # for ctranslate2's import.
    import ctranslate2
    from faster_whisper import WhisperModel

    # Whisper's temperature fallback samples; a fixed seed makes a rerun give the same text.
    ctranslate2.set_random_seed(0)
    started = time.monotonic()
    model = WhisperModel(
        job["model"],
        device=job["device"],
        compute_type=job["compute_type"],
        cpu_threads=job["threads"],
        local_files_only=True,  # never reach a model hub
    )
    print(f"model loaded in {time.monotonic() - started:.2f}s", flush=True)
    segments, info = model.transcribe(
        job["input"],
        language=job["language"],
        beam_size=job["beam_size"],
        # Vocabulary hints (names, terms) steer the decoder's spelling of them.
        initial_prompt=job.get("initial_prompt"),
        vad_filter=True,  # faster-whisper's bundled Silero VAD: no decoding of silence or noise
    )
    result: dict[str, Any] = {
        "language": info.language,
        "language_probability": info.language_probability,
        "duration": info.duration,
        "segments": [
            {
                "start": seg.start,
                "end": seg.end,
                "text": seg.text,
                "no_speech_prob": seg.no_speech_prob,
                "avg_logprob": seg.avg_logprob,
                "compression_ratio": seg.compression_ratio,
                "temperature": seg.temperature,
            }
            for seg in segments  # a generator: the decoding happens here
        ],
    }
    print(f"recognised in {time.monotonic() - started:.2f}s", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    """Run the job in ``argv[0]``; returns the process exit code."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m conveyor.providers.whisper_job JOB_DIR", file=sys.stderr)
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
