"""``[transcription] provider = "openai"``: OpenAI or any server speaking
``POST /v1/audio/transcriptions``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conveyor.config import TranscriptionSettings
from conveyor.providers.registry import ProviderBackend, ProviderPlace

if TYPE_CHECKING:
    from conveyor.providers.base import RecognitionProvider

__all__ = ["BACKEND"]


def _build(settings: TranscriptionSettings, place: ProviderPlace) -> RecognitionProvider:
    from conveyor.providers.local import whisper_languages
    from conveyor.providers.openai_compatible import OpenAICompatibleProvider

    return OpenAICompatibleProvider(
        settings.openai, whisper_languages(), place.root / "providers" / "openai"
    )


def _languages(_settings: TranscriptionSettings) -> frozenset[str]:
    from conveyor.providers.local import whisper_languages

    return whisper_languages()


BACKEND = ProviderBackend(_build, _languages, lambda s: s.openai.model)
