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
    from conveyor.config import TranscriptionSettings
    from conveyor.runtime import Runtime

__all__ = ["check_recognizer", "device_problem"]


def device_problem(settings: TranscriptionSettings) -> str | None:
    """Why ``[transcription] device`` and ``compute_type`` cannot run here, or None."""
    import ctranslate2

    device = settings.device
    if device == "auto":
        device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
    if device == "cuda" and ctranslate2.get_cuda_device_count() == 0:
        return (
            "[transcription] device = 'cuda', but no usable CUDA GPU is found; set device = "
            "'cpu' (or 'auto')"
        )
    if settings.compute_type in ("default", "auto"):
        return None
    supported = sorted(ctranslate2.get_supported_compute_types(device))
    if settings.compute_type not in supported:
        return (
            f"[transcription] compute_type = {settings.compute_type!r} is not supported on "
            f"{device} here; use one of {', '.join(supported)}"
        )
    return None


def check_recognizer(runtime: Runtime) -> None:
    """Stop with :attr:`ExitCode.USAGE` when the configured recognizer cannot run here."""
    from conveyor.errors import ConfigError

    transcription = runtime.settings.transcription
    problem = device_problem(transcription) if transcription.provider == "local" else None
    if problem is not None:
        raise fail(f"invalid configuration: {problem}", ExitCode.USAGE)
    try:
        runtime.provider  # noqa: B018 - a bad model or language fails before any record
    except ConfigError as exc:
        raise fail(f"invalid configuration: {exc}", ExitCode.USAGE) from None
