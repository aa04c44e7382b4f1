"""The words stored in kind and role columns, declared once: schemas, CHECK constraints, the
API's enums and the docs derive from these enums.

A new media kind or role is a member here (and a migration when a CHECK constraint lists it).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["IMAGE_ROLES", "MediaKind", "Role", "ShareRole", "TextKind", "sql_in"]


class MediaKind(StrEnum):
    """``media_items.kind``: what an item of an album is."""

    PHOTO = "photo"
    VIDEO = "video"


class Role(StrEnum):
    """``media_objects.role``: which object of an item (M1)."""

    ORIGINAL = "original"
    THUMB = "thumb"
    MEDIUM = "medium"
    PREVIEW = "preview"
    POSTER = "poster"
    PLAYBACK = "playback"
    # The H.264/AAC web-playable clip of a motion photo (embedded) or a Live Photo (its
    # paired movie), made in the long lane like a video's playback.
    MOTION = "motion"
    # A Live Photo's movie as uploaded (the still is the item's original).
    MOTION_ORIGINAL = "motion_original"


#: The variants made from a photo (or a video's poster frame) in one decode.
IMAGE_ROLES = (Role.THUMB, Role.MEDIUM, Role.PREVIEW)


class ShareRole(StrEnum):
    """``album_shares.role``: what a user an album is shared with may do in it."""

    VIEWER = "viewer"  # see the album, its items and their live events
    CONTRIBUTOR = "contributor"  # also add photos and videos to it


class TextKind(StrEnum):
    """``texts.kind``: which text of a recording."""

    TRANSCRIPT = "transcript"
    PROOFREAD = "proofread"
    HINTS = "hints"


def sql_in(column: str, words: type[StrEnum]) -> str:
    """``column IN ('a', 'b')`` over every member, in declaration order (a CHECK constraint)."""
    return f"{column} IN ({', '.join(repr(m.value) for m in words)})"
