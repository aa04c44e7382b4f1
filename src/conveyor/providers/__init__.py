"""Speech recognition providers: the protocol the pipeline uses and its implementations.

* ``local``: faster-whisper in recognizer processes on this machine (:mod:`.local`);
* ``speechkit``: Yandex SpeechKit v3 asynchronous recognition (:mod:`.speechkit`);
* ``openai``: any OpenAI-compatible ``/v1/audio/transcriptions`` server (:mod:`.openai_compatible`).
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

#: Each public name's module, imported on first use (PEP 562): a halt reason of
#: :mod:`~conveyor.providers.halts` is read without loading the protocol or the local
#: recognizer's supervisor.
_HOME = {
    **dict.fromkeys(["LocalWhisperProvider"], "local"),
    **dict.fromkeys(["BASE_MODEL_SHA256", "BASE_MODEL_SIZE", "resolve_model"], "whisper_model"),
}


def __getattr__(name: str) -> object:
    module = _HOME.get(name, "base")
    if module == "base" and name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # asked once
    return value


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
