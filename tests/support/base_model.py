"""The bundled Whisper base model loaded in the test process, as a recognizer loads it, for tests
that call the recognizer's own functions directly (no job folder, no process)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from conveyor.providers import whisper_job
from conveyor.providers.whisper_model import resolve_model
from tests.support.needs import AUDIO_CORPUS, need_corpus

__all__ = ["MODEL_CACHE", "load_base_model"]

MODEL_CACHE = Path(tempfile.gettempdir()) / "conveyor-test-models"  # shared with the other modules


def load_base_model() -> Any:
    """The base model on the CPU, int8, 2 threads, seeded (see ``whisper_job.load_model``);
    skips (fails under ``CI=true``) without the shared corpus the tests feed it."""
    need_corpus(AUDIO_CORPUS)
    job = {
        "model": resolve_model("base", MODEL_CACHE),
        "device": "cpu",
        "compute_type": "int8",
        "threads": 2,
    }
    return whisper_job.load_model(job)
