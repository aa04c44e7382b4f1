"""``[transcription] provider = "speechkit"``: Yandex SpeechKit v3 asynchronous recognition."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from conveyor.provider_settings import ProviderSettings
from conveyor.providers.registry import ProviderBackend, ProviderPlace

if TYPE_CHECKING:
    from conveyor.config import TranscriptionSettings
    from conveyor.providers.base import RecognitionProvider

__all__ = ["BACKEND", "SETTINGS", "SpeechKitSettings"]


class SpeechKitSettings(ProviderSettings):
    """``[transcription.speechkit]``: Yandex SpeechKit v3 asynchronous recognition.

    The credential is never written here (D16): it is read from the file ``key_file`` names, else
    from the environment variable ``key_env``.
    """

    endpoint: str = "https://stt.api.cloud.yandex.net"
    """Base URL of the recognition API (``/stt/v3/recognizeFileAsync``, ``/stt/v3/getRecognition``
    are appended)."""
    operation_endpoint: str = "https://operation.api.cloud.yandex.net"
    """Base URL of the Operation service (``/operations/{id}``)."""
    model: str = "general"
    """Recognition model: ``general``, ``general:rc``, or ``deferred-general`` (cheaper; done
    within 24 h)."""
    auth: Literal["api_key", "iam_token"] = "api_key"
    """Which credential the key is: a service account's API key, or an IAM token."""
    key_env: str = "SPEECHKIT_API_KEY"
    """Environment variable holding the credential (when ``key_file`` is unset)."""
    key_file: Path | None = None
    """File holding only the credential."""
    audio_uri: str | None = None
    """Send an Object Storage link instead of the bytes: a prefix such as
    ``https://storage.yandexcloud.net/<bucket>/`` to which the normalized audio's object key is
    appended (the bucket must hold the store's objects). Unset = the audio travels inline."""
    poll_quota_per_hour: int = Field(default=2500, ge=1)
    """Operation checks this process may make per hour (SpeechKit allows 2,500 per account)."""
    timeout: float = Field(default=60.0, gt=0)
    """Seconds an HTTP call may take."""


SETTINGS = SpeechKitSettings


def _build(settings: TranscriptionSettings, place: ProviderPlace) -> RecognitionProvider:
    from conveyor.providers.speechkit import SpeechKitProvider

    return SpeechKitProvider(
        SpeechKitSettings.of(settings), place.root / "providers" / "speechkit", clock=place.clock
    )


def _languages(_settings: TranscriptionSettings) -> frozenset[str]:
    from conveyor.providers.speechkit import LANGUAGES

    return frozenset(LANGUAGES)


BACKEND = ProviderBackend(_build, _languages, lambda s: SpeechKitSettings.of(s).model)
