"""The object store ``[storage]`` asks for: ``file:`` (a folder) or ``s3://bucket/prefix``."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from conveyor.config import StorageSettings
from conveyor.objects.local import LocalStore
from conveyor.objects.store import ObjectStore
from conveyor.objects.work import WorkFolder

__all__ = ["open_store", "work_folder"]


def work_folder(settings: StorageSettings) -> WorkFolder:
    """This process's work folder under ``[storage] work_dir`` (``<root>/work`` when unset)."""
    return WorkFolder(settings.work_dir or settings.root / "work")


def open_store(settings: StorageSettings) -> ObjectStore:
    """The store ``[storage] url`` names (nothing is contacted yet for ``s3://``).

    Raises:
        OSError: a ``file:`` folder cannot be created.
        ValueError: the URL or part size is not valid.
    """
    work = work_folder(settings)
    url = settings.url
    if url.startswith("file:"):
        where = url.removeprefix("file:")
        return LocalStore(Path(where) if where else settings.root, work=work)
    from conveyor.objects.s3 import S3Store  # boto3 is loaded only when a bucket is used

    return S3Store(
        url,
        work=work,
        endpoint=settings.endpoint,
        region=settings.region,
        path_style=settings.path_style,
        access_key_id=_reveal(settings.access_key_id),
        secret_access_key=_reveal(settings.secret_access_key),
        part_size=settings.part_size,
    )


def _reveal(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value()
