"""The audio domain's stages: a voice recording goes in, a transcript comes out.

Stages (declared once in :data:`AUDIO`, D11)::

    uploaded ─normalize─▶ normalized ─submit─▶ submitted ─collect─▶ transcribed ─finish─▶ done
     (own)                 (own)               (foreign)             (own)

Who moves a record in and out:

* intake (CLI ``ingest``, HTTP upload) creates it at ``uploaded``;
* ``normalize`` and ``finish`` (:mod:`conveyor.audio.steps`), ``submit`` and ``collect``
  (:mod:`conveyor.audio.recognition`) move it on.

The pipeline writes only the fields listed in ``OWNED_FIELDS``; owner, title, brief and topics
are the owner's (P7). Nothing here contacts the sender (P11).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conveyor.audio.halts import AudioHalt
from conveyor.db.tables import audio_records
from conveyor.objects.keys import KeyLayout
from conveyor.objects.outage import STORAGE
from conveyor.pipeline import Declaration, Domain, Lane, Stage
from conveyor.providers.halts import ProviderHalt

if TYPE_CHECKING:
    # Only for the type: the declaration is read without loading the steps (PyAV, providers).
    from conveyor.audio.steps import AudioSteps

__all__ = ["AUDIO", "AUDIO_KEYS", "AUDIO_LANE", "OWNED_FIELDS", "build_audio_domain"]

AUDIO_LANE = "audio"
OWNED_FIELDS = frozenset({"normalized_file_id", "duration", "no_speech", "detected_language"})

AUDIO = Declaration(
    name="audio",
    table=audio_records,
    stages=[
        Stage(
            "uploaded",
            lane=AUDIO_LANE,
            work="own",
            lease=120,
            heartbeat=True,
            words="Uploaded; waiting to be prepared",
            advanced_words="prepared for speech recognition",
        ),
        Stage(
            "normalized",
            lane=AUDIO_LANE,
            work="own",
            lease=120,
            words="Prepared; waiting for speech recognition",
            advanced_words="sent to speech recognition",
        ),
        Stage(
            "submitted",
            lane=AUDIO_LANE,
            work="foreign",
            lease=120,
            words="Speech recognition is running",
            advanced_words="speech recognised",
            postponed_words="still being recognised",
        ),
        Stage(
            "transcribed",
            lane=AUDIO_LANE,
            work="own",
            lease=120,
            words="Recognised; the transcript is being written",
            advanced_words="transcript written",
        ),
        Stage("done", words="Done"),
    ],
    lanes=[Lane(AUDIO_LANE, lambda s: s.pipeline.workers)],
    halts=(AudioHalt, ProviderHalt),
    outages=(STORAGE,),
    order_by=[audio_records.c.created_at],
    owned_fields=OWNED_FIELDS,
)
"""The audio domain, declared once (D11): stages, lanes, leases, own vs foreign work (D3)."""

AUDIO_KEYS = KeyLayout(AUDIO.name)
"""Where the records' originals and generated objects are stored."""


def build_audio_domain(steps: AudioSteps) -> Domain:
    """The audio domain with its steps bound (start-up fails if one is missing)."""
    return AUDIO.bind(
        {
            "uploaded": steps.normalize,
            "normalized": steps.submit,
            "submitted": steps.collect,
            "transcribed": steps.finish,
        },
        discard=steps.discard,
    )
