"""Accepting an audio upload: store the original, journal it, create the record at ``uploaded``."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import BinaryIO

from sqlalchemy import Connection, Engine

from conveyor.audio import queries
from conveyor.audio.stages import AUDIO, AUDIO_KEYS
from conveyor.clock import Clock
from conveyor.error_codes import ErrorCode
from conveyor.errors import Duplicate, RejectedInput, UnsupportedMedia
from conveyor.files import file_sha256
from conveyor.kinds import TextKind
from conveyor.limits import HINTS
from conveyor.objects import ObjectStore, lock_content, put_file_row
from conveyor.objects.sniff import (
    OCTET_STREAM,
    SNIFF_BYTES,
    Sniffed,
    container_signature,
    is_document,
    looks_like_pcm,
    sniff,
    sniff_object,
)
from conveyor.pipeline.lifecycle import admit, database_now
from conveyor.sizes import human_size

__all__ = [
    "CHANNEL_CHOICES",
    "MAX_HINTS",
    "accept_audio",
    "clean_hints",
    "clean_language",
    "record_holding",
]

CHANNEL_CHOICES = ("mix", "separate")
"""How a recording's channels and audio tracks are recognised: as one mix, or each apart."""


def accept_audio(
    engine: Engine,
    store: ObjectStore,
    clock: Clock,
    source: Path | BinaryIO | Iterable[bytes],
    *,
    owner: str,
    original_name: str | None = None,
    title: str | None = None,
    language: str | None = None,
    raw_pcm: bool = False,
    strict: bool = False,
    max_bytes: int | None = None,
    languages: Collection[str] | None = None,
    on_insert: Callable[[Connection, int], None] | None = None,
    hints: str | None = None,
    channels: str | None = None,
    keep_duplicate: bool = False,
) -> int:
    """Accept one recording; the original is stored unchanged and the record starts ``uploaded``.

    Each file is kept once per owner: content the owner already holds as a record's original
    (same SHA-256) raises :class:`~conveyor.errors.Duplicate` naming that record, with nothing
    stored, unless ``keep_duplicate``. A local file is hashed before anything is stored (a
    rerun over a folder copies nothing twice); a stream is hashed as it is stored. The decision
    is made again in the transaction that inserts, under :func:`~conveyor.objects.lock_content`,
    so intakes of the same bytes by one owner at the same moment (threads, processes, hosts)
    make one record: the others raise ``Duplicate`` and their stored object is removed.

    Args:
        source: a file path, a binary stream or byte chunks (streamed, never held in memory).
        owner: the record's owner (required).
        language: ISO 639-1 code the owner says the speech is in, in any case and with any
            surrounding blanks (stored lower case, see :func:`clean_language`); None = detect.
        raw_pcm: the owner says this is headerless 16 kHz mono s16le PCM.
        strict: refuse content that sniffs as neither audio nor video, as both entry points
            (HTTP and ``conveyor records add``) do; without it ``normalize`` halts such content
            ``not_audio`` (how tests reach that halt).
        max_bytes: size limit in bytes.
        languages: the language codes the recognizer accepts; ``language`` must be one.
        on_insert: called with the open transaction and the new id, before it commits (the
            HTTP layer records an ``Idempotency-Key`` there); what it raises undoes the upload.
        hints: vocabulary hints for the recognizer (names, terms; at most
            :data:`MAX_HINTS` characters), kept as the record's text of kind ``hints``.
        channels: ``"mix"`` (every channel and track heard as one) or ``"separate"`` (each
            recognised on its own, segments labelled), stored with the record; None leaves the
            choice to ``[transcription] channels`` when the record is normalized (callers pass
            that setting, so the record shows what it gets).
        keep_duplicate: keep a second record of content the owner already holds.

    Returns:
        The new record's id.

    Raises:
        RejectedInput: ``empty_file`` (zero bytes), ``too_large``, ``no_owner``,
            ``unknown_language``, ``bad_hints``, ``bad_channels`` (checked before anything is
            stored; an empty stream once it is read).
        UnsupportedMedia: with ``strict``, content that is not audio or video, or not the
            headerless PCM ``raw_pcm`` says (a local file: before anything is stored).
        Duplicate: the owner holds this content already (not with ``keep_duplicate``); said
            only of a file no refusal above applies to, so a WAV sent as raw PCM is refused as
            one even when the owner holds it.
    """
    if not owner or not owner.strip():
        raise RejectedInput(ErrorCode.NO_OWNER, "every record needs an owner")
    owner = owner.strip()
    language = clean_language(language)
    if language is not None and languages is not None and language not in languages:
        raise RejectedInput(
            ErrorCode.UNKNOWN_LANGUAGE,
            f"{language!r} is not a language code the recognizer knows; use an ISO 639-1 code "
            "such as en, de or ru, or leave it out to detect the language",
        )
    hints = clean_hints(hints)
    if channels is not None and channels not in CHANNEL_CHOICES:
        raise RejectedInput(
            ErrorCode.BAD_CHANNELS,
            f"channels must be one of {', '.join(CHANNEL_CHOICES)}, not {channels!r}",
        )
    key = AUDIO_KEYS.upload()
    # A refusal of the file as given (empty, not a recording, not the headerless PCM --raw-pcm
    # says) comes before "already there", as the options' refusals do: the owner learns what
    # is wrong with what they sent, not that the same bytes were once sent another way.
    if isinstance(source, Path):
        original_name = original_name or source.name
        with source.open("rb") as file:
            head = file.read(SNIFF_BYTES)
        if not head:
            raise RejectedInput(ErrorCode.EMPTY_FILE, "the upload is empty (0 bytes)")
        if strict:
            _check_content(head, sniff(source), raw_pcm=raw_pcm)
        if not keep_duplicate:
            held = record_holding(engine, owner, source)
            if held is not None:
                raise Duplicate(held, "record", original_name)
    stored = store.put(key, source, max_bytes=max_bytes)
    try:
        if stored.size == 0:
            raise RejectedInput(ErrorCode.EMPTY_FILE, "the upload is empty (0 bytes)")
        sniffed, head = sniff_object(store, key)
        if strict:
            _check_content(head, sniffed, raw_pcm=raw_pcm)
        with engine.begin() as conn:
            if not keep_duplicate:
                # Decided in the transaction that inserts, under a lock on (owner, content):
                # a concurrent intake of the same bytes that also found them new above (or
                # never looked, a stream) commits first or waits, and the loser's object goes.
                lock_content(conn, owner, stored.sha256)
                held = queries.record_with_content(conn, owner, stored.sha256)
                if held is not None:
                    raise Duplicate(held, "record", original_name)
            now = database_now(conn, clock)  # D17: the record's sort time is the database's
            file_id = put_file_row(
                conn,
                key=key,
                mime_type=sniffed.mime,
                size=stored.size,
                sha256=stored.sha256,
                now=now,
            )
            record_id = admit(
                conn,
                AUDIO,
                fields={
                    "owner": owner,
                    "title": title,
                    "created_at": now,
                    "original_name": original_name,
                    "original_file_id": file_id,
                    "raw_pcm": raw_pcm,
                    "language": language,
                    "channels": channels,
                },
                clock=clock,
                note=f"{original_name or 'upload'}: {human_size(stored.size)}, {sniffed.mime}",
            )
            if on_insert is not None:
                on_insert(conn, record_id)
            if hints:
                queries.upsert_text(
                    conn,
                    record_id=record_id,
                    kind=TextKind.HINTS,
                    body=hints,
                    segments=None,
                    language=None,
                    now=now,
                )
    except BaseException:
        store.delete(key)
        raise
    return record_id


def record_holding(engine: Engine, owner: str, path: Path) -> int | None:
    """The record of ``owner`` whose original has the same bytes as the local file ``path``
    (by SHA-256), or None: how ``conveyor ingest`` knows a file it already accepted.

    Raises:
        OSError: ``path`` cannot be read.
    """
    if not path.stat().st_size:
        return None  # an empty file is refused, never "already here"
    digest = file_sha256(path)
    with engine.connect() as conn:
        return queries.record_with_content(conn, owner.strip(), digest)


def _check_content(head: bytes, sniffed: Sniffed, *, raw_pcm: bool) -> None:
    """Refuse (HTTP intake) what cannot be a recording, saying what to do when we can tell.

    Raises:
        UnsupportedMedia: ``not_media``: raw PCM that sniffs as an image, text, markup, PDF or
            archive, or that opens with the complete signature of an audio or video format
            (WAV, MP3, Ogg, FLAC, MP4/M4A, Matroska/WebM, AMR, ...); or content that is
            neither audio nor video (with the ``raw_pcm=true`` hint when its bytes look like
            headerless samples).
    """
    if raw_pcm:
        if is_document(sniffed):
            raise UnsupportedMedia(
                ErrorCode.NOT_MEDIA,
                f"the upload says raw_pcm=true but its content is {sniffed.mime}, not "
                "headerless PCM samples",
            )
        container = container_signature(head)
        if container is not None:
            # Read as samples, a compressed file "succeeds" as noise with no speech. Only
            # complete signatures count (see container_signature), so real PCM is not refused.
            found, name = container
            what = f"{name} {found.kind}" if found.kind in ("audio", "video") else name
            raise UnsupportedMedia(
                ErrorCode.NOT_MEDIA,
                f"this file is {what}, not headerless PCM: send it again without raw_pcm=true "
                "(HTTP), or add it without --raw-pcm (conveyor records add)",
            )
        return
    if sniffed.kind in ("audio", "video"):
        return
    pcm_like = sniffed.mime == OCTET_STREAM and looks_like_pcm(head)
    if pcm_like:
        raise UnsupportedMedia(
            ErrorCode.NOT_MEDIA,
            "the upload has no audio header but looks like headerless PCM samples; if it is "
            "16 kHz mono signed 16-bit little-endian PCM, send it again with raw_pcm=true "
            "(HTTP) or --raw-pcm (conveyor records add)",
        )
    raise UnsupportedMedia(
        ErrorCode.NOT_MEDIA, f"the upload is not audio (its content looks like {sniffed.mime})"
    )


def clean_language(language: str | None) -> str | None:
    """A language code as the recognizer knows it: ``" EN "`` gives ``"en"``; None stays None.

    Codes are case-insensitive (ISO 639 writes them lower case, people often do not), so every
    entry point cleans a given code with this before checking it; what is stored is lower case.
    Whether the result is a code at all is left to the caller's check.
    """
    return None if language is None else language.strip().lower()


MAX_HINTS = HINTS.longest
"""Longest vocabulary hint text in characters, as :data:`conveyor.limits.HINTS` declares."""


def clean_hints(hints: str | None, *, vocabulary: bool = False) -> str | None:
    """Vocabulary hints with whitespace collapsed; None when empty.

    Args:
        vocabulary: the text is an owner's standing vocabulary, not a recording's own hints;
            only the messages differ, so each names what the person typed into.

    Raises:
        RejectedInput: ``bad_hints``: longer than :data:`MAX_HINTS` or with control characters
            (U+0000-U+001F, U+007F-U+009F) once whitespace is collapsed.
    """
    if hints is None:
        return None
    cleaned = " ".join(hints.split())
    if len(cleaned) > MAX_HINTS:
        raise RejectedInput(
            ErrorCode.BAD_HINTS,
            f"vocabulary is longer than {MAX_HINTS:,} characters"
            if vocabulary
            else f"hints are longer than {MAX_HINTS} characters",
        )
    if any(HINTS.refuses(ch) for ch in cleaned):
        raise RejectedInput(
            ErrorCode.BAD_HINTS,
            "vocabulary contains control characters"
            if vocabulary
            else "hints contain control characters",
        )
    return cleaned or None
