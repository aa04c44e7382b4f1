"""The media domain's stages: a photo or video goes in, its variants come out.

Stages (declared once in :data:`MEDIA`, D11)::

    uploaded ─variants─▶ transcoding ─playback─▶ done
     (short lane)         (long lane)

The steps are :class:`conveyor.media.domain.MediaSteps`; this module is the declaration alone,
read without loading them (intake, the API's schemas, the CLI).
"""

from __future__ import annotations

from conveyor.db.tables import media_items
from conveyor.media.halts import MediaHalt
from conveyor.objects.keys import KeyLayout
from conveyor.objects.outage import STORAGE
from conveyor.pipeline import Declaration, Lane, Stage

__all__ = [
    "LONG_LANE",
    "LONG_LEASE",
    "MEDIA",
    "MEDIA_KEYS",
    "OWNED_FIELDS",
    "SHORT_LANE",
    "SHORT_LEASE",
]

SHORT_LANE = "short"
LONG_LANE = "long"
OWNED_FIELDS = frozenset(
    {"captured_at", "captured_offset", "width", "height", "duration", "incomplete"}
)

# A transcode holds its claim by heartbeat (every lease / 3), so the lease only bounds how long
# a killed worker's item waits before another worker takes it over: keep it short.
LONG_LEASE = 15.0
# Image work is seconds; the heartbeat covers a huge poster seek or HDR tone map.
SHORT_LEASE = 60.0

MEDIA = Declaration(
    name="media",
    noun="item",
    table=media_items,
    stages=[
        Stage(
            "uploaded",
            lane=SHORT_LANE,
            work="own",
            lease=SHORT_LEASE,
            heartbeat=True,
            words="Uploaded; thumbnails are being made",
        ),
        Stage(
            "transcoding",
            lane=LONG_LANE,
            work="own",
            lease=LONG_LEASE,
            heartbeat=True,
            words="Thumbnails ready; the video is being converted for playback",
        ),
        Stage("done", words="Ready"),
    ],
    lanes=[
        Lane(SHORT_LANE, lambda s: s.media.short_workers),
        Lane(LONG_LANE, lambda s: s.media.long_workers),
    ],
    halts=(MediaHalt,),
    outages=(STORAGE,),
    # Newest upload first, then the newer id among equal upload times (M6); the id here is
    # the engine's tie-break too (P5).
    order_by=[media_items.c.uploaded_at.desc(), media_items.c.id.desc()],
    owned_fields=OWNED_FIELDS,
)
"""The photo/video domain, declared once (D11): image work short, playback long (M7, M8)."""

MEDIA_KEYS = KeyLayout(MEDIA.name)
"""Where the items' originals and generated objects are stored."""
