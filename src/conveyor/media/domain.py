"""The media domain: a photo or video goes into an album, web variants come out (NORMS M1-M8).

Stages (declared once in :func:`build_media_domain`, D11)::

    uploaded ──variants──▶ done                               (photo)
    (short lane)
    uploaded ──variants──▶ transcoding ──playback──▶ done      (motion photo, Live Photo)
    uploaded ──variants──▶ transcoding ──playback──▶ done      (video)
    (short lane)            (long lane, heartbeat)

Who moves an item in and out:

* intake (:func:`conveyor.media.intake.accept_media`) creates it at ``uploaded`` with its
  ``original`` role (M2: served with the original before any variant exists);
* ``variants`` (short lane) writes ``thumb``/``medium``/``preview`` of a photo, or the ``poster``
  of a video plus the three image roles drawn from the poster, so a video shows up at once; a
  photo then goes to ``done``, a video to ``transcoding``. Either way the album gets an
  ``item.ready`` event in the same transaction as the save (M5);
* a motion photo (an MP4 embedded, :mod:`~conveyor.media.images.motion`) or a Live Photo (its
  movie paired at intake as ``motion_original``) goes to ``transcoding`` too, for its clip;
* ``playback`` (long lane) writes the H.264/AAC ``playback`` role (a photo's: ``motion``),
  holds its claim by heartbeat for the whole transcode and stops at once when the claim is lost
  or the pool stops (M8); the album gets ``item.playback_ready``;
* a file that cannot be processed halts with the reason from :class:`~conveyor.errors.MediaError`
  (``undecodable``, ``unsupported_media``, ``too_many_pixels`` ...) and an ``item.halted`` event;
  the original is kept and the worker carries on.

Exactly-once effect (M4): every object is stored under a claim-unique key
``media/<item>/<role>-<claim token>.<ext>``, so a holder whose claim expired writes beside the
live holder's object and never over it. The journal row and the role row (by item and role) are
written inside the step's save transaction, which lands only while the claim holds; a re-run's
object takes over the earlier run's journal row, and the earlier object, named by no row, goes
with the sweep. Steps work on a local copy of the original in a scratch folder of the process's
work folder (never on the store's own files), removed when the step ends.

Roles whose bytes would be equal (the ``medium`` and ``preview`` of a photo smaller than both
edges) name one object and its one journal row: it is stored once (M1).

The pipeline writes only ``OWNED_FIELDS``; owner, album and names are the owner's (P7).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyvips
from sqlalchemy import Connection, Engine, RowMapping

from conveyor.clock import seconds
from conveyor.config import MediaSettings
from conveyor.db.engine import autocommit
from conveyor.errors import MediaError
from conveyor.files import file_sha256
from conveyor.kinds import IMAGE_ROLES, MediaKind, Role
from conveyor.media import queries
from conveyor.media.halts import MediaHalt
from conveyor.media.images import make_image_variants, probe_image
from conveyor.media.images.motion import copy_clip, embedded_clip
from conveyor.media.intake import owner_message
from conveyor.media.stages import (
    LONG_LANE,
    LONG_LEASE,
    MEDIA,
    MEDIA_KEYS,
    OWNED_FIELDS,
    SHORT_LANE,
)
from conveyor.media.video import Playback, extract_poster, make_playback, probe_video
from conveyor.objects import (
    ObjectStore,
    delete_file_rows,
    discard_unjournaled,
    put_file_row,
    put_file_rows,
)
from conveyor.pipeline import Advance, Domain, Halt, StepContext
from conveyor.pipeline.lifecycle import reopen
from conveyor.pipeline.outcomes import Outcome, Writes
from conveyor.sizes import human_size

__all__ = [
    "IMAGE_ROLES",
    "LONG_LANE",
    "LONG_LEASE",
    "MEDIA",
    "OWNED_FIELDS",
    "ROLES",
    "SHORT_LANE",
    "MediaSteps",
    "build_media_domain",
]

ROLES = tuple(Role)


@dataclass(frozen=True)
class _Object:
    """A finished object waiting in the store for its journal row."""

    role: str
    key: str
    mime_type: str
    format: str
    size: int
    sha256: str
    width: int | None
    height: int | None
    duration: float | None = None
    # Another role of the same step whose object has exactly these bytes: this role names
    # that object (one object, one journal row, M1) instead of storing a copy.
    shares: str | None = None


def _facts(obj: _Object) -> dict[str, Any]:
    """The journal row's columns of a stored object."""
    return {
        "key": obj.key,
        "mime_type": obj.mime_type,
        "format": obj.format,
        "size": obj.size,
        "sha256": obj.sha256,
        "width": obj.width,
        "height": obj.height,
        "duration": obj.duration,
    }


def _role(row: Mapping[str, Any] | RowMapping) -> dict[str, Any]:
    """A role as the album event and the item view show it (:func:`roles_of`'s shape)."""
    return {
        "key": row["key"],
        "mime_type": row["mime_type"],
        "size": row["size"],
        "width": row["width"],
        "height": row["height"],
        "duration": seconds(row["duration"]),
    }


class MediaSteps:
    """The media steps, bound to their services (config passed down, never global).

    Args:
        store: the object store.
        settings: ``[media]`` settings (sizes, format, quality, pixel limit, playback).
    """

    def __init__(self, store: ObjectStore, settings: MediaSettings) -> None:
        self.store = store
        self.settings = settings
        # libvips gives every image pipeline one thread per CPU; with several short-lane workers
        # each running one, that oversubscribes the CPUs and multiplies the per-thread buffers
        # (tens of MB on a 20 MP photo). Share the CPUs out instead.
        cpus = os.cpu_count() or 1
        pyvips.concurrency_set(max(1, cpus // max(1, settings.short_workers)))

    def discard(self, engine: Engine, keys: Sequence[str]) -> None:
        """Remove the objects among ``keys`` that have no journal row (a halt, a deletion)."""
        discard_unjournaled(engine, self.store, keys)

    @property
    def sizes(self) -> dict[str, int]:
        """Image role → longest edge in pixels."""
        s = self.settings
        return {"thumb": s.thumb_size, "medium": s.medium_size, "preview": s.preview_size}

    # --- steps ------------------------------------------------------------------------------

    def variants(self, ctx: StepContext) -> Outcome:
        """``uploaded`` → ``done``, or ``transcoding`` for a kind that plays (video) and an item
        that moves: the image roles (drawn from a poster frame for a kind with one)."""
        item = ctx.record
        with ExitStack() as stack:
            original, rows = self._original(ctx, stack)
            if original is None:
                return self._halt(
                    ctx, MediaError(MediaHalt.ORIGINAL_MISSING, "the original is missing")
                )
            work = stack.enter_context(self.store.scratch())
            try:
                outcome = self._variants(ctx, original, work, rows)
            except MediaError as exc:
                return self._halt(ctx, exc, original)
        fields, objects, moving = outcome
        # A motion photo's clip, or a Live Photo's movie, is converted in the long lane too.
        target = "transcoding" if MediaKind(item["kind"]).plays or moving else "done"
        roles = ", ".join(
            o.role if o.shares is None else f"{o.role} (the {o.shares}'s object)" for o in objects
        )
        writes = self._save(ctx, rows, objects, "item.ready", target)
        if target == "done" and item["content_id"] is not None:
            writes = self._then_motion(ctx, writes)
        return Advance(fields, to=target, writes=writes, note=f"variants ready: {roles}")

    def _then_motion(self, ctx: StepContext, writes: Writes) -> Writes:
        """``writes``, then, for a Live Photo still: a movie paired while this step ran sends
        the photo, saved at ``done`` in this transaction, on to ``transcoding`` for its clip
        (intake locks the still's row to pair, so either this sees the movie or the pairing
        sees this save)."""
        item_id = int(ctx.record["id"])

        def then(conn: Connection) -> Any:
            extra = writes(conn)
            if any(r["role"] == Role.MOTION_ORIGINAL for r in queries.objects_of(conn, item_id)):
                reopen(
                    conn,
                    MEDIA,
                    item_id,
                    done="done",
                    to="transcoding",
                    clock=ctx.clock,
                    note="Live Photo: its movie was paired while the variants were made",
                )
            return extra

        return then

    def playback(self, ctx: StepContext) -> Outcome:
        """``transcoding`` → ``done``: the H.264/AAC ``playback`` role of a video, or the
        ``motion`` role of a motion photo's clip or a Live Photo's movie (long lane, M3, M8)."""
        with ExitStack() as stack:
            original, rows = self._original(ctx, stack)
            if original is None:
                return self._halt(
                    ctx, MediaError(MediaHalt.ORIGINAL_MISSING, "the original is missing")
                )
            work = stack.enter_context(self.store.scratch())
            try:
                obj, result = self._playback(ctx, original, work, stack, rows)
            except MediaError as exc:
                return self._halt(ctx, exc, original)
        how = "remuxed" if result.remuxed else "transcoded"
        if result.deinterlaced:
            how += " (interlaced source, deinterlaced)"
        what = "motion clip" if obj.role == Role.MOTION else "playback"
        note = f"{what} {how}: {result.width}×{result.height}, {human_size(result.size)}"
        fields: dict[str, Any] = {}
        declared = ctx.record["duration"]
        if declared is not None and _cut_short(float(declared), result.duration):
            # Its header was written first (faststart, a camera's index) and the frames after
            # the cut never were: say so, and give the duration that plays.
            fields = {"incomplete": True, "duration": result.duration}
            note += (
                f"; incomplete: its frames stop at {result.duration:.1f} s of the "
                f"{float(declared):.1f} s its header declares (the file was cut off)"
            )
        return Advance(
            fields,
            writes=self._save(ctx, rows, [obj], "item.playback_ready", "done"),
            note=note,
        )

    def _variants(
        self, ctx: StepContext, original: Path, work: Path, rows: Sequence[RowMapping]
    ) -> tuple[dict[str, Any], list[_Object], bool]:
        """The image roles (and a video's poster) of ``original``, made in ``work`` and stored,
        and whether the photo moves (a clip embedded, or a Live Photo movie paired)."""
        item = ctx.record
        if not MediaKind(item["kind"]).poster:
            moving = embedded_clip(original) is not None or any(
                r["role"] == Role.MOTION_ORIGINAL for r in rows
            )
            return (
                self._photo_fields(item, original),
                self._image_roles(ctx, original, work),
                moving,
            )
        video = probe_video(original)
        fields = {
            "width": video.width,
            "height": video.height,
            "duration": video.duration,
            "captured_at": _epoch(video.captured_at),
            "captured_offset": video.captured_offset,
        }
        poster = work / "poster.jpg"
        width, height = extract_poster(original, poster, video)
        ctx.check()
        objects = self._image_roles(ctx, poster, work / "images")
        objects.append(self._keep(ctx, "poster", poster, "image/jpeg", width, height))
        return fields, objects, False

    def _motion_source(
        self, rows: Sequence[RowMapping], original: Path, work: Path, stack: ExitStack
    ) -> Path:
        """A photo's clip: its Live Photo movie (``motion_original``), else the MP4 embedded
        in the motion photo ``original``, copied into ``work``.

        Raises:
            MediaError: ``unsupported_media`` when the photo has neither (any more).
        """
        key = next((str(r["key"]) for r in rows if r["role"] == Role.MOTION_ORIGINAL), None)
        if key is not None:
            try:
                return stack.enter_context(self.store.local_copy(key))
            except FileNotFoundError as exc:
                raise MediaError(
                    MediaHalt.ORIGINAL_MISSING, "the Live Photo's movie is missing"
                ) from exc
        clip = embedded_clip(original)
        if clip is None:
            raise MediaError(MediaHalt.UNSUPPORTED_MEDIA, "the photo carries no motion clip")
        return copy_clip(original, clip, work / "embedded.mp4")

    def _playback(
        self,
        ctx: StepContext,
        original: Path,
        work: Path,
        stack: ExitStack,
        rows: Sequence[RowMapping],
    ) -> tuple[_Object, Playback]:
        """The ``playback`` role of the video ``original`` (a photo's: the ``motion`` role of
        its clip), made in ``work`` and stored."""
        s = self.settings
        role = Role.PLAYBACK
        if not MediaKind(ctx.record["kind"]).plays:  # it moves only by its clip
            role = Role.MOTION
            original = self._motion_source(rows, original, work, stack)
        info = probe_video(original)
        result = make_playback(
            original,
            work / "playback.mp4",
            info,
            max_height=s.playback_max_height,
            max_bitrate=s.playback_max_bitrate,
            crf=s.playback_crf,
            audio_bitrate=s.playback_audio_bitrate,
            # Raises ClaimLost / StopRequested: the transcode stops at once (M8).
            progress=lambda _done: ctx.check(),
        )
        ctx.check()
        obj = self._keep(
            ctx,
            role,
            result.path,
            "video/mp4",
            result.width,
            result.height,
            duration=result.duration,
        )
        return obj, result

    # --- helpers ----------------------------------------------------------------------------

    def _photo_fields(self, item: Mapping[str, Any], original: Path) -> dict[str, Any]:
        """Intake stored the upright size and capture time from the header: nothing to redo.

        Only an item without them (written before intake stored them) has its header read here.
        """
        if item["width"] is not None and item["height"] is not None:
            return {}
        info = probe_image(original, max_pixels=self.settings.max_pixels)
        return {
            "width": info.width,
            "height": info.height,
            "captured_at": _epoch(info.captured_at),
            "captured_offset": info.captured_offset,
        }

    def _original(
        self, ctx: StepContext, stack: ExitStack
    ) -> tuple[Path | None, Sequence[RowMapping]]:
        """A local copy of the item's original (kept until ``stack`` closes; None when the
        journal or the store no longer has it), and the item's role rows, read after the claim.
        """
        # One statement, outside a transaction (no BEGIN, no ROLLBACK): every round trip
        # counts on a link between racks; the role row carries the journal's key.
        with ctx.engine.connect() as conn, autocommit(conn):
            rows = queries.objects_of(conn, int(ctx.record["id"]))
        row = next((r for r in rows if r["role"] == "original"), None)
        if row is None:
            return None, rows
        try:
            return stack.enter_context(self.store.local_copy(str(row["key"]))), rows
        except FileNotFoundError:
            return None, rows

    def _image_roles(self, ctx: StepContext, src: Path, out_dir: Path) -> list[_Object]:
        variants = make_image_variants(
            src,
            out_dir,
            sizes=self.sizes,
            image_format=self.settings.image_format,
            quality=self.settings.image_quality,
            max_pixels=self.settings.max_pixels,
        )
        ctx.check()
        kept: list[_Object] = []
        by_digest: dict[str, _Object] = {}
        # Largest first: a photo no larger than a role's edge gives the same bytes for several
        # roles (medium and preview of a small photo), stored once under the largest's name and
        # named by each role.
        for v in sorted(reversed(variants), key=lambda v: -v.width * v.height):
            digest = file_sha256(v.path)
            same = by_digest.get(digest)
            if same is not None:
                kept.append(replace(same, role=v.role, shares=same.role))
                continue
            obj = self._keep(ctx, v.role, v.path, v.mime_type, v.width, v.height)
            by_digest[digest] = obj
            kept.append(obj)
        return kept

    def _keep(
        self,
        ctx: StepContext,
        role: str,
        path: Path,
        mime_type: str,
        width: int,
        height: int,
        *,
        duration: float | None = None,
    ) -> _Object:
        """Store a finished file under a claim-unique key ``media/<item>/<role>-<token>.<ext>``.

        A holder whose claim expired writes beside the live holder's object, never over it;
        the journal names the object only once this claim's fenced save lands (M4).
        """
        ext = path.suffix.lstrip(".").lower()
        token = ctx.claim.token[:16]
        key = ctx.produced_object(MEDIA_KEYS.produced(ctx.record["id"], f"{role}-{token}.{ext}"))
        stored = self.store.put_file(key, path)
        return _Object(
            role, key, mime_type, ext, stored.size, stored.sha256, width, height, duration
        )

    def _save(
        self,
        ctx: StepContext,
        rows: Sequence[RowMapping],
        objects: list[_Object],
        kind: str,
        stage: str,
    ) -> Writes:
        """Journal rows, role rows and the album event: one transaction with the save (M4, M5).

        ``rows`` are the item's role rows as the step read them after its claim: the roles a step
        makes are written only by a holder of the claim, and the save lands only while the claim
        holds, so those are still the item's when it does (a Live Photo's movie paired with the
        still meanwhile is another role, left as it is; :meth:`_then_motion` looks for it).
        """
        item = ctx.record
        item_id, album_id = int(item["id"]), int(item["album_id"])
        now = ctx.now()
        earlier = {str(r["role"]): int(r["file_id"]) for r in rows}
        roles = {str(r["role"]): _role(r) for r in rows}
        roles.update({obj.role: _role(_facts(obj)) for obj in objects})
        payload = {
            "item_id": item_id,
            "kind": item["kind"],
            "stage": stage,
            "roles": dict(sorted(roles.items())),
        }

        def writes(conn: Connection) -> None:
            # Round trips, not rows, are what a slow link to the database charges for: the role
            # rows come from the step's read, and a first run's journal rows, role rows and
            # album event are one statement (whose roles come from what is at hand).
            if any(o.role in earlier for o in objects):
                _replace_objects(conn, item_id, earlier, objects, now)
                queries.insert_album_event(
                    conn,
                    album_id=album_id,
                    item_id=item_id,
                    kind=kind,
                    payload=payload,
                    created_at=now,
                )
                return
            queries.add_new_objects(
                conn,
                item_id,
                [_facts(o) for o in objects if o.shares is None],
                {o.role: o.key for o in objects},
                now,
                event=queries.AlbumEvent(album_id, item_id, kind, payload, now),
            )

        return writes

    def _halt(self, ctx: StepContext, exc: MediaError, original: Path | None = None) -> Halt:
        """Halt with the readable reason and tell the album (``item.halted``); original kept."""
        item = ctx.record
        item_id, album_id = int(item["id"]), int(item["album_id"])
        now = ctx.now()
        message = exc.message
        if original is not None:
            message = owner_message(message, original, item["original_name"])
        payload = {
            "item_id": item_id,
            "kind": item["kind"],
            "stage": item["stage"],
            "reason": exc.reason,
            "error": message,
        }

        def writes(conn: Connection) -> None:
            queries.insert_album_event(
                conn,
                album_id=album_id,
                item_id=item_id,
                kind="item.halted",
                payload=payload,
                created_at=now,
            )

        return Halt(exc.reason, message, writes=writes)


def _replace_objects(
    conn: Connection,
    item_id: int,
    earlier: Mapping[str, int],
    objects: Sequence[_Object],
    now: float,
) -> None:
    """A re-run's save: its objects take over the earlier run's journal rows, role by role."""
    written: dict[str, int] = {}
    fresh: list[_Object] = []
    for obj in objects:
        if obj.shares is not None:
            continue
        replaces = earlier.get(obj.role)
        if replaces is None or replaces in written.values():
            # New, or the earlier run named one object by several roles: a new row.
            fresh.append(obj)
            continue
        # A re-run's object takes over the earlier run's journal row; the earlier object,
        # named by no row now, goes with the sweep.
        written[obj.role] = put_file_row(conn, replaces=replaces, now=now, **_facts(obj))
    ids = put_file_rows(conn, [_facts(obj) for obj in fresh], now)
    written.update({obj.role: i for obj, i in zip(fresh, ids, strict=True)})
    # Roles with the same bytes as another name its object (one object, one row, M1).
    written.update({o.role: written[o.shares] for o in objects if o.shares is not None})
    for role, file_id in written.items():
        if role in earlier and earlier[role] != file_id:
            queries.put_object(conn, item_id, role, file_id)
    queries.add_objects(conn, item_id, {r: i for r, i in written.items() if r not in earlier})
    # An earlier run's row that no role names now (this run shares what it kept apart).
    unnamed = set(earlier.values()) - set({**earlier, **written}.values())
    if unnamed:
        delete_file_rows(conn, unnamed)


def _cut_short(declared: float, played: float) -> bool:
    """True when a video's frames end well before its declared duration: by more than a second
    and more than 5 % (an audio track a little longer than the video is no damage)."""
    missing = declared - played
    return missing > 1.0 and missing > 0.05 * declared


def _epoch(when: Any) -> float | None:
    return None if when is None else float(when.timestamp())


def build_media_domain(steps: MediaSteps, *, long_lease: float = LONG_LEASE) -> Domain:
    """The media domain with its steps bound.

    Args:
        long_lease: lease of the transcoding stage in seconds (renewed every third of it).
    """
    return MEDIA.bind(
        {"uploaded": steps.variants, "transcoding": steps.playback},
        leases={"transcoding": long_lease},
        discard=steps.discard,
    )
