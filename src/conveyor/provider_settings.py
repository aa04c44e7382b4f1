"""The model a recognition provider's own settings section is (``[transcription.<name>]``).

Below both the settings and the providers: a backend module in ``conveyor/providers/backends/``
subclasses :class:`ProviderSettings` for its ``SETTINGS``, and :mod:`conveyor.config` finds those
by importing the backend modules, so neither imports the other to build its own classes.
:mod:`conveyor.config` exports the same class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

__all__ = ["ProviderSettings", "SettingsSection"]


class SettingsSection(BaseModel):
    """A section of the settings (``[storage]``, ``[transcription.openai]``): an unknown key in
    it is an error, not ignored, and so is an empty path (``root = ""``), which would otherwise
    be the folder a command happens to run from."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_empty_path(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        annotation = field.annotation if field is not None else None
        is_path = annotation is Path or Path in getattr(annotation, "__args__", ())
        if is_path and isinstance(value, str) and not value.strip():
            raise ValueError("must not be empty (leave the key out for its default)")
        return value


class ProviderSettings(SettingsSection):
    """A recognition provider's own keys, ``[transcription.<name>]``: a provider with keys of
    its own declares their model as ``SETTINGS`` in its backend module
    (``conveyor/providers/backends/<name>.py``), and :class:`conveyor.config.TranscriptionSettings`
    takes each as the section named as the module, as ``[transcription] provider`` names it.
    Environment variables (``CONVEYOR_TRANSCRIPTION__<NAME>__<KEY>``), the config file's keys,
    the "did you mean" hints, relative paths (a ``Path`` key is relative to the config file's
    folder) and the hiding of secrets follow from the model, as for every other section; an
    unknown key in it is an error, not ignored.

    The docstring under each key is its documentation (``docs/operations.md`` has it, held by
    ``tests/test_docs.py``, which reads it from the source as ``scripts/config-table`` does).
    """

    # Not use_attribute_docstrings: pydantic would read each model's source file at import
    # (inspect.getmodule walks sys.modules), a third of a command's own start (~0.03 s).

    @classmethod
    def section(cls) -> str:
        """The section's name: its backend module's (``openai`` for ``backends/openai.py``)."""
        return cls.__module__.rpartition(".")[2]

    @classmethod
    def of(cls, settings: BaseModel) -> Self:
        """This provider's section of ``settings`` (``[transcription]``).

        Raises:
            TypeError: the section under its name is not of this model.
        """
        section = getattr(settings, cls.section())
        if not isinstance(section, cls):
            raise TypeError(f"[transcription.{cls.section()}] is not {cls.__name__}")
        return section
