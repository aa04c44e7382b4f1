"""The object store ``[storage] url`` names: the backend module of its scheme."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Protocol, cast

from conveyor.config import StorageSettings
from conveyor.objects import stores
from conveyor.objects.store import ObjectStore
from conveyor.objects.work import WorkFolder

__all__ = ["backends", "open_store", "settings_hint", "work_folder"]


class _Backend(Protocol):
    """What a module of :mod:`conveyor.objects.stores` offers."""

    SETTINGS_HINT: str

    def from_settings(self, settings: StorageSettings, work: WorkFolder) -> ObjectStore: ...


def work_folder(settings: StorageSettings) -> WorkFolder:
    """This process's work folder under ``[storage] work_dir`` (``<root>/work`` when unset)."""
    return WorkFolder(settings.work_dir or settings.root / "work")


def backends() -> list[str]:
    """The URL schemes this build stores objects with (``file``, ``s3``), one per module."""
    return sorted(m.name for m in pkgutil.iter_modules(stores.__path__))


def open_store(settings: StorageSettings) -> ObjectStore:
    """The store ``[storage] url`` names: the backend of its scheme, which reads the rest of
    the URL itself (nothing is contacted yet).

    Raises:
        OSError: a ``file:`` folder cannot be created.
        ValueError: no backend for the scheme, or the URL or part size is not valid.
    """
    return _backend(settings).from_settings(settings, work_folder(settings))


def settings_hint(settings: StorageSettings) -> str:
    """Which settings to fix when the store ``[storage] url`` names cannot be used, in words
    (its backend's ``SETTINGS_HINT``).

    Raises:
        ValueError: no backend for the URL's scheme.
    """
    return _backend(settings).SETTINGS_HINT


def _backend(settings: StorageSettings) -> _Backend:
    scheme = settings.url.partition(":")[0]
    if scheme not in backends():
        known = ", ".join(f"{name}:" for name in backends())
        raise ValueError(f"[storage] url {settings.url!r}: no store for {scheme!r}; use {known}")
    return cast(_Backend, importlib.import_module(f"{stores.__name__}.{scheme}"))
