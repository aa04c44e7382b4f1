"""Resumable uploads for the pages: the tus 1.0.0 core protocol with its ``creation`` extension.

Why tus: it is the open protocol for resuming an HTTP upload after a dropped connection, small
enough to implement faithfully here (four requests), and any tus client speaks it; the pages'
own script uses it for files over 16 MiB (``conveyor.js``). Only the core and ``creation`` are
offered (no ``termination``, ``checksum`` or ``concatenation``), announced by ``OPTIONS``.

* ``POST /uploads`` with ``Upload-Length`` (at most ``[api] max_upload_bytes``) and
  ``Upload-Metadata`` (``filename``, ``target``: ``records`` or ``albums/ID``, and for a
  recording ``language``, ``hints``, ``channels`` as the page's form sends them): 201 with
  ``Location: /uploads/ID``. Nothing is stored yet.
* ``HEAD /uploads/ID``: ``Upload-Offset`` (bytes received so far) and ``Upload-Length``.
* ``PATCH /uploads/ID`` with ``Content-Type: application/offset+octet-stream`` and the
  ``Upload-Offset`` the server has: the body is appended (streamed, as every upload is: the
  owner's upload slots, the idle timeout and the minimum rate hold). 204 with the new
  ``Upload-Offset``; a wrong offset is 409, another content type 415, and so is a PATCH
  while another PATCH of the same upload is still arriving (409 with ``Retry-After``: each
  upload takes one PATCH at a time, so two pieces sent at once at the same offset cannot
  both be appended). When the last byte
  arrives the file goes through the same intake as a form upload, and the answer carries
  ``Conveyor-Result: /records/ID`` (or ``/items/ID``), or the intake's refusal.

Every request needs the session and ``X-CSRF-Token``; another person's upload answers 404.
The bytes wait in ``resumable/`` beside the work folders (``[storage] work_dir``), so a
dropped connection can resume on the same host (behind a load balancer: route a session to
one host); an upload left unfinished for :data:`KEEP_FOR` seconds is removed, and one person
may have :data:`MAX_OPEN` unfinished at once.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import json
import os
import time
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from starlette.responses import Response

from conveyor.api.errors import ApiError
from conveyor.api.record_choices import record_choices
from conveyor.api.state import ApiState, State
from conveyor.api.uploads import Upload, receive_upload
from conveyor.audio.intake import accept_audio
from conveyor.error_codes import ErrorCode
from conveyor.errors import Duplicate, NotFound, RejectedInput
from conveyor.media.intake import accept_media
from conveyor.media.sharing import ADD, album_access, contributable
from conveyor.names import kept_name
from conveyor.sizes import human_size
from conveyor.web.auth import CsrfHeader
from conveyor.web.routes_records import UPLOAD_FIELDS

__all__ = ["KEEP_FOR", "MAX_OPEN", "TUS_VERSION", "router"]

router = APIRouter(include_in_schema=False)

TUS_VERSION = "1.0.0"
KEEP_FOR = 24 * 3600.0
MAX_OPEN = 20
_ID = r"^[0-9a-f]{32}$"
_HEADERS = {"Tus-Resumable": TUS_VERSION, "Cache-Control": "no-store"}
UploadId = Annotated[str, PathParam(pattern=_ID)]


def _folder(state: ApiState) -> Path:
    # Beside the processes' own work folders (``host-pid-…``), which never take this one.
    storage = state.runtime.settings.storage
    folder = (storage.work_dir or storage.root / "work") / "resumable"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _metadata(header: str) -> dict[str, str]:
    """``Upload-Metadata``: comma-separated ``key base64value`` pairs (tus 1.0.0)."""
    found: dict[str, str] = {}
    for pair in header.split(","):
        pair = pair.strip()
        if not pair:
            continue
        key, _, value = pair.partition(" ")
        try:
            raw = base64.b64decode(value.strip(), validate=True) if value else b""
            # A file name's bytes need not be UTF-8 (kept escaped, as everywhere); the rest must.
            found[key] = raw.decode(errors="surrogateescape" if key == "filename" else "strict")
        except (binascii.Error, UnicodeDecodeError):
            raise ApiError(
                ErrorCode.BAD_REQUEST, f"Upload-Metadata {key!r} is not base64 UTF-8"
            ) from None
    return found


def _state_path(folder: Path, upload_id: str) -> Path:
    return folder / f"{upload_id}.json"


def _load(folder: Path, upload_id: str, owner: str) -> dict[str, Any]:
    try:
        saved: dict[str, Any] = json.loads(_state_path(folder, upload_id).read_text())
    except (FileNotFoundError, ValueError):
        raise NotFound("no such upload") from None
    if saved.get("owner") != owner:
        raise NotFound("no such upload")
    return saved


def _offset(folder: Path, upload_id: str) -> int:
    part = folder / f"{upload_id}.part"
    return part.stat().st_size if part.exists() else 0


def _sweep(folder: Path, now: float) -> None:
    for path in folder.glob("*.json"):
        try:
            if now - path.stat().st_mtime > KEEP_FOR:
                path.unlink(missing_ok=True)
                path.with_suffix(".part").unlink(missing_ok=True)
                path.with_suffix(".lock").unlink(missing_ok=True)
        except OSError:
            continue


@contextlib.contextmanager
def _one_patch_at_a_time(folder: Path, upload_id: str) -> Generator[None, None, None]:
    """Hold the upload's own lock (``ID.lock``, an ``flock``) for the whole of one PATCH.

    The offset check alone lets two PATCHes sent at once at the same offset both pass and both
    append. The lock is taken without waiting; held by another request or process of this
    host, the PATCH is refused.

    Raises:
        ApiError: ``conflict`` (409) with the offset reached so far and ``Retry-After: 1``.
    """
    handle = os.open(folder / f"{upload_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ApiError(
                ErrorCode.CONFLICT,
                "another piece of this upload is still arriving; ask where it is (HEAD) and "
                "go on from there",
                headers={
                    **_HEADERS,
                    "Upload-Offset": str(_offset(folder, upload_id)),
                    "Retry-After": "1",
                },
            ) from None
        yield
    finally:
        os.close(handle)  # closing the descriptor lets the lock go


@router.options("/uploads")
def tus_options() -> Response:
    """What this server speaks (tus discovery)."""
    return Response(
        status_code=204,
        headers={
            **_HEADERS,
            "Tus-Version": TUS_VERSION,
            "Tus-Extension": "creation",
        },
    )


def _check_version(request: Request) -> None:
    if request.headers.get("tus-resumable") != TUS_VERSION:
        raise ApiError(
            ErrorCode.BAD_REQUEST,
            f"send Tus-Resumable: {TUS_VERSION} (the only version spoken here)",
            headers={"Tus-Version": TUS_VERSION},
        )


@router.post("/uploads")
async def tus_create(request: Request, state: State, viewer: CsrfHeader) -> Response:
    """Begin an upload (tus ``creation``): 201 with its ``Location``."""
    _check_version(request)
    runtime = state.runtime
    limit = runtime.settings.api.max_upload_bytes
    length_header = request.headers.get("upload-length", "")
    if not length_header.isdigit() or len(length_header) > 15:
        raise ApiError(ErrorCode.BAD_REQUEST, "Upload-Length must be a number of bytes")
    length = int(length_header)
    if length > limit:
        raise RejectedInput(
            ErrorCode.TOO_LARGE, f"the upload is larger than the limit of {human_size(limit)}"
        )
    if length == 0:
        raise RejectedInput(ErrorCode.EMPTY_FILE, "the file is empty")
    meta = _metadata(request.headers.get("upload-metadata", ""))
    target = meta.get("target", "records")
    if target != "records":
        album = target.removeprefix("albums/")
        if not target.startswith("albums/") or not album.isdigit() or len(album) > 10:
            raise ApiError(ErrorCode.BAD_REQUEST, "target is records or albums/ID")
        with runtime.engine.connect() as conn:
            # Yours, or shared with you as a contributor; a viewer gets a stranger's 404.
            contributable(conn, int(album), viewer.name)
    else:
        unknown = set(meta) - UPLOAD_FIELDS - {"filename", "target", "filetype", "name", "type"}
        if unknown:
            raise ApiError(ErrorCode.UNKNOWN_FIELD, f"unknown fields: {', '.join(sorted(unknown))}")
        # The options are checked now, as the form upload checks them before any byte.
        record_choices(
            Upload(fields={k: v for k, v in meta.items() if k in UPLOAD_FIELDS}),
            default_channels=runtime.settings.transcription.channels,
        )
    folder = _folder(state)
    now = time.time()

    def create() -> str:
        _sweep(folder, now)
        mine = 0
        for path in folder.glob("*.json"):
            try:
                mine += json.loads(path.read_text()).get("owner") == viewer.name
            except (OSError, ValueError):
                continue
        if mine >= MAX_OPEN:
            raise ApiError(
                ErrorCode.TOO_MANY_UPLOADS,
                f"you have {mine} unfinished uploads (the limit is {MAX_OPEN}); finish one, "
                "or wait a day for them to be removed",
                headers={"Retry-After": "60"},
            )
        upload_id = uuid.uuid4().hex
        record = {
            "owner": viewer.name,
            "length": length,
            "target": target,
            "filename": kept_name(meta.get("filename", "")),
            "fields": {k: v for k, v in meta.items() if k in UPLOAD_FIELDS},
            "created": now,
        }
        _state_path(folder, upload_id).write_text(json.dumps(record))
        (folder / f"{upload_id}.part").touch()
        return upload_id

    upload_id = await anyio.to_thread.run_sync(create)
    return Response(status_code=201, headers={**_HEADERS, "Location": f"/uploads/{upload_id}"})


@router.head("/uploads/{upload_id}")
def tus_head(state: State, viewer: CsrfHeader, upload_id: UploadId) -> Response:
    """How much of the upload has arrived."""
    folder = _folder(state)
    saved = _load(folder, upload_id, viewer.name)
    return Response(
        status_code=200,
        headers={
            **_HEADERS,
            "Upload-Offset": str(_offset(folder, upload_id)),
            "Upload-Length": str(saved["length"]),
        },
    )


@router.patch("/uploads/{upload_id}")
async def tus_patch(
    request: Request, state: State, viewer: CsrfHeader, upload_id: UploadId
) -> Response:
    """Append the body at ``Upload-Offset``; the last byte hands the file to the intake."""
    _check_version(request)
    if request.headers.get("content-type", "") != "application/offset+octet-stream":
        raise ApiError(
            ErrorCode.NOT_MEDIA, "a PATCH carries Content-Type: application/offset+octet-stream"
        )
    folder = _folder(state)
    saved = await anyio.to_thread.run_sync(_load, folder, upload_id, viewer.name)
    with _one_patch_at_a_time(folder, upload_id):
        return await _append_piece(request, state, viewer.name, folder, upload_id, saved)


async def _append_piece(
    request: Request, state: State, owner: str, folder: Path, upload_id: str, saved: dict[str, Any]
) -> Response:
    """One PATCH's body appended at the offset the server has, under the upload's lock."""
    offset = _offset(folder, upload_id)
    sent = request.headers.get("upload-offset", "")
    if not sent.isdigit() or int(sent) != offset:
        raise ApiError(
            ErrorCode.CONFLICT,
            f"the upload is at byte {offset}; send from there (HEAD tells)",
            headers={**_HEADERS, "Upload-Offset": str(offset)},
        )
    length = int(saved["length"])
    part = folder / f"{upload_id}.part"

    def append(chunks: Iterator[bytes], _upload: Upload) -> int:
        with part.open("ab") as out:
            for chunk in chunks:
                if out.tell() + len(chunk) > length:
                    raise RejectedInput(
                        ErrorCode.TOO_LARGE, f"more bytes than the Upload-Length of {length}"
                    )
                out.write(chunk)
            return out.tell()

    # The slots, idle timeout and minimum rate of every upload hold for each PATCH; a PATCH
    # that is cut off keeps what arrived (the client asks HEAD where to go on).
    try:
        offset = await receive_upload(request, append, max_bytes=length - offset, owner=owner)
    except ApiError as exc:
        if exc.status in (400, 408, 503):
            exc.headers = {
                **exc.headers,
                **_HEADERS,
                "Upload-Offset": str(_offset(folder, upload_id)),
            }
        raise
    headers = {**_HEADERS, "Upload-Offset": str(offset)}
    if offset < length:
        return Response(status_code=204, headers=headers)
    result = await anyio.to_thread.run_sync(_finish, state, folder, upload_id, saved)
    return Response(status_code=204, headers={**headers, "Conveyor-Result": result})


def _finish(state: ApiState, folder: Path, upload_id: str, saved: dict[str, Any]) -> str:
    """The whole file through the intake (its refusal is the answer); the partial is removed
    whatever happens."""
    runtime = state.runtime
    part = folder / f"{upload_id}.part"
    keep = dict(saved["fields"]).get("keep_duplicate") == "true"
    try:
        if saved["target"] == "records":
            upload = Upload(filename=saved["filename"], fields=dict(saved["fields"]))
            chosen = record_choices(
                upload, default_channels=runtime.settings.transcription.channels
            )
            record_id = accept_audio(
                runtime.engine,
                runtime.store,
                runtime.clock,
                part,
                owner=saved["owner"],
                original_name=saved["filename"],
                title=None,
                language=chosen.language,
                raw_pcm=False,
                strict=True,
                max_bytes=runtime.settings.api.max_upload_bytes,
                languages=runtime.languages,
                hints=chosen.hints,
                channels=chosen.channels,
                keep_duplicate=keep,
            )
            return f"/records/{record_id}"
        album_id = int(str(saved["target"]).removeprefix("albums/"))
        with runtime.engine.connect() as conn:
            access = album_access(conn, album_id, saved["owner"])
        if not access.may_add:  # no longer a contributor since the upload began
            raise access.refused(ADD)
        item_id = accept_media(
            runtime.engine,
            runtime.store,
            runtime.clock,
            part,
            album_id=album_id,
            owner=access.owner,
            added_by=saved["owner"],
            original_name=saved["filename"],
            max_pixels=runtime.settings.media.max_pixels,
            max_bytes=runtime.settings.api.max_upload_bytes,
            keep_duplicate=keep,
        )
        return f"/items/{item_id}"
    except Duplicate as exc:  # the viewer has this file already: its address is the answer
        noun = "records" if exc.noun == "record" else "items"
        return f"/{noun}/{exc.existing_id}"
    finally:
        _state_path(folder, upload_id).unlink(missing_ok=True)
        part.unlink(missing_ok=True)
        (folder / f"{upload_id}.lock").unlink(missing_ok=True)
