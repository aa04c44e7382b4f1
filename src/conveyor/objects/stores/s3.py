"""The ``s3://bucket/prefix`` object store: any S3-compatible server, through boto3.

Writes are verified before they become visible: an object up to one part (``[storage]
part_size``) is sent with one ``PutObject`` after its size and SHA-256 were checked; a larger
one goes up as a multipart upload whose ``CompleteMultipartUpload`` is sent only once every part
is up and the totals match. An error aborts the upload; a process killed mid-upload leaves an
incomplete upload that no listing or read shows, and :meth:`S3Store.abort_stale_writes` (the
sweeper) aborts it later.

Credentials come from ``[storage] access_key_id``/``secret_access_key`` or boto3's usual chain
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, profiles, instance
roles). They are never logged or shown (D16): :meth:`describe_location` names bucket, prefix
and endpoint only.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import SecretStr

from conveyor.config import StorageSettings
from conveyor.error_codes import ErrorCode
from conveyor.errors import RejectedInput
from conveyor.objects.outage import is_storage_outage
from conveyor.objects.store import (
    CHUNK,
    ListedObject,
    Readable,
    Source,
    StorageFull,
    StorageUnavailable,
    StoredObject,
    WorkingCopies,
    check_key,
    chunks_of,
    verify,
)
from conveyor.objects.work import WorkFolder
from conveyor.sizes import human_size

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef

__all__ = ["MIN_PART_SIZE", "SETTINGS_HINT", "S3Store", "from_settings", "parse_s3_url"]

#: What to change when the bucket cannot be used (said by the CLI after the reason).
SETTINGS_HINT = (
    "check [storage] url, endpoint, region, path_style and the credential (AWS_ACCESS_KEY_ID / "
    "AWS_SECRET_ACCESS_KEY or [storage] access_key_id / secret_access_key)"
)

#: The smallest part S3 accepts (every part but the last).
MIN_PART_SIZE = 5 * 1024 * 1024
_MISSING = frozenset({"NoSuchKey", "404", "NotFound"})
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
#: The error code MinIO answers a write with once its drives are past their free-space
#: threshold (HTTP 507 Insufficient Storage; MinIO before 2020 said it with a 500).
_FULL_CODES = frozenset({"XMinioStorageFull"})
#: RFC 4918's Insufficient Storage: whatever server answers a write with it has no room.
_INSUFFICIENT_STORAGE = 507


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` → ``("bucket", "some/prefix/")`` (prefix ``""`` when none).

    Raises:
        ValueError: not an ``s3://`` URL with a bucket name.
    """
    parts = urlsplit(url)
    if parts.scheme != "s3" or not _BUCKET.fullmatch(parts.netloc) or parts.query or parts.fragment:
        raise ValueError(
            f"[storage] url {url!r} is not s3://bucket/prefix (a bucket name is 3-63 lower-case "
            "letters, digits, dots and hyphens), e.g. s3://conveyor-objects/prod"
        )
    prefix = parts.path.strip("/")
    if prefix:
        check_key(prefix)
        prefix += "/"
    return parts.netloc, prefix


def _no_room(exc: ClientError) -> bool:
    """True when the server refused a write for want of room: MinIO's ``XMinioStorageFull`` or
    any HTTP 507. (``EntityTooLarge`` is a single request over S3's size limit, not a full
    bucket; AWS itself never fills.)"""
    code = str(exc.response.get("Error", {}).get("Code", ""))
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return code in _FULL_CODES or status == _INSUFFICIENT_STORAGE


def _missing(exc: ClientError) -> bool:
    return str(exc.response.get("Error", {}).get("Code", "")) in _MISSING


class S3Store(WorkingCopies):
    """Objects in ``bucket`` under ``prefix``; the key ``audio/12/x.wav`` is the S3 key
    ``<prefix>audio/12/x.wav``.

    Args:
        url: ``s3://bucket`` or ``s3://bucket/prefix``.
        work: this process's work folder for local copies.
        endpoint: the server's URL (``https://storage.yandexcloud.net``,
            ``http://127.0.0.1:9000``); AWS when None.
        region: the signing region (``AWS_DEFAULT_REGION`` or ``us-east-1`` when None).
        path_style: address buckets as ``endpoint/bucket`` instead of ``bucket.endpoint``
            (MinIO, moto, most self-hosted servers).
        access_key_id: with ``secret_access_key``, the credential; boto3's chain when None.
        part_size: bytes per multipart part and the size above which uploads are multipart
            (at least :data:`MIN_PART_SIZE`).
    """

    def __init__(
        self,
        url: str,
        *,
        work: WorkFolder,
        endpoint: str | None = None,
        region: str | None = None,
        path_style: bool = False,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        part_size: int = 8 * 1024 * 1024,
    ) -> None:
        self.bucket, self.prefix = parse_s3_url(url)
        if part_size < MIN_PART_SIZE:
            raise ValueError(
                f"[storage] part_size must be at least {MIN_PART_SIZE} bytes "
                f"({human_size(MIN_PART_SIZE)})"
            )
        self.work = work
        self.endpoint = endpoint
        self.region = region or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        self.path_style = path_style
        self.part_size = part_size
        self.__credentials = (access_key_id, secret_access_key)
        self._lock = threading.Lock()
        self._clients: dict[str, tuple[int, S3Client]] = {}

    def __repr__(self) -> str:  # never the credential (D16)
        return f"S3Store({self.describe_location()!r})"

    def describe_location(self) -> str:
        """``s3://bucket/prefix`` and the endpoint; never a credential."""
        where = f"s3://{self.bucket}/{self.prefix}"
        return f"{where} at {self.endpoint}" if self.endpoint else where

    @property
    def client(self) -> S3Client:
        """The boto3 client of this process (a forked child makes its own)."""
        return self._client_of("work")

    def _client_of(self, use: str) -> S3Client:
        pid = os.getpid()
        with self._lock:
            made = self._clients.get(use)
            if made is None or made[0] != pid:
                key_id, secret = self.__credentials
                session = boto3.session.Session()
                # The probe (check, /healthz) asks once and gives up fast: a health check
                # must answer within its prober's timeout, whatever the bucket does.
                probe = use == "probe"
                client = session.client(
                    "s3",
                    endpoint_url=self.endpoint,
                    region_name=self.region,
                    aws_access_key_id=key_id,
                    aws_secret_access_key=secret,
                    config=Config(
                        s3={"addressing_style": "path" if self.path_style else "auto"},
                        # Three tries ride out a blip; a real outage answers the API's
                        # client 503 within seconds rather than after a minute of back-off.
                        retries={"max_attempts": 1 if probe else 3, "mode": "standard"},
                        connect_timeout=2 if probe else 10,
                        read_timeout=5 if probe else 60,
                        # Older S3-compatible servers reject the CRC checksums newer boto3
                        # sends by default; we verify SHA-256 ourselves.
                        request_checksum_calculation="when_required",
                        response_checksum_validation="when_required",
                        max_pool_connections=2 if probe else 32,
                    ),
                )
                made = self._clients[use] = (pid, client)
            return made[1]

    def check(self) -> None:
        """See :meth:`conveyor.objects.ObjectStore.check`: the bucket answers a listing."""
        try:
            self._client_of("probe").list_objects_v2(
                Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            kind = StorageUnavailable if is_storage_outage(exc) else OSError
            raise kind(
                f"{self.describe_location()} refused a listing: "
                f"{error.get('Code', '?')} {error.get('Message', '')}".rstrip()
            ) from None
        except BotoCoreError as exc:  # unreachable endpoint, no credentials, bad URL
            kind = StorageUnavailable if is_storage_outage(exc) else OSError
            raise kind(f"{self.describe_location()} cannot be used: {exc}") from None

    def room(self) -> None:
        """See :meth:`conveyor.objects.ObjectStore.room`: a bucket does not say (None)."""
        return None

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    # --- writing ---------------------------------------------------------------------------

    def put(
        self,
        key: str,
        source: Source,
        *,
        max_bytes: int | None = None,
        size: int | None = None,
        sha256: str | None = None,
    ) -> StoredObject:
        """See :meth:`conveyor.objects.ObjectStore.put`."""
        if isinstance(source, Path):
            with source.open("rb") as handle:
                return self.put(key, handle, max_bytes=max_bytes, size=size, sha256=sha256)
        full = self._key(key)
        client = self.client
        digest = hashlib.sha256()
        written = 0
        buffer = bytearray()
        upload_id: str | None = None
        parts: list[CompletedPartTypeDef] = []

        def send_part(data: bytes) -> None:
            assert upload_id is not None
            number = len(parts) + 1
            answer = client.upload_part(
                Bucket=self.bucket, Key=full, UploadId=upload_id, PartNumber=number, Body=data
            )
            parts.append({"ETag": answer["ETag"], "PartNumber": number})

        try:
            for chunk in chunks_of(source):
                written += len(chunk)
                if max_bytes is not None and written > max_bytes:
                    raise RejectedInput(
                        ErrorCode.TOO_LARGE,
                        f"the upload is larger than the limit of {human_size(max_bytes)}",
                    )
                digest.update(chunk)
                buffer += chunk
                while len(buffer) >= self.part_size:
                    if upload_id is None:
                        started = client.create_multipart_upload(Bucket=self.bucket, Key=full)
                        upload_id = started["UploadId"]
                    send_part(bytes(buffer[: self.part_size]))
                    del buffer[: self.part_size]
            verify(key, written, digest.hexdigest(), want_size=size, want_sha=sha256)
            if upload_id is None:
                client.put_object(Bucket=self.bucket, Key=full, Body=bytes(buffer))
            else:
                if buffer:
                    send_part(bytes(buffer))
                client.complete_multipart_upload(
                    Bucket=self.bucket,
                    Key=full,
                    UploadId=upload_id,
                    MultipartUpload={"Parts": parts},
                )
                upload_id = None
        except ClientError as exc:
            # Said as the bucket's, as a full folder is: the API answers 507 storage_full and
            # steps wait for space (an outage, told as full), whatever part of the upload met it.
            if _no_room(exc):
                raise StorageFull(errno.ENOSPC, "bucket", self.describe_location()) from exc
            raise
        finally:
            if upload_id is not None:
                self._abort(full, upload_id)
        return StoredObject(key=key, size=written, sha256=digest.hexdigest())

    def _abort(self, full: str, upload_id: str) -> None:
        # On failure the sweeper's abort_stale_writes gets it later.
        with contextlib.suppress(ClientError, BotoCoreError):
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=full, UploadId=upload_id)

    def put_file(
        self, key: str, src: Path, *, size: int | None = None, sha256: str | None = None
    ) -> StoredObject:
        """See :meth:`conveyor.objects.ObjectStore.put_file`."""
        return self.put(key, src, size=size, sha256=sha256)

    # --- reading ---------------------------------------------------------------------------

    @contextmanager
    def open(self, key: str, start: int = 0, end: int | None = None) -> Iterator[Readable]:
        """See :meth:`conveyor.objects.ObjectStore.open`."""
        full = self._key(key)
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": full}
        if end is not None and end <= start:
            if not self.exists(key):
                raise FileNotFoundError(f"no object {key}")
            yield _Empty()
            return
        if start or end is not None:
            args["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
        try:
            answer = self.client.get_object(**args)
        except ClientError as exc:
            if _missing(exc):
                raise FileNotFoundError(f"no object {key}") from None
            raise
        body = answer["Body"]
        try:
            yield body
        finally:
            body.close()

    def copy_out(self, key: str, target: Path) -> None:
        """See :meth:`conveyor.objects.store.WorkingCopies.copy_out`."""
        with self.open(key) as body, target.open("wb") as out:
            for chunk in iter(lambda: body.read(CHUNK), b""):
                out.write(chunk)

    def stat(self, key: str) -> ListedObject | None:
        """See :meth:`conveyor.objects.ObjectStore.stat`."""
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if _missing(exc):
                return None
            raise
        return ListedObject(
            key=key, size=int(head["ContentLength"]), modified=head["LastModified"].timestamp()
        )

    def exists(self, key: str) -> bool:
        """See :meth:`conveyor.objects.ObjectStore.exists`."""
        return self.stat(key) is not None

    def list(self, prefix: str = "") -> Iterator[ListedObject]:
        """See :meth:`conveyor.objects.ObjectStore.list`."""
        where = self.prefix + (check_key(prefix) + "/" if prefix else "")
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=where
        )
        for page in pages:
            for item in page.get("Contents", []):
                yield ListedObject(
                    key=item["Key"][len(self.prefix) :],
                    size=int(item["Size"]),
                    modified=item["LastModified"].timestamp(),
                )

    # --- removing --------------------------------------------------------------------------

    def delete(self, key: str) -> None:
        """See :meth:`conveyor.objects.ObjectStore.delete`."""
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def delete_prefix(self, prefix: str) -> None:
        """See :meth:`conveyor.objects.ObjectStore.delete_prefix`."""
        keys = [obj.key for obj in self.list(prefix)]
        for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            batch = keys[start : start + 1000]
            self.client.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": self.prefix + k} for k in batch], "Quiet": True},
            )

    def abort_stale_writes(self, started_before: float) -> int:
        """See :meth:`conveyor.objects.ObjectStore.abort_stale_writes`: multipart uploads
        under the prefix initiated before ``started_before``."""
        aborted = 0
        pages = self.client.get_paginator("list_multipart_uploads").paginate(
            Bucket=self.bucket, Prefix=self.prefix
        )
        for page in pages:
            for upload in page.get("Uploads", []):
                if upload["Initiated"].timestamp() < started_before:
                    self._abort(upload["Key"], upload["UploadId"])
                    aborted += 1
        return aborted

    def presign(self, key: str, *, expires: float, mime_type: str, disposition: str) -> str | None:
        """A presigned GET URL that makes the server answer with ``mime_type`` and
        ``disposition`` (the server still honours ``Range`` and ETags itself)."""
        return self.client.generate_presigned_url(
            "get_object",
            Params={
                "Bucket": self.bucket,
                "Key": self._key(key),
                "ResponseContentType": mime_type,
                "ResponseContentDisposition": disposition,
            },
            ExpiresIn=int(expires),
        )


class _Empty:
    def read(self, size: int = -1, /) -> bytes:
        return b""


def from_settings(settings: StorageSettings, work: WorkFolder) -> S3Store:
    """The ``s3://bucket/prefix`` store of ``[storage]`` (nothing is contacted yet).

    Raises:
        ValueError: the URL or part size is not valid.
    """
    return S3Store(
        settings.url,
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
