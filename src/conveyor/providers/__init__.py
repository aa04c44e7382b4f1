"""Speech recognition providers: the protocol the pipeline uses and its implementations.

* ``local``: faster-whisper in recognizer processes on this machine (:mod:`.local`);
* ``speechkit``: Yandex SpeechKit v3 asynchronous recognition (:mod:`.speechkit`);
* ``openai``: any OpenAI-compatible ``/v1/audio/transcriptions`` server (:mod:`.openai_compatible`).
"""

from conveyor.providers.base import (
    LongPolling,
    PollResult,
    PollState,
    ProviderBusy,
    ProviderError,
    ProviderRejected,
    RecognitionProvider,
    RecognitionRequest,
    Segment,
    Submission,
    SubmitOutcomeUnknown,
    Transcript,
)
from conveyor.providers.local import LocalWhisperProvider
from conveyor.providers.whisper_model import BASE_MODEL_SHA256, BASE_MODEL_SIZE, resolve_model

__all__ = [
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
