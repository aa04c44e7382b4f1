"""``[storage]`` as a new user meets it: URLs checked, a bucket that cannot be used named with
the reason at start-up, and the credential never shown (D16)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from conveyor.config import Settings, StorageSettings
from conveyor.objects import LocalStore, open_store
from conveyor.objects.factory import backends
from tests.support.s3server import S3Server

CONVEYOR = str(Path(sys.executable).with_name("conveyor"))
SECRET = "do-not-show-this-secret-0123456789"


def test_a_url_without_a_scheme_is_refused_with_the_settings() -> None:
    with pytest.raises(ValidationError, match=r"file: .* s3://bucket/prefix"):
        StorageSettings(url="bucket")


@pytest.mark.parametrize("url", ["s3:/bucket", "s3://", "http://bucket", "s3://UP"])
def test_a_bad_url_is_refused_by_its_backend(url: str, tmp_path: Path) -> None:
    """The scheme picks the backend (``conveyor.objects.stores``), which reads the rest; the CLI
    says ``invalid configuration`` and exits 2 (``make_runtime``)."""
    known = ", ".join(f"{name}:" for name in backends())  # every backend, however many
    with pytest.raises(ValueError, match=rf"s3://bucket/prefix|no store for 'http'; use {known}"):
        open_store(StorageSettings(url=url, root=tmp_path))


def test_root_alone_keeps_working(tmp_path: Path) -> None:
    """Existing configurations name only ``[storage] root``: the objects stay in that folder."""
    store = open_store(Settings(storage={"root": tmp_path / "data"}).storage)  # type: ignore[arg-type]
    assert isinstance(store, LocalStore) and store.root == (tmp_path / "data").resolve()
    store.put("uploads/audio/x", [b"x"])
    assert (tmp_path / "data" / "uploads" / "audio" / "x").read_bytes() == b"x"
    other = open_store(StorageSettings(url=f"file:{tmp_path / 'elsewhere'}"))
    assert other.describe_location() == str((tmp_path / "elsewhere").resolve())


def test_the_credential_is_never_shown(s3_server: S3Server, s3_bucket: str) -> None:
    """D16: neither the settings, the store nor its errors show the secret key."""
    keys = {**s3_server.storage_settings(s3_bucket), "secret_access_key": SECRET}
    settings = StorageSettings(**keys)
    store = open_store(settings)
    store.check()
    shown = " ".join([repr(settings), str(settings), repr(store), store.describe_location()])
    assert SECRET not in shown
    missing = open_store(StorageSettings(**{**keys, "url": "s3://no-such-bucket-here"}))
    with pytest.raises(OSError, match="no-such-bucket-here") as caught:
        missing.check()
    assert SECRET not in str(caught.value)


def test_a_bucket_that_cannot_be_used_stops_the_command(
    s3_server: S3Server, tmp_path: Path
) -> None:
    env = {
        **s3_server.storage_env("no-such-bucket-here"),
        "CONVEYOR_STORAGE__SECRET_ACCESS_KEY": SECRET,
        "CONVEYOR_DATABASE__URL": f"sqlite:///{tmp_path / 'c.db'}",
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [CONVEYOR, "records", "list"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 5, done.stderr  # ExitCode.UNAVAILABLE
    assert "no-such-bucket-here" in done.stderr and "NoSuchBucket" in done.stderr
    assert SECRET not in done.stderr + done.stdout
