"""Start-up checks of a process that runs audio workers: the recognizer can be built here.

A setting the recognizer cannot use (a GPU that is not there, a compute type the device does not
support, a model that is not installed) would otherwise fail every record five times and halt it
``attempts_exhausted``; here it stops the command before any record is touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conveyor.cli.exits import ExitCode
from conveyor.cli.output import fail

if TYPE_CHECKING:
    from conveyor.runtime import Runtime

__all__ = ["check_language", "check_recognizer"]


def check_language(runtime: Runtime) -> None:
    """Stop with :attr:`ExitCode.USAGE` when ``[transcription] language`` is set to a code the
    recognizer does not know, naming where it was set (the file and line, or the variable), as
    every other configuration mistake is; a command that stores recordings checks it before
    the first one, whether or not it runs workers."""
    from conveyor.config import setting_origin

    language = runtime.settings.transcription.language
    if language is None or language in runtime.languages:
        return
    where = setting_origin(("transcription", "language"))
    raise fail(
        f"invalid configuration: {where}[transcription] language: {language!r} is not a "
        "language code the recognizer knows; use an ISO 639-1 code such as en, de or ru, or "
        "leave it unset to detect the language",
        ExitCode.USAGE,
    )


def check_recognizer(runtime: Runtime) -> None:
    """Stop with :attr:`ExitCode.USAGE` when the configured recognizer cannot run here (its
    device, compute type, model, or a language it does not know)."""
    from conveyor.errors import ConfigError

    check_language(runtime)
    problem = runtime.provider_backend.check(runtime.settings.transcription)
    if problem is not None:
        raise fail(f"invalid configuration: {problem}", ExitCode.USAGE)
    try:
        runtime.provider  # noqa: B018 - a bad model or language fails before any record
    except ConfigError as exc:
        raise fail(f"invalid configuration: {exc}", ExitCode.USAGE) from None
