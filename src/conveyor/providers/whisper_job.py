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

What a job gives is :func:`conveyor.providers.whisper_recognise.recognise`'s document.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from conveyor.providers.supervisor import (
    ERROR_FILE,
    JOB_FILE,
    LOCK_FILE,
    LOG_FILE,
    PID_FILE,
    RESULT_FILE,
    start_ticks,
    write_job_file,
)
from conveyor.providers.whisper_recognise import recognise

__all__ = ["load_model", "main", "run_job", "serve"]


def load_model(job: dict[str, Any]) -> Any:
    """The job's Whisper model (``job``: ``model``, ``device``, ``compute_type``, ``threads``),
    from local files only, with CTranslate2's random seed set to 0.

    The seed matters only where Whisper's temperature fallback samples (decoding at
    temperature 0 draws nothing at random). CTranslate2 seeds a thread's generator once, when
    that thread first samples, and a model's threads are its own, so the seed fixes the draws
    of the first job after each load: a one-shot job (``run_job``) samples alike when rerun with
    the same settings on the same machine. A warm recognizer's later jobs draw on from where
    the earlier ones left off, so a job that falls back to sampling there may give other text
    than the same recording gave before.
    """
    import ctranslate2
    from faster_whisper import WhisperModel

    # Only the first job after this load starts from it (a generator per thread, seeded once).
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


def _fixed_mmap_threshold() -> None:
    """Give large blocks back to the system when freed (glibc; elsewhere nothing happens).

    A window of audio and its features are tens of MB, allocated and freed once per window.
    glibc raises its mmap threshold each time such a block is freed, so later ones come from
    the heap, which fragments and never shrinks: the process grew by about 100 MB between a
    10-minute and a 60-minute recording. A fixed threshold keeps every large block mmapped.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(name)
        libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD: blocks of 1 MiB and more are mmapped


def main(argv: list[str] | None = None) -> int:
    """Serve (``--serve WORK_DIR SLOT IDLE_EXIT``) or run the job in ``argv[0]``; returns the
    process exit code."""
    _fixed_mmap_threshold()
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
