"""The recognition providers ``[transcription] provider`` can name, each built, asked for its
languages and checked in one place.

A provider implements :class:`~conveyor.providers.base.RecognitionProvider` in a module of its
own; its entry here says how to build it, which languages it accepts, the model it answers with,
and why it cannot run on this machine (:attr:`ProviderBackend.check`, for start-up). The names
``[transcription] provider`` accepts are this registry's (:func:`backend_for`). The runtime
picks the entry once; an entry imports its module only when chosen, so a process never loads a
provider it does not use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from conveyor.clock import Clock
from conveyor.config import TranscriptionSettings, setting_origin
from conveyor.errors import ConfigError

if TYPE_CHECKING:
    from conveyor.providers.base import RecognitionProvider

__all__ = ["PROVIDERS", "ProviderBackend", "ProviderPlace", "backend_for"]


@dataclass(frozen=True)
class ProviderPlace:
    """Where a provider keeps its files, and the clock it reads.

    Attributes:
        root: ``[storage] root``; a provider keeps its state in a subfolder of its own.
        model_cache: where a local model is assembled (``[transcription] model_cache``, or the
            user's cache folder).
        clock: the runtime's clock.
    """

    root: Path
    model_cache: Path
    clock: Clock


def _no_problem(_settings: TranscriptionSettings) -> str | None:
    return None


@dataclass(frozen=True)
class ProviderBackend:
    """One provider as the runtime needs it.

    Attributes:
        build: the provider for ``[transcription]``.
        languages: the language codes it accepts (without loading a model).
        model: the model it recognises with, as ``GET /v1/models`` names it.
        check: why it cannot run here, for the start-up of a worker, or None.
    """

    build: Callable[[TranscriptionSettings, ProviderPlace], RecognitionProvider]
    languages: Callable[[TranscriptionSettings], frozenset[str]]
    model: Callable[[TranscriptionSettings], str]
    check: Callable[[TranscriptionSettings], str | None] = _no_problem


def _build_local(settings: TranscriptionSettings, place: ProviderPlace) -> RecognitionProvider:
    from conveyor.providers.local import LocalWhisperProvider

    return LocalWhisperProvider(
        settings, place.root / "recognizer", model_cache_dir=place.model_cache
    )


def _whisper_languages(_settings: TranscriptionSettings) -> frozenset[str]:
    from conveyor.providers.local import whisper_languages

    return whisper_languages()


def _check_local(settings: TranscriptionSettings) -> str | None:
    from conveyor.providers.local import device_problem

    return device_problem(settings)


def _build_speechkit(settings: TranscriptionSettings, place: ProviderPlace) -> RecognitionProvider:
    from conveyor.providers.speechkit import SpeechKitProvider

    return SpeechKitProvider(
        settings.speechkit, place.root / "providers" / "speechkit", clock=place.clock
    )


def _speechkit_languages(_settings: TranscriptionSettings) -> frozenset[str]:
    from conveyor.providers.speechkit import LANGUAGES

    return frozenset(LANGUAGES)


def _build_openai(settings: TranscriptionSettings, place: ProviderPlace) -> RecognitionProvider:
    from conveyor.providers.local import whisper_languages
    from conveyor.providers.openai_compatible import OpenAICompatibleProvider

    return OpenAICompatibleProvider(
        settings.openai, whisper_languages(), place.root / "providers" / "openai"
    )


#: ``[transcription] provider`` → its backend.
PROVIDERS: dict[str, ProviderBackend] = {
    "local": ProviderBackend(
        _build_local, _whisper_languages, lambda s: s.model, check=_check_local
    ),
    "speechkit": ProviderBackend(
        _build_speechkit, _speechkit_languages, lambda s: s.speechkit.model
    ),
    "openai": ProviderBackend(_build_openai, _whisper_languages, lambda s: s.openai.model),
}


def backend_for(settings: TranscriptionSettings) -> ProviderBackend:
    """The backend ``[transcription] provider`` names.

    Raises:
        ConfigError: no provider of that name, said as a settings error is (where it was set,
            the key, the names there are).
    """
    backend = PROVIDERS.get(settings.provider)
    if backend is None:
        where = ("transcription", "provider")
        raise ConfigError(
            f"{setting_origin(where)}[transcription] provider: {settings.provider!r} is not a "
            f"provider; use one of {', '.join(sorted(PROVIDERS))}"
        )
    return backend
