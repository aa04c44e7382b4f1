"""Every table of Conveyor, on one :data:`metadata`.

Record tables (``audio_records``, ``media_items``) carry the same queue columns, stamped by
:func:`queue_columns`; content and attachments live in rows of their own (D1). Times are epoch
seconds as floats (P4 asks for the claim expiry "written as a number"); sizes are bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    and_,
    event,
)
from sqlalchemy.sql import ColumnElement

from conveyor.kinds import MediaKind, Role, ShareRole, TextKind, sql_in

if TYPE_CHECKING:
    from sqlalchemy.engine import Dialect
    from sqlalchemy.types import TypeEngine

__all__ = [
    "SearchVector",
    "album_events",
    "album_links",
    "album_shares",
    "albums",
    "api_tokens",
    "audio_records",
    "files",
    "idempotency_keys",
    "lane_pauses",
    "media_items",
    "media_objects",
    "metadata",
    "owner_vocabulary",
    "postgresql_options",
    "queue_columns",
    "queue_indexes",
    "recognition_attempts",
    "record_events",
    "record_topics",
    "schema_compat",
    "search_texts",
    "sign_in_addresses",
    "texts",
    "topics",
    "users",
    "web_sessions",
    "worker_processes",
]

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# Nothing here names the PostgreSQL dialect at import: an index's ``postgresql_*`` option or a
# PostgreSQL type does, and the dialect is a tenth of a SQLite command's start (~0.02 s of
# `conveyor records list`). Its index options wait here until a schema is made from the
# metadata (``before_create``) or :func:`postgresql_options` is called; the tsvector column is
# a type that picks its dialect's type when compiled.
_postgresql_options: list[tuple[Index, str, Any]] = []


def postgresql_options() -> MetaData:
    """:data:`metadata` with its indexes' PostgreSQL options (a partial index's ``WHERE``, the
    full-text index's GIN method) attached; what compares or creates a PostgreSQL schema from
    the metadata without :meth:`~sqlalchemy.MetaData.create_all` calls it first (the
    migrations' environment does). Idempotent; loads the PostgreSQL dialect."""
    while _postgresql_options:
        index, key, value = _postgresql_options.pop()
        index.dialect_kwargs[f"postgresql_{key}"] = value
    return metadata


@event.listens_for(metadata, "before_create")
def _before_create(*_args: Any, **_kw: Any) -> None:
    postgresql_options()


class SearchVector(TypeDecorator[str]):
    """PostgreSQL's ``tsvector``; text elsewhere (SQLite searches its FTS5 tables instead).
    Chosen as a dialect compiles the column, so naming it loads no dialect."""

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """``TSVECTOR`` on PostgreSQL, ``TEXT`` on any other database."""
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import TSVECTOR

            return dialect.type_descriptor(TSVECTOR())
        return dialect.type_descriptor(Text())


def queue_columns() -> list[Column[object]]:
    """The pipeline's columns, identical on every record table (P1-P10, D3, D6).

    ``stage`` is the reached stage; ``state_entered_at`` when it was entered (backlog age);
    ``work_started_at`` the first claim in this stage, where the stuck countdown starts (D3: time
    spent waiting for a worker is backlog, not stuck), None until then;
    ``claim_token``/``claim_expires_at`` the current claim (fencing token, lease end);
    ``step_started_at`` when the current claim's step started (None: no claim, or a claim whose
    step has not started, which lapses without cost; a started one that lapses is a lost
    worker, D18); ``claimed_by`` the holder that took the claim (its process's
    ``worker_processes.holder``; None for a claim by a process that does not register);
    ``attempts`` failures in this stage; ``retry_at`` the retry pause; ``halted_at``,
    ``halt_reason``, ``halt_error`` the halt flag (P8).
    """
    return [
        Column("stage", String(32), nullable=False),
        Column("state_entered_at", Double, nullable=False),
        Column("work_started_at", Double, nullable=True),
        Column("claim_token", String(32), nullable=True),
        Column("claim_expires_at", Double, nullable=True),
        Column("step_started_at", Double, nullable=True),
        Column("claimed_by", String(32), nullable=True),
        Column("attempts", Integer, nullable=False, server_default="0"),
        Column("retry_at", Double, nullable=True),
        Column("halted_at", Double, nullable=True),
        Column("halt_reason", String(64), nullable=True),
        Column("halt_error", Text, nullable=True),
        Column("updated_at", Double, nullable=False),
    ]


users = Table(
    "users",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(100), nullable=False, unique=True),
    Column("created_at", Double, nullable=False),
    # Web sign-in: an argon2id hash (PHC string), or null for a user without a password.
    Column("password_hash", String(200), nullable=True),
    Column("is_admin", Boolean, nullable=False, server_default="0"),
    # Failed sign-ins in a row, and until when sign-in is paused after too many.
    Column("failed_sign_ins", Integer, nullable=False, server_default="0"),
    Column("sign_in_paused_until", Double, nullable=True),
)

# Failed sign-ins per client address (an IPv6 client by its /64): an address that tries many
# names pauses, beside each name's own pause in ``users``.
sign_in_addresses = Table(
    "sign_in_addresses",
    metadata,
    Column("address", String(64), primary_key=True),
    Column("failed", Integer, nullable=False, server_default="0"),
    Column("last_failed_at", Double, nullable=False),
    Column("paused_until", Double, nullable=True),
)

# Browser sessions: the cookie's SHA-256 only, and the CSRF token its forms carry.
web_sessions = Table(
    "web_sessions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("csrf_token", String(64), nullable=False),
    Column("created_at", Double, nullable=False),
    Column("expires_at", Double, nullable=False),
    Index("ix_web_sessions_user_id", "user_id"),
)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("label", String(100), nullable=True),
    Column("created_at", Double, nullable=False),
    Column("last_used_at", Double, nullable=True),
    # A revoked token's row is deleted; its id must never name a later token (`tokens revoke`).
    sqlite_autoincrement=True,
)

# The object journal: one row per physical object (an upload, a variant, a raw response), M1.
files = Table(
    "files",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("key", String(255), nullable=False, unique=True),
    Column("mime_type", String(100), nullable=False),
    Column("format", String(50), nullable=True),
    Column("size", BigInteger, nullable=False),
    Column("sha256", String(64), nullable=True),
    Column("width", Integer, nullable=True),
    Column("height", Integer, nullable=True),
    Column("duration", Double, nullable=True),
    Column("state", String(16), nullable=False),
    Column("created_at", Double, nullable=False),
    # Intake finds content an owner already holds by it (each file kept once per owner).
    Index("ix_files_sha256", "sha256"),
)

audio_records = Table(
    "audio_records",
    metadata,
    Column("id", Integer, primary_key=True),
    # Owner-edited fields (P7): the pipeline never writes these.
    Column("owner", String(100), nullable=False),
    Column("title", String(300), nullable=True),
    Column("brief", Text, nullable=True),
    # Intake facts.
    Column("created_at", Double, nullable=False),
    Column("original_name", String(300), nullable=True),
    Column("original_file_id", Integer, ForeignKey("files.id"), nullable=False),
    Column("raw_pcm", Boolean, nullable=False, server_default="0"),
    Column("language", String(16), nullable=True),
    # "mix" or "separate" (per-channel recognition), chosen at upload; NULL for records from
    # before the choice existed: they follow [transcription] channels.
    Column("channels", String(8), nullable=True),
    # Pipeline-owned results.
    Column("normalized_file_id", Integer, ForeignKey("files.id"), nullable=True),
    Column("duration", Double, nullable=True),
    Column("no_speech", Boolean, nullable=True),
    Column("detected_language", String(16), nullable=True),
    *queue_columns(),
    Index("ix_audio_records_owner", "owner", "id"),
    # Ids are never handed out again after a deletion (revision 0015): links and Locations
    # name one recording for good. PostgreSQL's sequences never reuse one anyway.
    sqlite_autoincrement=True,
)


def _open_records(table: Table) -> ColumnElement[bool]:
    # Claimable rows only: the index stays small however many records are done or halted.
    return and_(table.c.halted_at.is_(None), table.c.stage != "done")


def _begun_records(table: Table) -> ColumnElement[bool]:
    # Records whose work in their stage has begun (never done: an advance clears the mark):
    # few beside the waiting ones.
    return and_(table.c.work_started_at.is_not(None), table.c.halted_at.is_(None))


def _started_steps(table: Table) -> ColumnElement[bool]:
    return table.c.step_started_at.is_not(None)


def queue_indexes(table: Table, sort: Column[Any]) -> None:
    """The engine's partial indexes on a record table, in the claim's order (``sort``, then id).

    ``ix_<table>_claim``: the claim reads it in its own order (P5), filtered to open records;
    ``ix_<table>_begun``: the claim's first part (D19), records already begun in their stage;
    ``ix_<table>_started``: the rescuer's (D18), running steps only, however many records.

    On :data:`metadata`, the ``WHERE`` for PostgreSQL is attached as a schema is made
    (:func:`postgresql_options`); on another metadata (a test's, a benchmark's) at once.
    """
    for name, columns, where in (
        ("claim", (sort, table.c.id), _open_records(table)),
        ("begun", (sort, table.c.id), _begun_records(table)),
        ("started", (table.c.id,), _started_steps(table)),
    ):
        if table.metadata is metadata:
            index = Index(f"ix_{table.name}_{name}", *columns, sqlite_where=where)
            _postgresql_options.append((index, "where", where))
        else:
            Index(f"ix_{table.name}_{name}", *columns, postgresql_where=where, sqlite_where=where)


queue_indexes(audio_records, audio_records.c.created_at)

worker_processes = Table(
    "worker_processes",
    metadata,
    # One row per process that runs workers (conveyor worker, conveyor serve with workers),
    # written at start and every [pipeline] beat_interval; times are the database's (D17), so
    # hosts with skewed clocks still agree on who went silent.
    Column("id", Integer, primary_key=True),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("version", String(50), nullable=False),
    # The name its claims carry in the record tables' claimed_by (None: registered before 0013).
    Column("holder", String(32), nullable=True),
    Column("lanes", JSON, nullable=False),  # lane → worker threads
    Column("busy", JSON, nullable=False),  # lane → threads running a step at the last beat
    Column("holding", JSON, nullable=False),  # [[domain, record id, claim token], …]
    Column("started_at", Double, nullable=False),
    Column("last_seen_at", Double, nullable=False),
    # running, draining (asked to drain), stopped (exited cleanly); "lost" is read, not stored:
    # a running or draining row unseen for [pipeline] lost_after seconds.
    Column("state", String(16), nullable=False),
    Column("drain_requested_at", Double, nullable=True),
    Column("stopped_at", Double, nullable=True),
    Index(None, "last_seen_at"),
)

schema_compat = Table(
    "schema_compat",
    metadata,
    # One row: the oldest code revision that may run against this schema (rolling upgrades;
    # see revision 0008 and docs/operations.md, Upgrades).
    Column("id", Integer, primary_key=True),
    Column("oldest_code", String(32), nullable=False),
)

lane_pauses = Table(
    "lane_pauses",
    metadata,
    # A paused lane: no process claims for it until resumed (running steps finish).
    Column("lane", String(50), primary_key=True),
    Column("paused_at", Double, nullable=False),
    Column("reason", String(300), nullable=True),
)

owner_vocabulary = Table(
    "owner_vocabulary",
    metadata,
    Column("owner", String(100), primary_key=True),
    Column("hints", Text, nullable=False),
    Column("updated_at", Double, nullable=False),
)

texts = Table(
    "texts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column(
        "record_id",
        Integer,
        ForeignKey("audio_records.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("kind", String(32), nullable=False),
    Column("body", Text, nullable=False),
    Column("segments", JSON, nullable=True),
    Column("language", String(16), nullable=True),
    Column("created_at", Double, nullable=False),
    UniqueConstraint("record_id", "kind"),
    CheckConstraint(sql_in("kind", TextKind), name="kind"),
)

# What search reads: one row per record and kind (``title``, ``brief``, ``transcript``,
# ``proofread``), written with the texts (conveyor.audio.search). ``config`` is the text search
# dictionary of the record's language (``simple`` without one). PostgreSQL matches ``tsv``
# (GIN); SQLite matches the FTS5 table ``search_texts_fts`` over ``body`` (made by the
# migration, kept in step by triggers), and ``tsv`` stays empty there.
search_texts = Table(
    "search_texts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column(
        "record_id",
        Integer,
        ForeignKey("audio_records.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("owner", String(100), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("config", String(32), nullable=False),
    Column("body", Text, nullable=False),
    Column("tsv", SearchVector(), nullable=True),
    UniqueConstraint("record_id", "kind"),
    Index("ix_search_texts_owner", "owner", "config"),
)
_postgresql_options.append(
    (Index("ix_search_texts_tsv", search_texts.c.tsv).ddl_if(dialect="postgresql"), "using", "gin")
)

# Everything that changes with the recognition provider lives here (D1, D12).
recognition_attempts = Table(
    "recognition_attempts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column(
        "record_id",
        Integer,
        ForeignKey("audio_records.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("provider", String(50), nullable=False),
    Column("operation_id", String(64), nullable=False, unique=True),
    Column("claim_token", String(32), nullable=False),
    Column("source_url", Text, nullable=True),
    Column("model", String(200), nullable=True),
    Column("raw_response_file_id", Integer, ForeignKey("files.id"), nullable=True),
    Column("state", String(16), nullable=False),
    Column("error", Text, nullable=True),
    Column("created_at", Double, nullable=False),
    Column("finished_at", Double, nullable=True),
    Index("ix_recognition_attempts_record", "record_id", "id"),
)

# History of every record of every domain (D14).
record_events = Table(
    "record_events",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("domain", String(16), nullable=False),
    Column("record_id", Integer, nullable=False),
    Column("stage", String(32), nullable=False),
    Column("outcome", String(32), nullable=False),
    Column("outcome_text", Text, nullable=True),
    Column("origin", String(16), nullable=False),
    Column("created_at", Double, nullable=False),
    CheckConstraint("origin IN ('pipeline', 'human')", name="origin"),
    Index("ix_record_events_record", "domain", "record_id", "id"),
)

# Per-owner topic dictionary, at most five per record (D9).
topics = Table(
    "topics",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("owner", String(100), nullable=False),
    Column("name", String(100), nullable=False),
    UniqueConstraint("owner", "name"),
)

record_topics = Table(
    "record_topics",
    metadata,
    Column(
        "record_id",
        Integer,
        ForeignKey("audio_records.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("position", SmallInteger, primary_key=True),
    Column("topic_id", Integer, ForeignKey("topics.id", ondelete="CASCADE"), nullable=False),
    CheckConstraint("position >= 0 AND position < 5", name="at_most_five"),
    UniqueConstraint("record_id", "topic_id"),
)

albums = Table(
    "albums",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("owner", String(100), nullable=False),
    Column("name", String(200), nullable=False),
    Column("created_at", Double, nullable=False),
    UniqueConstraint("owner", "name"),
    sqlite_autoincrement=True,  # ids never reused (revision 0015)
)

# An album shared with another user: ``viewer`` sees it, ``contributor`` also adds to it.
album_shares = Table(
    "album_shares",
    metadata,
    Column(
        "album_id",
        Integer,
        ForeignKey("albums.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    Column("role", String(16), nullable=False),
    Column("created_at", Double, nullable=False),
    CheckConstraint(sql_in("role", ShareRole), name="role"),
    Index("ix_album_shares_user_id", "user_id"),
)

# A link that shows an album to whoever holds it, no account needed (view only): the token's
# SHA-256 only, as for API tokens. A revoked link's row is deleted; its id never names a later
# link. An expired one stays listed until revoked.
album_links = Table(
    "album_links",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("album_id", Integer, ForeignKey("albums.id", ondelete="CASCADE"), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("label", String(100), nullable=True),
    Column("created_at", Double, nullable=False),
    Column("expires_at", Double, nullable=True),
    Index("ix_album_links_album_id", "album_id"),
    sqlite_autoincrement=True,
)

media_items = Table(
    "media_items",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("owner", String(100), nullable=False),
    Column("album_id", Integer, ForeignKey("albums.id", ondelete="CASCADE"), nullable=False),
    # Room for a longer kind's word (revision 0018; the schema test holds every MediaKind to it).
    Column("kind", String(32), nullable=False),
    Column("original_name", String(300), nullable=True),
    Column("uploaded_at", Double, nullable=False),
    # Pipeline-owned facts from the media itself.
    Column("captured_at", Double, nullable=True),
    Column("width", Integer, nullable=True),
    Column("height", Integer, nullable=True),
    Column("duration", Double, nullable=True),
    # The capture's zone, minutes east of UTC (captured_at is the instant); NULL: unknown.
    Column("captured_offset", SmallInteger, nullable=True),
    # A video whose frames stop short of the duration its header declares.
    Column("incomplete", Boolean, nullable=False, server_default="0"),
    # The content identifier an iPhone writes into both halves of a Live Photo (the still's
    # maker note, the movie's QuickTime metadata): how the two are paired into one item.
    Column("content_id", String(64), nullable=True),
    # Who added it: the owner, or a contributor of the shared album (NULL: written by code
    # older than album sharing, which only owners could do).
    Column("added_by", String(100), nullable=True),
    *queue_columns(),
    CheckConstraint(sql_in("kind", MediaKind), name="kind"),
    Index("ix_media_items_album", "album_id", "id"),
    Index("ix_media_items_content_id", "album_id", "content_id"),
    sqlite_autoincrement=True,  # ids never reused (revision 0015)
)

# Read backwards for "newest first" (M6): uploaded_at DESC, id DESC.
queue_indexes(media_items, media_items.c.uploaded_at)

# An item's objects by role; one row per (item, role) so a retried step replaces (M1-M3).
media_objects = Table(
    "media_objects",
    metadata,
    Column(
        "item_id",
        Integer,
        ForeignKey("media_items.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("role", String(16), primary_key=True),
    Column("file_id", Integer, ForeignKey("files.id"), nullable=False),
    CheckConstraint(sql_in("role", Role), name="role"),
)

# Durable per-album outbox that feeds live subscribers (M5).
album_events = Table(
    "album_events",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("album_id", Integer, ForeignKey("albums.id", ondelete="CASCADE"), nullable=False),
    Column("item_id", Integer, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("payload", JSON, nullable=False),
    Column("created_at", Double, nullable=False),
    Index("ix_album_events_album", "album_id", "id"),
)

# A client's Idempotency-Key on an upload → what the first request with it created, so a retry
# returns that instead of a duplicate. Gone with its record or item.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("owner", String(100), nullable=False),
    Column("scope", String(64), nullable=False),
    Column("key", String(255), nullable=False),
    Column(
        "record_id",
        Integer,
        ForeignKey("audio_records.id", ondelete="CASCADE"),
        nullable=True,
    ),
    Column("item_id", Integer, ForeignKey("media_items.id", ondelete="CASCADE"), nullable=True),
    Column("created_at", Double, nullable=False),
    UniqueConstraint("owner", "scope", "key"),
    CheckConstraint("(record_id IS NULL) <> (item_id IS NULL)", name="one_target"),
)
