"""``object_store``: every store test runs on the ``file:`` folder and on a real S3 server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conveyor.config import StorageSettings
from conveyor.objects import ObjectStore, open_store
from s3server import S3Server

# The smallest part S3 allows, so multipart uploads are exercised with small objects.
PART = 5 * 1024 * 1024


@pytest.fixture(params=["file", "s3"])
def storage_keys(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """``[storage]`` keys (JSON-able) of an empty store: a fresh folder, or a fresh bucket on
    the session's moto server."""
    keys: dict[str, Any] = {"work_dir": str(tmp_path / "work"), "part_size": PART}
    if request.param == "file":
        return {**keys, "root": str(tmp_path / "objects")}
    server: S3Server = request.getfixturevalue("s3_server")
    return {**keys, **server.storage_settings(server.bucket(), "pre/fix")}


@pytest.fixture
def object_store(storage_keys: dict[str, Any]) -> ObjectStore:
    """The store ``storage_keys`` name."""
    return open_store(StorageSettings(**storage_keys))
