"""``[transcription] provider = "openai"``: OpenAI or any server speaking
``POST /v1/audio/transcriptions``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from conveyor.provider_settings import ProviderSettings
from conveyor.providers.registry import ProviderBackend, ProviderPlace

if TYPE_CHECKING:
    from conveyor.config import TranscriptionSettings
    from conveyor.providers.base import RecognitionProvider

__all__ = ["BACKEND", "SETTINGS", "OpenAISettings"]


class OpenAISettings(ProviderSettings):
    """``[transcription.openai]``: OpenAI or any server speaking ``POST /v1/audio/transcriptions``.

    The key is never written here (D16): it is read from the file ``key_file`` names, else from the
    environment variable ``key_env``; self-hosted servers without keys need neither.
    """

    base_url: str = "https://api.openai.com/v1"
    """Base URL; ``/audio/transcriptions`` is appended."""
    model: str = "whisper-1"
    """Model name sent with each request (``whisper-1``, ``gpt-4o-transcribe``, a local one)."""
    key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the key (when ``key_file`` is unset)."""
    key_file: Path | None = None
    """File holding only the key."""
    max_request_bytes: int = Field(default=26_214_400, ge=65_536)
    """Largest upload one request may carry (OpenAI: 25 MiB); longer recordings are split."""
    bitrate: int = Field(default=32_000, ge=6_000, le=256_000)
    """Opus bit rate in bit/s of the uploaded audio."""
    timeout: float = Field(default=600.0, gt=0)
    """Seconds one transcription request may take."""


SETTINGS = OpenAISettings


def _build(settings: TranscriptionSettings, place: ProviderPlace) -> RecognitionProvider:
    from conveyor.providers.local import whisper_languages
    from conveyor.providers.openai_compatible import OpenAICompatibleProvider

    return OpenAICompatibleProvider(
        OpenAISettings.of(settings), whisper_languages(), place.root / "providers" / "openai"
    )


def _languages(_settings: TranscriptionSettings) -> frozenset[str]:
    from conveyor.providers.local import whisper_languages

    return whisper_languages()


BACKEND = ProviderBackend(_build, _languages, lambda s: OpenAISettings.of(s).model)
