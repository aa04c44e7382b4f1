"""A store with no room: uploads onto a full folder answer 507 ``storage_full`` saying that the
storage is full (never 503 "does not answer", never the folder's path), ``/healthz`` answers 503
saying the storage is full, the log says "storage full" once and "takes writes again" once (never
"reachable again" while it is full), and uploads are taken again once there is space. A bucket
whose S3 server answers writes 507 ``XMinioStorageFull`` (MinIO with full drives) answers the
same 507."""

from __future__ import annotations

import errno
import logging
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from conveyor.accounts import add_user, create_token
from conveyor.api.app import create_app
from conveyor.config import StorageSettings
from conveyor.objects import STORAGE, StorageFull, open_store
from conveyor.objects.outage import is_storage_full, is_storage_outage
from conveyor.runtime import Runtime
from tests.support.full_disk import file_size_limit, fill, small_disk
from tests.support.http_fault_proxy import HttpFaultProxy
from tests.support.s3server import PART, S3Server
from tests.support.settings import build_settings


def _client(runtime: Runtime) -> tuple[TestClient, dict[str, str]]:
    add_user(runtime.engine, runtime.clock, "alice")
    token = create_token(runtime.engine, runtime.clock, "alice").token
    client = TestClient(create_app(runtime), raise_server_exceptions=False)
    return client, {"Authorization": f"Bearer {token}"}


def test_an_upload_onto_a_full_disk_is_507_storage_full(
    engine: Engine, tmp_path: Path, corpus: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    other = (corpus / "audio" / "cards_005.wav").read_bytes()
    STORAGE.reset()
    with small_disk(tmp_path / "disk") as disk:
        runtime = Runtime(build_settings(tmp_path, storage={"root": disk}), engine=engine)
        client, auth = _client(runtime)
        caplog.set_level(logging.INFO)
        with client:
            assert (
                client.post("/api/records?name=a.wav", content=wav, headers=auth).status_code == 201
            )
            filler = fill(disk)
            answers = [
                client.post("/api/records?name=b.wav", content=other, headers=auth)
                for _ in range(2)
            ]
            for answer in answers:
                assert answer.status_code == 507, answer.text
                error = answer.json()["error"]
                assert error["code"] == "storage_full"
                assert error["message"].startswith("the storage is full: it has no space left")
                assert str(disk) not in answer.text  # the path is the operator's
            assert len(client.get("/api/records", headers=auth).json()["items"]) == 1
            # /healthz says so for as long as it lasts, and the outage does not end meanwhile
            # (a folder that answers a write check is not one that takes writes).
            deadline = time.monotonic() + STORAGE.settle * 3
            while time.monotonic() < deadline:
                health = client.get("/healthz")
                assert health.status_code == 503, health.text
                assert health.json()["error"]["code"] == "unavailable"
                assert health.json()["error"]["message"] == (
                    "the storage is full: it has no space left for uploads"
                )
                time.sleep(0.1)
            assert STORAGE.down and STORAGE.full
            filler.unlink()
            again = client.post("/api/records?name=b.wav", content=other, headers=auth)
            assert again.status_code == 201, again.text
            deadline = time.monotonic() + 20
            while STORAGE.down:  # answers for the settle time end the outage
                assert time.monotonic() < deadline, "the outage never ended"
                client.get("/healthz")
                time.sleep(0.1)
            assert client.get("/healthz").json()["storage"] == "ok"
        STORAGE.reset()
    said = [r.getMessage() for r in caplog.records if r.name == "conveyor.objects"]
    assert len(said) == 2, said  # once as the outage starts, once as it ends
    assert said[0].startswith("storage full (first met by the API): StorageFull: ")
    assert f"the storage folder {disk} is full (No space left on device)" in said[0]
    assert said[0].endswith("further failures are not logged until it takes writes again")
    assert said[1].startswith("storage takes writes again after ")
    assert not [m for m in said if "reachable" in m]
    assert [r for r in caplog.records if r.exc_info] == [], "no tracebacks"


def test_a_file_too_large_for_the_folder_is_507_and_no_outage(
    engine: Engine, tmp_path: Path, corpus: Path
) -> None:
    runtime = Runtime(build_settings(tmp_path), engine=engine)
    client, auth = _client(runtime)
    big = (corpus / "audio" / "jfk.wav").read_bytes() * 8  # 2.8 MB
    STORAGE.reset()
    with client:
        with file_size_limit(2 * 1024 * 1024):
            answer = client.post("/api/records?name=big.wav", content=big, headers=auth)
        assert answer.status_code == 507, answer.text
        assert answer.json()["error"] == {
            "status": 507,
            "code": "storage_full",
            "message": "the storage cannot take a file this large; nothing was kept",
        }
        assert not STORAGE.down  # waiting would not make the file fit
        assert client.get("/healthz").json()["storage"] == "ok"


def test_a_full_bucket_is_507_storage_full_like_a_full_folder(
    engine: Engine,
    s3_server: S3Server,
    tmp_path: Path,
    corpus: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A real S3 server behind a proxy that answers writes as MinIO does with full drives
    (507 ``XMinioStorageFull``): uploads answer 507 ``storage_full``, not 503, naming neither
    bucket nor endpoint; the log says "storage full" once, naming the bucket."""
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    proxy = HttpFaultProxy(s3_server.endpoint)
    STORAGE.reset()
    try:
        bucket = s3_server.bucket()
        storage = {
            **s3_server.storage_settings(bucket),
            "endpoint": proxy.endpoint,
            "root": tmp_path / "data",
        }
        runtime = Runtime(build_settings(tmp_path, storage=storage), engine=engine)
        client, auth = _client(runtime)
        caplog.set_level(logging.INFO)
        with client:
            proxy.full = True
            answers = [
                client.post("/api/records?name=a.wav", content=wav, headers=auth) for _ in range(2)
            ]
            for answer in answers:
                assert answer.status_code == 507, answer.text
                error = answer.json()["error"]
                assert error["code"] == "storage_full"
                assert error["message"].startswith("the storage is full: it has no space left")
                assert bucket not in answer.text and proxy.endpoint not in answer.text
            assert STORAGE.down and STORAGE.full
            assert client.get("/api/records", headers=auth).json()["items"] == []
            proxy.full = False
            again = client.post("/api/records?name=a.wav", content=wav, headers=auth)
            assert again.status_code == 201, again.text
    finally:
        proxy.close()
        STORAGE.reset()
    said = [r.getMessage() for r in caplog.records if r.name == "conveyor.objects"]
    assert len(said) == 1, said
    assert said[0].startswith("storage full (first met by the API): StorageFull: ")
    assert f"the storage bucket s3://{bucket}/ at {proxy.endpoint} is full" in said[0]
    assert [r for r in caplog.records if r.exc_info] == [], "no tracebacks"


@pytest.mark.parametrize("size", [1024, PART + 1], ids=["one-put", "multipart"])
def test_a_full_bucket_raises_storage_full_an_outage_told_as_full(
    s3_server: S3Server, tmp_path: Path, size: int
) -> None:
    """The bucket store raises the folder store's :class:`StorageFull` (``ENOSPC``) for a
    single put and for a multipart upload alike: the executor's outage check takes it as a
    full storage to wait for, and nothing is left under the key."""
    bucket = s3_server.bucket()
    proxy = HttpFaultProxy(s3_server.endpoint)
    try:
        keys = {**s3_server.storage_settings(bucket), "endpoint": proxy.endpoint}
        store = open_store(StorageSettings(**keys, part_size=PART, work_dir=tmp_path / "w"))
        proxy.full = True
        with pytest.raises(StorageFull) as raised:
            store.put("media/1/x.bin", [b"x" * size])
        assert raised.value.errno == errno.ENOSPC and raised.value.no_room
        assert raised.value.what == "bucket"
        assert is_storage_outage(raised.value) and is_storage_full(raised.value)
        proxy.full = False
        assert not store.exists("media/1/x.bin")
    finally:
        proxy.close()
