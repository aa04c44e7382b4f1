"""Pydantic models of every request and response body, so ``/openapi.json`` is precise.

Times are ISO 8601 UTC (``2027-01-15T08:00:00Z``); durations are seconds; sizes are bytes;
dimensions are upright pixels. Links are paths on this server (``/api/records/7/text``), so
they stay right behind a reverse proxy.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from conveyor.audio.stages import AUDIO
from conveyor.kinds import MediaKind, Role, ShareRole
from conveyor.limits import (
    ALBUM_NAME,
    HINTS,
    LINK_LABEL,
    PROOFREAD_SEGMENT,
    RECORD_BRIEF,
    RECORD_TITLE,
    TOPIC,
    USER_NAME,
)
from conveyor.media.stages import MEDIA

__all__ = [
    "PLAIN_TEXT",
    "Album",
    "AlbumCreate",
    "AlbumDetail",
    "AlbumLinks",
    "AlbumRoleName",
    "AudioStage",
    "ErrorBody",
    "ErrorDetail",
    "ErrorInfo",
    "Health",
    "IssuedLink",
    "Item",
    "ItemLinks",
    "KindName",
    "Link",
    "LinkCreate",
    "MediaStage",
    "Proofread",
    "ProviderWait",
    "RecordCard",
    "RecordEvent",
    "RecordLinks",
    "RecordPage",
    "RecordPatch",
    "RoleName",
    "RoleObject",
    "Share",
    "ShareCreate",
    "ShareRoleName",
    "SharedAlbum",
    "TextJson",
    "TextSegment",
    "TextWord",
    "Topics",
    "UploadedItem",
    "UploadedRecord",
]

# Text the databases can store: no NUL (PostgreSQL refuses it in text columns). The texts
# people give (titles, names, notes) have their own limits, declared in conveyor.limits.
PLAIN_TEXT = r"^[^\x00]*$"

if TYPE_CHECKING:
    AudioStage = str
    MediaStage = str
    RoleName = str
    KindName = str
    ShareRoleName = str
    AlbumRoleName = str
else:
    # Derived from each domain's one declaration (D11): a new stage needs no edit here.
    AudioStage = Literal[AUDIO.stage_names]
    MediaStage = Literal[MEDIA.stage_names]
    # And from the one list of roles and kinds (conveyor.kinds).
    RoleName = Literal[tuple(r.value for r in Role)]
    KindName = Literal[tuple(k.value for k in MediaKind)]
    ShareRoleName = Literal[tuple(r.value for r in ShareRole)]
    AlbumRoleName = Literal[("owner", *(r.value for r in ShareRole))]


class ErrorDetail(BaseModel):
    """One invalid field of a 422."""

    field: str = Field(description="Where: e.g. `query.limit`, `body.title`.")
    message: str


class ErrorInfo(BaseModel):
    """What went wrong."""

    status: int = Field(description="The HTTP status, repeated.")
    code: str = Field(description="A stable machine word, e.g. `not_found`, `too_large`.")
    message: str = Field(description="A sentence for people.")
    details: list[ErrorDetail] | None = Field(default=None, description="422 only.")


class ErrorBody(BaseModel):
    """The one error shape of every refusal."""

    error: ErrorInfo


class Health(BaseModel):
    """``/healthz``: the process is up, the database and the object store answer."""

    status: Literal["ok"]
    database: Literal["ok"]
    storage: Literal["ok"]
    workers: bool = Field(description="True when this process runs the worker pool.")


class RecordLinks(BaseModel):
    """Where to read more about a record."""

    self: str
    text: str = Field(description="The record's text address (P11); 404 until it is written.")
    events: str
    original: str


class ProviderWait(BaseModel):
    """Why a record that is not halted still waits on its recognition provider (D6)."""

    provider: str = Field(description="The provider asked: `local`, `speechkit` or `openai`.")
    error: str | None = Field(
        description="What the provider said on the newest try, e.g. "
        "`openai is unreachable (ConnectError: [Errno 111] Connection refused)`."
    )
    tries: int = Field(description="Refused or failed tries since the record entered its stage.")
    next_try_at: datetime | None = Field(
        description="When the next try is due (a past time: due now, or being tried)."
    )


class RecordCard(BaseModel):
    """The record card: everything an owner needs to learn a record's outcome (P11)."""

    id: int
    owner: str
    title: str | None = Field(description="The owner's field (P7).")
    brief: str | None = Field(description="The owner's field (P7).")
    original_name: str | None
    stage: AudioStage = Field(description="The stage reached (kept when halted, P8).")
    done: bool = Field(description="True once it reached its last stage (`done`).")
    halted: bool = Field(description="True when the pipeline stopped; see `halt_reason`.")
    halt_reason: str | None = Field(description="Machine reason, e.g. `undecodable`, `stuck`.")
    halt_error: str | None = Field(description="What went wrong, for people.")
    halted_at: datetime | None
    attempts: int = Field(description="Failures in the current stage.")
    provider_wait: ProviderWait | None = Field(
        default=None,
        description="Set while the record waits at `normalized` or `submitted` because its "
        "provider refused or failed its newest try (busy, unreachable); null otherwise.",
    )
    language: str | None = Field(description="The language the owner named at upload.")
    detected_language: str | None = Field(
        description="Languages heard, comma-separated when the recording switches (`en,ru`)."
    )
    languages: list[str] = Field(
        default_factory=list, description="Every language heard, in order of first appearance."
    )
    channels: Literal["mix", "separate"] | None = Field(
        default=None,
        description="How channels and audio tracks are recognised: as one `mix`, or each "
        "`separate`ly with labelled segments (chosen at upload).",
    )
    hints: str | None = Field(
        default=None, description="The recording's own vocabulary hints (names, terms)."
    )
    duration: float | None = Field(description="Seconds of audio, once normalized.")
    no_speech: bool | None = Field(description="True when the recording holds no speech.")
    created_at: datetime
    stage_entered_at: datetime
    updated_at: datetime
    links: RecordLinks


class SnippetPart(BaseModel):
    """A piece of a search snippet; ``match`` marks a word the query matched."""

    text: str
    match: bool


class SearchHit(BaseModel):
    """Why a record was found by ``?q=``: where, how well, and the words around it."""

    record_id: int
    kind: Literal["title", "brief", "transcript", "proofread"] = Field(
        description="Where the best match is."
    )
    rank: float = Field(description="Higher is better; comparable within one answer only.")
    snippet: list[SnippetPart]
    start: float | None = Field(
        description="Seconds into the recording where the matched line starts (null for a "
        "title or brief)."
    )


class UploadedRecord(RecordCard):
    """The answer to an upload: the new record (201), or the one that already holds the same
    content (200, ``duplicate`` true; nothing was stored)."""

    duplicate: bool = Field(
        default=False,
        description="True when you already had this content (same SHA-256) as this record; "
        "upload with `keep_duplicate=true` to keep a second copy.",
    )


class RecordPage(BaseModel):
    """One page of records, newest first; with ``?q=``, the best matches first."""

    items: list[RecordCard]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null at the end."
    )
    hits: list[SearchHit] | None = Field(
        default=None, description="With `?q=`: one per item, in the same order."
    )


class RecordPatch(BaseModel):
    """The owner's fields of a record (P7). Absent fields are left as they are; null clears."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(
        default=None, max_length=RECORD_TITLE.longest, pattern=RECORD_TITLE.pattern
    )
    brief: str | None = Field(
        default=None, max_length=RECORD_BRIEF.longest, pattern=RECORD_BRIEF.pattern
    )


class TextWord(BaseModel):
    """One word with its times (seconds from the start); a word a proofread changed has none."""

    start: float | None = Field(description="Seconds from the start; null for a changed word.")
    end: float | None = Field(description="Seconds from the start; null for a changed word.")
    text: str
    probability: float | None = Field(
        default=None, description="The recognizer's confidence, 0-1, when it gives one."
    )


class TextSegment(BaseModel):
    """A stretch of speech, never spanning a pause of more than about a second."""

    start: float = Field(description="Seconds from the start.")
    end: float = Field(description="Seconds from the start.")
    text: str
    channel: str | None = Field(
        default=None, description="The channel or audio track it was heard on, when apart."
    )
    language: str | None = Field(default=None, description="ISO 639-1 code of this stretch.")
    words: list[TextWord] = Field(
        default_factory=list,
        description="Its words with their own times, when the recognizer gives them.",
    )


class TextJson(BaseModel):
    """The transcript with segment times (`?format=json`)."""

    record_id: int
    kind: Literal["transcript", "proofread"] = Field(
        default="transcript",
        description="`proofread` when the owner corrected the transcript (exports use it).",
    )
    language: str | None
    no_speech: bool
    text: str
    segments: list[TextSegment]


class Proofread(BaseModel):
    """The owner's correction: one text per transcript segment, in order (times are kept)."""

    model_config = ConfigDict(extra="forbid")

    segments: list[
        Annotated[
            str, Field(max_length=PROOFREAD_SEGMENT.longest, pattern=PROOFREAD_SEGMENT.pattern)
        ]
    ] = Field(max_length=100_000)


class Topics(BaseModel):
    """A record's topics (D9): at most five names; new names join your dictionary."""

    model_config = ConfigDict(extra="forbid")

    topics: list[Annotated[str, Field(max_length=TOPIC.longest, pattern=TOPIC.pattern)]] = Field(
        max_length=5
    )


class RecordEvent(BaseModel):
    """One entry of the record's history (D14)."""

    id: int
    stage: str
    outcome: str
    outcome_text: str | None
    origin: Literal["pipeline", "human"]
    created_at: datetime


class AlbumLinks(BaseModel):
    """Where to read and upload."""

    self: str
    items: str = Field(description="POST photos and videos here.")
    events: str = Field(description="Server-Sent Events of the album (M5).")


class Album(BaseModel):
    """An album."""

    id: int
    owner: str
    name: str
    item_count: int = Field(description="How many photos and videos it holds.")
    created_at: datetime
    role: AlbumRoleName = Field(
        default="owner",
        description="Yours in it: `owner`, or `viewer` / `contributor` of an album shared "
        "with you.",
    )
    links: AlbumLinks


class SharedAlbum(Album):
    """An album another user shares with you."""

    shared_at: datetime = Field(description="When it was shared with you (or your role set).")


class ShareCreate(BaseModel):
    """Share an album with a user, or change their role."""

    model_config = ConfigDict(extra="forbid")

    user: str = Field(
        min_length=1,
        max_length=USER_NAME.longest,
        pattern=USER_NAME.pattern,
        description="The user's name.",
    )
    role: ShareRoleName = Field(
        description="`viewer`: sees the album, its items and live events; `contributor`: "
        "also adds photos and videos (and may delete what they added)."
    )


class Share(BaseModel):
    """A user an album is shared with."""

    user: str
    role: ShareRoleName
    created_at: datetime


class LinkCreate(BaseModel):
    """A new view-only link to an album."""

    model_config = ConfigDict(extra="forbid")

    expires_in: float | None = Field(
        default=None,
        gt=0,
        le=10 * 365 * 86_400,
        description="Seconds until it stops working (at most ten years); null: until revoked.",
    )
    label: str | None = Field(
        default=None,
        max_length=LINK_LABEL.longest,
        pattern=LINK_LABEL.pattern,
        description="A note for you: who it was given to.",
    )


class Link(BaseModel):
    """A view-only link to an album (its token is shown only when it is created)."""

    id: int
    label: str | None
    created_at: datetime
    expires_at: datetime | None = Field(description="Null: until revoked.")
    expired: bool


class IssuedLink(BaseModel):
    """A link just created: `token` and `url` are shown this once and never again."""

    id: int
    label: str | None
    created_at: datetime
    expires_at: datetime | None
    expired: bool = False
    token: str = Field(description="The secret; only its SHA-256 is kept.")
    url: str = Field(description="The album's page for whoever holds the link (no account).")


class AlbumCreate(BaseModel):
    """A new album."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=ALBUM_NAME.longest, pattern=ALBUM_NAME.pattern)


class RoleObject(BaseModel):
    """One object of an item, by role (M1)."""

    url: str = Field(description="GET it (Range requests supported).")
    key: str
    mime_type: str
    size: int
    width: int | None
    height: int | None
    duration: float | None


class ItemLinks(BaseModel):
    """Where to read more about an item."""

    self: str
    album: str


class Item(BaseModel):
    """A photo or video with the roles that exist now; absent roles are absent (M2, M3)."""

    id: int
    album_id: int
    owner: str
    kind: KindName
    original_name: str | None
    stage: MediaStage
    done: bool
    halted: bool
    halt_reason: str | None
    halt_error: str | None
    width: int | None
    height: int | None
    duration: float | None
    uploaded_at: datetime
    captured_at: datetime | None = Field(
        description="The instant of capture (UTC). When the zone is unknown this is the "
        "camera's local clock read as UTC."
    )
    captured_offset: int | None = Field(
        default=None,
        description="The zone the photo or video was taken in, minutes east of UTC; null "
        "when the file does not say.",
    )
    captured_local: str | None = Field(
        default=None,
        description="The local time of capture with its offset (`2019-03-21T11:04:22-05:00`); "
        "null when the zone is unknown.",
    )
    incomplete: bool = Field(
        default=False,
        description="A video whose frames stop short of the duration its header declares "
        "(cut off while it was written); its history says where.",
    )
    added_by: str = Field(
        description="Who added it: the owner, or a contributor of the shared album (the item "
        "is the album owner's either way)."
    )
    roles: dict[RoleName, RoleObject]
    links: ItemLinks


class UploadedItem(Item):
    """The answer to an upload: the new item (201), or the one that already holds the same
    content (200, ``duplicate`` true; nothing was stored), in whichever of your albums."""

    duplicate: bool = Field(
        default=False,
        description="True when you already had this content (same SHA-256) as this item; "
        "upload with `keep_duplicate=true` to keep a second copy.",
    )


class AlbumDetail(Album):
    """An album with its items, newest capture first."""

    last_event_id: int = Field(
        description="The newest event id now: stream from it (`?last_event_id=`) to miss nothing."
    )
    items: list[Item] = Field(
        description="Items, newest capture first (an item without a capture time at its "
        "upload time)."
    )


class Vocabulary(BaseModel):
    """Your standing vocabulary hints: names and terms merged into every recording's own hints
    and given to the recognizer (Whisper's prompt, an OpenAI-compatible server's `prompt`)."""

    model_config = ConfigDict(extra="forbid")

    hints: str | None = Field(
        max_length=HINTS.longest,
        pattern=HINTS.pattern,
        description="Terms separated by commas; null or empty: none.",
    )
