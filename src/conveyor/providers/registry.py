"""The recognition providers ``[transcription] provider`` can name: one module per name in
:mod:`conveyor.providers.backends`, each built, asked for its languages and checked the same way.

A provider implements :class:`~conveyor.providers.base.RecognitionProvider`; its module in
``providers/backends/`` (named as the setting names it) holds ``BACKEND``, a
:class:`ProviderBackend` that says how to build it, which languages it accepts, the model it
answers with, and why it cannot run on this machine (:attr:`ProviderBackend.check`, for
start-up), and, when the provider has keys of its own, ``SETTINGS``: their
:class:`~conveyor.provider_settings.ProviderSettings` model, which the settings take as the
section ``[transcription.<name>]``. Adding a provider is adding that module. The names the setting
accepts are the modules there (:func:`names`, :func:`backend_for`); a backend module imports its
provider's code only when the provider is built, so a process never loads a provider it does
not use.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from conveyor.clock import Clock
from conveyor.errors import ConfigError

if TYPE_CHECKING:
    from conveyor.config import TranscriptionSettings
    from conveyor.providers.base import RecognitionProvider

# Neither the settings nor the backends package are imported here at first: the settings import
# every backend module to find its own section (conveyor.config.provider_sections), and a
# backend module imports this one for ProviderBackend.

__all__ = ["ProviderBackend", "ProviderPlace", "backend_for", "language_problem", "names"]


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
    """One provider as the runtime needs it (a backend module's ``BACKEND``).

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


def names() -> list[str]:
    """The names ``[transcription] provider`` accepts: one per backend module."""
    from conveyor.providers import backends

    return sorted(m.name for m in pkgutil.iter_modules(backends.__path__))


def backend_for(settings: TranscriptionSettings) -> ProviderBackend:
    """The backend ``[transcription] provider`` names.

    Raises:
        ConfigError: no provider of that name, said as a settings error is (where it was set,
            the key, the names there are).
    """
    from conveyor.config import PROVIDER_BACKENDS, setting_origin

    known = names()
    if settings.provider not in known:
        where = ("transcription", "provider")
        raise ConfigError(
            f"{setting_origin(where)}[transcription] provider: {settings.provider!r} is not a "
            f"provider; use one of {', '.join(known)}"
        )
    module = importlib.import_module(f"{PROVIDER_BACKENDS}.{settings.provider}")
    backend: ProviderBackend = module.BACKEND
    return backend


def language_problem(settings: TranscriptionSettings) -> str | None:
    """Why ``[transcription] language`` is not a code the configured recognizer knows (where it
    was set, the key, what to use), or None. The command line checks it as it reads the
    settings, so every command stops on it (exit 2), not only those that store recordings. The
    code list is the provider's own (:meth:`ProviderBackend.languages`), asked only when a
    language is set.

    Raises:
        ConfigError: ``[transcription] provider`` names no provider.
    """
    from conveyor.config import setting_origin

    language = settings.language
    if language is None or language in backend_for(settings).languages(settings):
        return None
    return (
        f"{setting_origin(('transcription', 'language'))}[transcription] language: "
        f"{language!r} is not a language code the recognizer knows; use an ISO 639-1 code such "
        "as en, de or ru, or leave it unset to detect the language"
    )
