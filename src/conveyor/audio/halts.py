"""Why a recording halts: its content, its stored original, or its recognition.

The providers' own refusals are :class:`conveyor.providers.halts.ProviderHalt`; the engine's
(``stuck`` ...) are :class:`conveyor.pipeline.halts.EngineHalt`.
"""

from __future__ import annotations

from conveyor.halts import Guide, HaltReason

__all__ = ["AudioHalt"]


class AudioHalt(HaltReason):
    """The audio domain's halt reasons (``docs/troubleshooting.md``)."""

    # Content halts: the file itself is the problem.
    NOT_AUDIO = (
        "not_audio",
        Guide(
            meaning="the file is not in an audio or video format we can read (a photo, a "
            "document, text)",
            resume_helps=False,
            action="upload an audio or video file instead; headerless 16 kHz mono 16-bit PCM "
            "goes in again with `conveyor records add --raw-pcm` (HTTP: raw_pcm=true); a photo "
            "goes to `conveyor media add`",
            words="The file holds no sound we can transcribe.",
        ),
    )
    UNDECODABLE = (
        "undecodable",
        Guide(
            meaning="the file is damaged or truncated, or its codec cannot be decoded",
            resume_helps=False,
            action="repair or re-export the file (e.g. `ffmpeg -i in -c copy out`) and upload "
            "it again; headerless PCM goes in with `--raw-pcm`",
            words="The file could not be read: it may be damaged, or in a format we cannot open.",
        ),
    )
    NO_AUDIO = (
        "no_audio",
        Guide(
            meaning="the file (usually a video) has no audio track",
            resume_helps=False,
            action="upload a file that has sound; for the picture use `conveyor media add`",
            words="The file has no sound track.",
        ),
    )
    EMPTY_AUDIO = (
        "empty_audio",
        Guide(
            meaning="the file decodes to no audio samples (0 s), e.g. a cut-off upload or a few "
            "stray bytes",
            resume_helps=False,
            action="upload the complete recording again; if it is headerless PCM, check it "
            "really is 16 kHz mono 16-bit little-endian",
            words="The recording is empty: it is too short to hold any speech.",
        ),
    )
    BAD_SAMPLE_RATE = (
        "bad_sample_rate",
        Guide(
            meaning="the file declares a sample rate outside 8000-192000 Hz",
            resume_helps=False,
            action="re-export it at a common rate (16000, 44100 or 48000 Hz) and upload it again",
            words="The recording declares a sample rate we cannot use; export it again at a "
            "common rate.",
        ),
    )
    # Transient halts: the record can go on once the cause is fixed.
    ORIGINAL_MISSING = (
        "original_missing",
        Guide(
            meaning="the stored original is gone from storage (deleted, or `[storage] root` / "
            "`[storage] url` now points elsewhere)",
            resume_helps=True,
            action="point `[storage] root` (or `url`) at the folder or bucket it was uploaded "
            "to, or restore the object from a backup, then resume; otherwise upload it again",
            words="The uploaded file is missing from storage.",
        ),
    )
    # Recognition halts that the step decides (see docs/providers.md).
    SUBMIT_UNKNOWN = (
        "submit_unknown",
        Guide(
            meaning="the submit to the provider may have started a paid operation, but no "
            "answer came back",
            resume_helps=True,
            action="check the provider's console or bill for an operation at that time; resume "
            "submits again (it may be billed twice)",
            words="The speech recognition service did not confirm it received the recording; "
            "an operator decides whether to send it again.",
        ),
    )
    PROVIDER_NO_RESULT = (
        "provider_no_result",
        Guide(
            meaning="the provider's operation finished without a result or an error (often: no "
            "speech it could hear)",
            resume_helps=True,
            action="resume submits again; if it repeats, listen to the recording",
            words="Speech recognition finished without a transcript; there may be no speech it "
            "could hear.",
        ),
    )
    PROVIDER_TIMEOUT = (
        "provider_timeout",
        Guide(
            meaning="the provider's operation ran past its deadline; Conveyor asked the "
            "provider to cancel it",
            resume_helps=True,
            action="resume: if it was cancelled, the recording is submitted again (billed "
            "again); if the cancel was refused, Conveyor keeps waiting for the same operation",
            words="Speech recognition took too long, so it was stopped.",
        ),
    )
    UNREADABLE_RESPONSE = (
        "unreadable_response",
        Guide(
            meaning="the provider's stored answer cannot be parsed",
            resume_helps=True,
            action="the answer is kept: after upgrading to a version that reads it, resume "
            "parses it again without a new request",
            words="The speech recognition service answered in a form we cannot read yet; the "
            "answer is kept.",
        ),
    )
