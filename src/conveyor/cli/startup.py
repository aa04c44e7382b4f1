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

__all__ = ["check_recognizer"]


def check_recognizer(runtime: Runtime) -> None:
    """Stop with :attr:`ExitCode.USAGE` when the configured recognizer cannot run here (its
    device, compute type or model; a language it does not know is refused as the settings are
    read, :func:`conveyor.providers.registry.language_problem`)."""
    from conveyor.errors import ConfigError

    problem = runtime.provider_backend.check(runtime.settings.transcription)
    if problem is not None:
        raise fail(f"invalid configuration: {problem}", ExitCode.USAGE)
    try:
        runtime.provider  # noqa: B018 - a bad model or language fails before any record
    except ConfigError as exc:
        raise fail(f"invalid configuration: {exc}", ExitCode.USAGE) from None
