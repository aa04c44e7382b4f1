"""The words stored in kind and role columns, declared once: schemas, CHECK constraints, the
API's enums and the docs derive from these enums.

A new media kind or role is a member here (and a migration when a CHECK constraint lists it);
a media kind's member carries its :class:`KindTraits`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "IMAGE_ROLES",
    "SHELL_USER",
    "KindTraits",
    "MediaKind",
    "Role",
    "ShareRole",
    "TextKind",
    "kind_words",
    "sql_in",
]

#: The shell's own user (owner): what a ``conveyor`` command adds without ``--owner`` is theirs.
SHELL_USER = "me"


@dataclass(frozen=True, slots=True)
class KindTraits:
    """What the media steps, the pages and the CLI do differently for a kind of item.

    Attributes:
        noun: what people call one ("photo"), in the pages' and the CLI's sentences.
        plural: what people call several ("photos").
        poster: its pictures (``thumb``, ``medium``, ``preview``) are drawn from a frame of its
            video, kept as its ``poster``; otherwise from the file itself, decoded as an image.
        plays: the file itself plays: every item of the kind is converted for playback in the
            long lane (role ``playback``) and shown as a video. Otherwise only an item that
            moves (a motion photo's clip, a Live Photo's movie) goes there, for its ``motion``.
    """

    noun: str
    plural: str
    poster: bool
    plays: bool


class MediaKind(StrEnum):
    """``media_items.kind``: what an item of an album is.

    Each member's :class:`KindTraits` (in ``_TRAITS`` below) say what is done differently for
    it; code asks the kind (``kind.plays``), it does not compare its word. A new kind is a
    member and its traits here, how intake tells it (``media.intake.probe_upload``) and a
    revision that widens the CHECK constraint (on SQLite the table is rebuilt with foreign keys
    off, as revision 0018 rebuilds it: Alembic's batch mode would delete every role row).
    """

    PHOTO = "photo"
    VIDEO = "video"

    @property
    def traits(self) -> KindTraits:
        """What is done differently for this kind."""
        return _TRAITS[self]

    @property
    def noun(self) -> str:
        """What people call one: ``photo``."""
        return _TRAITS[self].noun

    @property
    def plural(self) -> str:
        """What people call several: ``photos``."""
        return _TRAITS[self].plural

    @property
    def poster(self) -> bool:
        """Its pictures are drawn from a frame of its video (see :class:`KindTraits`)."""
        return _TRAITS[self].poster

    @property
    def plays(self) -> bool:
        """Every item of the kind is converted for playback (see :class:`KindTraits`)."""
        return _TRAITS[self].plays


_TRAITS = {
    MediaKind.PHOTO: KindTraits("photo", "photos", poster=False, plays=False),
    MediaKind.VIDEO: KindTraits("video", "videos", poster=True, plays=True),
}
if set(_TRAITS) != set(MediaKind):  # a member without traits fails at import, not mid-step
    raise RuntimeError(f"media kinds without traits: {set(MediaKind) - set(_TRAITS)}")


def kind_words(kinds: Iterable[str]) -> str:
    """How many of each kind, for people: ``2 photos and 1 video`` (kinds in declaration order,
    those with none left out; ``nothing`` when empty). ``kinds`` are ``media_items.kind`` words.
    """
    counts = Counter(MediaKind(k) for k in kinds)
    parts = [
        f"{counts[k]} {k.noun if counts[k] == 1 else k.plural}" for k in MediaKind if counts[k]
    ]
    if not parts:
        return "nothing"
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


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
