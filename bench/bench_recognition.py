"""``python -m bench.bench_recognition``: the pipeline's time per clip against faster-whisper called
directly on the same clips (target: within 5 %).

* **direct**: one ``WhisperModel`` (the bundled base model, int8, the same threads and beam size),
  loaded once and not timed; each clip transcribed with ``vad_filter=True``, as the recognizer does.
* **pipeline**: every clip ingested into a fresh SQLite installation at once, then a worker pool
  with the local provider (warm recognizers, ``[transcription] processes = 1``) runs them to
  ``done``. A warm-up clip goes through first, so the model load is not counted on either side.

Both sides are run ``--repeat`` times, interleaved, and the best of each is reported, so background
load hits them alike. Prints one JSON object.

``--memory MINUTES [MINUTES ...]``: instead, the recognizer process's peak RSS (``ru_maxrss`` of
the child, as ``/usr/bin/time`` reports it) on recordings of those lengths, built from the corpus
clips with pauses of 1 s to 5 minutes between them (about 4 % speech, so a long recording does
not cost the shared CPU an hour of decoding; memory follows the recording's length, which the
reader streams in windows). Each recording is one job run by
``python -m conveyor.providers.whisper_job DIR`` in its own process; the text and the number of
segments come back with the peak, and the longest is held to 1.2 x the shortest's peak.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "audio"
CLIPS = [
    "jfk.wav",
    "jfk.mp3",
    "sense_and_sensibility_0880.wav",
    "cards_005.wav",
    "LDC93S1.flac",
    "LDC93S1_8k_mono.wav",
    "ru_deepspeech.wav",
    "ru_neural_networks.wav",
]
THREADS = 2
BEAM = 5


def direct(clips: list[Path], model: Any) -> float:
    """Seconds faster-whisper takes for all clips with a loaded model."""
    started = time.perf_counter()
    for clip in clips:
        segments, _ = model.transcribe(str(clip), beam_size=BEAM, vad_filter=True)
        list(segments)
    return time.perf_counter() - started


def pipeline(clips: list[Path], work: Path) -> float:
    """Seconds the pipeline takes from ingest to every clip ``done`` (after a warm-up clip)."""
    from conveyor.audio.intake import accept_audio
    from conveyor.config import Settings
    from conveyor.db.tables import audio_records
    from conveyor.runtime import Runtime

    # The shipped settings ([pipeline] and [transcription] defaults: 2 workers, poll delay 1 s,
    # idle poll 2 s), with one recognizer kept warm through the whole run.
    settings = Settings(
        database={"url": f"sqlite:///{work / 'conveyor.db'}"},
        storage={"root": work / "data"},
        transcription={"threads": THREADS, "beam_size": BEAM, "processes": 1, "idle_exit": 600},
    )
    runtime = Runtime(settings)
    runtime.migrate()
    pool = runtime.pool()
    pool.start()

    def run(batch: list[Path]) -> float:
        started = time.perf_counter()
        ids = [
            # The warm-up's jfk.wav is among the timed clips too: recognised again, not refused.
            accept_audio(
                runtime.engine, runtime.store, runtime.clock, c, owner="bench", keep_duplicate=True
            )
            for c in batch
        ]
        runtime.notifier.publish()
        while True:
            # Every advance wakes the notifier's waiters: look when something moved.
            since = runtime.notifier.generation
            with runtime.engine.connect() as conn:
                waiting = conn.execute(
                    select(func.count())
                    .select_from(audio_records)
                    .where(audio_records.c.id.in_(ids), audio_records.c.stage != "done",
                           audio_records.c.halted_at.is_(None))
                ).scalar_one()  # fmt: skip
            if waiting == 0:
                return time.perf_counter() - started
            runtime.notifier.wait(since, 0.5)

    try:
        run([CORPUS / "silence_1s.wav", CORPUS / "jfk.wav"])  # warm-up: the model loads here
        return run(clips)
    finally:
        pool.stop()


# The long-recording pattern: a clip, then a pause (seconds); repeated to the length asked.
PATTERN = [
    ("jfk.wav", 1.0),
    ("LDC93S1_8k_mono.wav", 30.0),
    ("sense_and_sensibility_0880.wav", 120.0),
    ("cards_005.wav", 300.0),
]


def long_recording(path: Path, minutes: float) -> float:
    """Write ``minutes`` of the pattern to a 16 kHz mono WAV, streamed; returns the seconds of
    speech (clip lengths) in it."""
    import wave

    import numpy as np
    from faster_whisper import decode_audio

    clips = {name: decode_audio(str(CORPUS / name), sampling_rate=16_000) for name, _ in PATTERN}
    total = int(minutes * 60 * 16_000)
    written = 0
    speech = 0.0
    with wave.open(str(path), "wb") as sink:
        sink.setnchannels(1)
        sink.setsampwidth(2)
        sink.setframerate(16_000)
        while written < total:
            for name, pause in PATTERN:
                audio = (clips[name] * 32767).astype("<i2")[: total - written]
                sink.writeframes(audio.tobytes())
                written += audio.size
                speech += audio.size / 16_000
                gap = min(int(pause * 16_000), total - written)
                for start in range(0, gap, 16_000 * 60):  # a minute of silence at a time
                    sink.writeframes(np.zeros(min(16_000 * 60, gap - start), "<i2").tobytes())
                written += gap
                if written >= total:
                    break
    return speech


def peak_rss(minutes: float, work: Path) -> dict[str, Any]:
    """Run one recognizer job on ``minutes`` of the pattern; its peak RSS and what it heard."""
    import os
    import subprocess
    import sys

    from conveyor.providers.supervisor import write_job_file
    from conveyor.providers.whisper_model import resolve_model
    from conveyor.runtime import default_model_cache

    job_dir = work / f"job-{minutes:g}"
    job_dir.mkdir()
    speech = long_recording(job_dir / "input.wav", minutes)
    write_job_file(
        job_dir / "job.json",
        {
            "input": str(job_dir / "input.wav"),
            "language": "en",
            "initial_prompt": None,
            "channels": False,
            "model": resolve_model("base", default_model_cache()),
            "device": "cpu",
            "compute_type": "int8",
            "threads": THREADS,
            "beam_size": BEAM,
        },
    )
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "conveyor.providers.whisper_job", str(job_dir)],
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    result = json.loads((job_dir / "result.json").read_text(encoding="utf-8"))
    return {
        "minutes": minutes,
        "speech_s": round(speech, 1),
        "exit_status": status,
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # Linux: KiB
        "seconds": round(elapsed, 1),
        "segments": len(result["segments"]),
        "words": sum(len(s.get("words") or []) for s in result["segments"]),
    }


def memory(lengths: list[float]) -> None:
    """Print the recognizer's peak RSS for each length, and whether the longest stays within
    1.2 x the shortest."""
    with tempfile.TemporaryDirectory(prefix="bench-recognition-memory-") as work:
        runs = [peak_rss(minutes, Path(work)) for minutes in sorted(lengths)]
    ratio = runs[-1]["peak_rss_mib"] / runs[0]["peak_rss_mib"]
    print(
        json.dumps(
            {
                "runs": runs,
                "longest_vs_shortest": round(ratio, 3),
                "target": "peak RSS of the longest within 1.2 x the shortest's",
                "met": ratio <= 1.2,
            },
            indent=2,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--memory",
        type=float,
        nargs="+",
        metavar="MINUTES",
        help="measure the recognizer's peak RSS on recordings of these lengths instead",
    )
    args = parser.parse_args()
    if not CORPUS.is_dir():
        raise SystemExit(
            f"the audio corpus is not at {CORPUS}; this benchmark needs it (see the README, "
            "'Tests, benchmarks and the test corpus')"
        )
    if args.memory:
        memory(args.memory)
        return
    from faster_whisper import WhisperModel

    from conveyor.providers.whisper_model import resolve_model
    from conveyor.runtime import default_model_cache

    clips = [CORPUS / name for name in CLIPS]
    model = WhisperModel(
        resolve_model("base", default_model_cache()),
        device="cpu",
        compute_type="int8",
        cpu_threads=THREADS,
        local_files_only=True,
    )
    direct(clips[:1], model)  # warm-up
    direct_runs, pipeline_runs = [], []
    for _ in range(args.repeat):
        direct_runs.append(direct(clips, model))
        with tempfile.TemporaryDirectory(prefix="bench-recognition-") as work:
            pipeline_runs.append(pipeline(clips, Path(work)))
    best_direct, best_pipeline = min(direct_runs), min(pipeline_runs)
    ratio = best_pipeline / best_direct
    print(
        json.dumps(
            {
                "clips": len(clips),
                "direct_s_per_clip": round(best_direct / len(clips), 3),
                "pipeline_s_per_clip": round(best_pipeline / len(clips), 3),
                "pipeline_vs_direct": round(ratio, 3),
                "target": "pipeline within 5 % of direct",
                "met": ratio <= 1.05,
                "runs": {"direct": direct_runs, "pipeline": pipeline_runs},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
