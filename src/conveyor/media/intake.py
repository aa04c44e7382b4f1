"""Accepting a photo or video into an album: refuse what is surely bad, store the original.

Refused at intake (nothing is kept: no object, no journal row, no item):

* a zero-byte upload (``empty_file``);
* content that is neither image nor video, whatever its name says (``not_media``), including
  audio-only MP4/M4A and videos without a video track; content no signature names is probed
  with PyAV first, and accepted as a video when a video frame of it decodes;
* a camera RAW file (DNG, CR2/CR3, NEF, ARW, RAF, ORF, RW2, PEF, SRW) that LibRaw cannot decode
  (``not_media``, the message names the format); one it can is a photo, probed by LibRaw
  (:mod:`~conveyor.media.images.raw`), never read as the TIFF or ISO media whose only picture is
  its small embedded preview;
* an image whose header declares more than ``[media] max_pixels`` (``too_many_pixels``): a bomb
  is refused from the header, no pixels are decoded;
* an image or video whose header cannot be read at all (``undecodable``).

Content the owner already holds as an item's original (same SHA-256, in any of their albums)
raises :class:`~conveyor.errors.Duplicate` naming that item, nothing kept, unless the caller asks
to keep a second copy (``keep_duplicate``).

Everything else becomes an item at stage ``uploaded`` with its ``original`` role (M2). Damage
only the decode can see (a truncated JPEG, a codec this build lacks) halts the item later with a
readable reason; the original stays available.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from sqlalchemy import Connection, Engine

from conveyor.clock import Clock
from conveyor.error_codes import ErrorCode
from conveyor.errors import Duplicate, MediaError, NotFound, RejectedInput, UnsupportedMedia
from conveyor.files import file_sha256
from conveyor.kinds import MediaKind, Role
from conveyor.media import queries
from conveyor.media.deletion import delete_item
from conveyor.media.halts import MediaHalt
from conveyor.media.images import probe_image
from conveyor.media.images.motion import movie_content_id, still_content_id
from conveyor.media.images.raw import probe_raw
from conveyor.media.stages import MEDIA, MEDIA_KEYS
from conveyor.media.video import probe_video
from conveyor.objects import ObjectStore, lock_content, put_file_row
from conveyor.objects.sniff import OCTET_STREAM, SNIFF_BYTES, raw_format, sniff
from conveyor.pipeline.lifecycle import admit, database_now, reopen
from conveyor.pipeline.queries import insert_event, now_of
from conveyor.sizes import human_size

__all__ = ["Probed", "accept_media", "item_holding", "owner_message", "probe_upload"]


@dataclass(frozen=True)
class Probed:
    """What intake learned from an upload's content.

    Attributes:
        kind: ``photo`` or ``video``.
        mime_type: sniffed from the content (never from the name).
        width: upright pixels.
        height: upright pixels.
        duration: seconds (videos only).
        captured_at: the instant of capture from the metadata, epoch seconds, when present.
        captured_offset: the zone it was taken in, minutes east of UTC, when known.
    """

    kind: MediaKind
    mime_type: str
    width: int
    height: int
    duration: float | None
    captured_at: float | None
    captured_offset: int | None = None


def owner_message(message: str, path: Path, name: str | None) -> str:
    """``message`` of a probe of the stored file ``path``, as its owner can read it.

    The owner knows the upload by its name, not by our storage key: the file's path (a decoder
    quoting its input) and its name (the key) become ``name``, or "the upload" without one.
    """
    shown = name or "the upload"
    return message.replace(str(path), shown).replace(path.name, shown)


def _epoch(when: datetime | None) -> float | None:
    return None if when is None else when.timestamp()


def probe_upload(path: Path, *, max_pixels: int, name: str | None = None) -> Probed:
    """Decide photo or video from the content (sniff, then a header probe).

    Args:
        path: the stored upload.
        max_pixels: largest accepted ``width * height`` of an image.
        name: the upload's name for people; refusal messages say it (or "the upload") where
            the probe named the stored file, whose name is our storage key.

    Raises:
        RejectedInput: ``empty_file``, ``too_many_pixels``, ``undecodable``.
        UnsupportedMedia: ``not_media``: not an image or a video (text, audio, unknown).
    """
    if path.stat().st_size == 0:
        raise RejectedInput(ErrorCode.EMPTY_FILE, "the upload is empty (0 bytes)")
    sniffed = sniff(path)
    with path.open("rb") as f:
        raw = raw_format(f.read(SNIFF_BYTES))
    try:
        if raw is not None:
            # Never as the TIFF or ISO media it also is: that finds its small embedded preview.
            image = probe_raw(path, raw, max_pixels=max_pixels)
            return Probed(
                MediaKind.PHOTO,
                image.mime_type,
                image.width,
                image.height,
                None,
                _epoch(image.captured_at),
                image.captured_offset,
            )
        if sniffed.kind == "image":
            image = probe_image(path, max_pixels=max_pixels)
            return Probed(
                MediaKind.PHOTO,
                sniffed.mime,
                image.width,
                image.height,
                None,
                _epoch(image.captured_at),
                image.captured_offset,
            )
        if sniffed.kind == "video" or (sniffed.kind == "unknown" and sniffed.mime == OCTET_STREAM):
            # What no signature names (a raw elementary stream, a container we do not sniff)
            # is still a video if PyAV decodes a frame of it.
            video = probe_video(path)
            return Probed(
                MediaKind.VIDEO,
                sniffed.mime if sniffed.kind == "video" else video.mime_type,
                video.width,
                video.height,
                video.duration,
                _epoch(video.captured_at),
                video.captured_offset,
            )
    except MediaError as exc:
        message = owner_message(exc.message, path, name)
        if (
            sniffed.kind == "unknown" and raw is None
        ):  # nothing named it and PyAV found no video in it either
            raise UnsupportedMedia(
                ErrorCode.NOT_MEDIA,
                f"the upload is not a photo or video (its content looks like {sniffed.mime})",
            ) from None
        if exc.reason in (MediaHalt.UNSUPPORTED_MEDIA, MediaHalt.NOT_VIDEO):
            raise UnsupportedMedia(
                ErrorCode.NOT_MEDIA, f"the upload is not a photo or video: {message}"
            ) from None
        code = (
            ErrorCode.TOO_MANY_PIXELS
            if exc.reason is MediaHalt.TOO_MANY_PIXELS
            else ErrorCode.UNDECODABLE
        )
        raise RejectedInput(code, message) from None
    raise UnsupportedMedia(
        ErrorCode.NOT_MEDIA,
        f"the upload is not a photo or video (its content looks like {sniffed.mime})",
    )


def accept_media(
    engine: Engine,
    store: ObjectStore,
    clock: Clock,
    source: Path | BinaryIO | Iterable[bytes],
    *,
    album_id: int,
    owner: str,
    original_name: str | None = None,
    max_pixels: int,
    max_bytes: int | None = None,
    on_insert: Callable[[Connection, int], None] | None = None,
    keep_duplicate: bool = False,
    added_by: str | None = None,
) -> int:
    """Accept one photo or video into an album; it starts at ``uploaded`` (M2, M4).

    Each file is kept once per owner: a local file is hashed before anything is stored, a
    stream as it is stored, and content the owner already holds raises ``Duplicate``. The
    decision is made again in the transaction that inserts, under
    :func:`~conveyor.objects.lock_content`, so intakes of the same bytes by one owner at the
    same moment make one item: the others raise ``Duplicate``, their stored object removed.

    The original is stored unchanged under a fresh key, journalled (MIME type from content
    sniffing, size, upright dimensions, duration) and referenced as role ``original``. The item,
    its ``original`` role and a ``record_events`` row are written in one transaction.

    Args:
        source: a file path, a binary stream or byte chunks (streamed, never held in memory).
        album_id: the album; it must belong to ``owner``.
        owner: the item's owner (required).
        original_name: the upload's name, for people (never trusted for the type).
        max_pixels: ``[media] max_pixels``; larger images are refused from the header.
        max_bytes: size limit in bytes.
        on_insert: called with the open transaction and the new id, before it commits (the
            HTTP layer records an ``Idempotency-Key`` there); what it raises undoes the upload.
        keep_duplicate: keep a second item of content the owner already holds.
        added_by: who adds it, when not the owner: a contributor of the shared album. The
            item is still the owner's; a contributor's duplicate is looked for only in this
            album (the owner's other albums are not theirs to learn about).

    Returns:
        The new item's id.

    Raises:
        RejectedInput: ``no_owner``, ``empty_file``, ``too_large``, ``too_many_pixels``,
            ``undecodable``.
        UnsupportedMedia: ``not_media``.
        NotFound: no album ``album_id`` of ``owner``.
        Duplicate: the owner holds this content already (not with ``keep_duplicate``); its
            ``existing_id`` is the item that holds it, in whichever album.
    """
    if not owner or not owner.strip():
        raise RejectedInput(ErrorCode.NO_OWNER, "every item needs an owner")
    owner = owner.strip()
    added_by = (added_by or owner).strip()
    within = None if added_by == owner else album_id
    with engine.connect() as conn:
        if queries.album_by_id(conn, album_id, owner) is None:
            raise NotFound(f"album {album_id} does not exist")
    key = MEDIA_KEYS.upload()
    if isinstance(source, Path):
        original_name = original_name or source.name
        if not keep_duplicate:
            held = item_holding(engine, owner, source, album_id=within)
            if held is not None:
                raise Duplicate(held, "item", original_name)
    stored = store.put(key, source, max_bytes=max_bytes)
    try:
        if not keep_duplicate and stored.size:
            # Early, to spare probing what is held; decided again under the lock below.
            with engine.connect() as conn:
                found = queries.item_with_content(conn, owner, stored.sha256, album_id=within)
            if found is not None:
                raise Duplicate(found, "item", original_name)
        if isinstance(source, Path):
            # A local file holds the bytes just stored: probe it rather than fetching a copy
            # back from the store (a bucket would cost a second transfer).
            probed = probe_upload(source, max_pixels=max_pixels, name=original_name)
            content_id = _content_id(source, probed.kind)
        else:
            with store.local_copy(key) as copy:
                probed = probe_upload(copy, max_pixels=max_pixels, name=original_name)
                content_id = _content_id(copy, probed.kind)
        merged: int | None = None
        with engine.begin() as conn:
            if not keep_duplicate:
                # Decided in the transaction that inserts, under a lock on (owner, content):
                # a concurrent intake of the same bytes that also found them new commits
                # first or waits, and the loser's object goes (the except below).
                lock_content(conn, owner, stored.sha256)
                found = queries.item_with_content(conn, owner, stored.sha256, album_id=within)
                if found is not None:
                    raise Duplicate(found, "item", original_name)
            now = database_now(conn, clock)  # D17: the record's sort time is the database's
            file_id = put_file_row(
                conn,
                key=key,
                mime_type=probed.mime_type,
                size=stored.size,
                sha256=stored.sha256,
                width=probed.width,
                height=probed.height,
                duration=probed.duration,
                now=now,
            )
            if probed.kind is MediaKind.VIDEO and content_id is not None:
                still = queries.live_partner(conn, album_id, content_id, MediaKind.PHOTO)
                if still is not None:
                    # A Live Photo's movie after its still: the still's motion, not an item.
                    still_id = int(still["id"])
                    _pair_movie(conn, clock, still_id, file_id, original_name)
                    if on_insert is not None:
                        on_insert(conn, still_id)
                    return still_id
            item_id = admit(
                conn,
                MEDIA,
                fields={
                    "owner": owner,
                    "album_id": album_id,
                    "kind": probed.kind,
                    "original_name": original_name,
                    "uploaded_at": now,
                    "captured_at": probed.captured_at,
                    "captured_offset": probed.captured_offset,
                    "width": probed.width,
                    "height": probed.height,
                    "duration": probed.duration,
                    "added_by": added_by,
                    "content_id": content_id,
                },
                clock=clock,
                note=(
                    f"{original_name or 'upload'}: {probed.kind}, {human_size(stored.size)}, "
                    f"{probed.mime_type}, {probed.width}×{probed.height}"
                ),
            )
            if on_insert is not None:
                on_insert(conn, item_id)
            queries.put_object(conn, item_id, Role.ORIGINAL, file_id)
            if probed.kind is MediaKind.PHOTO and content_id is not None:
                movie = queries.live_partner(conn, album_id, content_id, MediaKind.VIDEO)
                if movie is not None:
                    # Its movie came first: the movie's original becomes this still's, and
                    # the video item it made goes once this commits.
                    merged = int(movie["id"])
                    queries.move_object(conn, merged, Role.ORIGINAL, item_id, Role.MOTION_ORIGINAL)
                    _journal(
                        conn,
                        clock,
                        item_id,
                        "paired",
                        f"Live Photo: the movie {movie['original_name'] or ''} (item {merged}) "
                        "is this photo's motion",
                    )
    except BaseException:
        store.delete(key)
        raise
    if merged is not None:
        delete_item(engine, store, clock, merged)
    return item_id


def _content_id(path: Path, kind: MediaKind) -> str | None:
    """The Live Photo content identifier of a still (maker note) or a movie (metadata)."""
    return still_content_id(path) if kind is MediaKind.PHOTO else movie_content_id(path)


def _journal(conn: Connection, clock: Clock, item_id: int, outcome: str, text: str) -> None:
    stage = queries.item_by_id(conn, item_id)
    insert_event(
        conn,
        domain=MEDIA.name,
        record_id=item_id,
        stage=str(stage["stage"]) if stage is not None else "uploaded",
        outcome=outcome,
        outcome_text=text,
        origin="human",
        now=now_of(clock),
    )


def _pair_movie(
    conn: Connection, clock: Clock, still_id: int, file_id: int, name: str | None
) -> None:
    """Make the stored movie ``file_id`` the still's ``motion_original`` and send a finished
    still back to ``transcoding`` for its ``motion`` clip (one not finished gets there by
    itself: its variants step sees the movie)."""
    # The still's row first: a variants step saving it meanwhile either waits for this and
    # then sees the movie, or saved first and is reopened below.
    queries.lock_item(conn, still_id)
    queries.put_object(conn, still_id, Role.MOTION_ORIGINAL, file_id)
    text = f"Live Photo: the movie {name or ''} is this photo's motion"
    if not reopen(conn, MEDIA, still_id, done="done", to="transcoding", clock=clock, note=text):
        _journal(conn, clock, still_id, "paired", text)


def item_holding(
    engine: Engine, owner: str, path: Path, *, album_id: int | None = None
) -> int | None:
    """The item of ``owner`` (in any album, or in ``album_id``) whose original has the same
    bytes as the local file ``path`` (by SHA-256), or None: how ``conveyor media add`` knows a
    file it already added.

    Raises:
        OSError: ``path`` cannot be read.
    """
    if not path.stat().st_size:
        return None  # an empty file is refused, never "already here"
    digest = file_sha256(path)
    with engine.connect() as conn:
        return queries.item_with_content(conn, owner.strip(), digest, album_id=album_id)
