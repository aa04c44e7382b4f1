"""``[transcription] provider = "local"``: faster-whisper in recognizer processes here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conveyor.providers.registry import ProviderBackend, ProviderPlace

if TYPE_CHECKING:
    from conveyor.config import TranscriptionSettings
    from conveyor.providers.base import RecognitionProvider

__all__ = ["BACKEND"]


def _build(settings: TranscriptionSettings, place: ProviderPlace) -> RecognitionProvider:
    from conveyor.providers.local import LocalWhisperProvider

    return LocalWhisperProvider(
        settings, place.root / "recognizer", model_cache_dir=place.model_cache
    )


def _languages(_settings: TranscriptionSettings) -> frozenset[str]:
    from conveyor.providers.local import whisper_languages

    return whisper_languages()


def _check(settings: TranscriptionSettings) -> str | None:
    from conveyor.providers.local import device_problem

    return device_problem(settings)


BACKEND = ProviderBackend(_build, _languages, lambda s: s.model, check=_check)
