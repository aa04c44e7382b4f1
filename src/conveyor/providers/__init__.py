"""Speech recognition providers: the protocol the pipeline uses and the ``local`` provider."""

from conveyor.providers.base import (
    PollResult,
    PollState,
    RecognitionProvider,
    Segment,
    Transcript,
)
from conveyor.providers.local import LocalWhisperProvider
from conveyor.providers.whisper_model import BASE_MODEL_SHA256, BASE_MODEL_SIZE, resolve_model

__all__ = [
    "BASE_MODEL_SHA256",
    "BASE_MODEL_SIZE",
    "LocalWhisperProvider",
    "PollResult",
    "PollState",
    "RecognitionProvider",
    "Segment",
    "Transcript",
    "resolve_model",
]
