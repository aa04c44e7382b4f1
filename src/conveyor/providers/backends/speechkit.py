"""``[transcription] provider = "speechkit"``: Yandex SpeechKit v3 asynchronous recognition."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conveyor.config import TranscriptionSettings
from conveyor.providers.registry import ProviderBackend, ProviderPlace

if TYPE_CHECKING:
    from conveyor.providers.base import RecognitionProvider

__all__ = ["BACKEND"]


def _build(settings: TranscriptionSettings, place: ProviderPlace) -> RecognitionProvider:
    from conveyor.providers.speechkit import SpeechKitProvider

    return SpeechKitProvider(
        settings.speechkit, place.root / "providers" / "speechkit", clock=place.clock
    )


def _languages(_settings: TranscriptionSettings) -> frozenset[str]:
    from conveyor.providers.speechkit import LANGUAGES

    return frozenset(LANGUAGES)


BACKEND = ProviderBackend(_build, _languages, lambda s: s.speechkit.model)
