"""Why a photo or video halts (``docs/troubleshooting.md``)."""

from __future__ import annotations

from conveyor.halts import Guide, HaltReason

__all__ = ["MediaHalt"]


class MediaHalt(HaltReason):
    """The media domain's halt reasons."""

    # Content halts: the file itself is the problem.
    UNDECODABLE = (
        "undecodable",
        Guide(
            meaning="the file is damaged or truncated, or its codec cannot be decoded",
            resume_helps=False,
            action="repair or re-export the file and add it again",
            words="The file could not be read: it may be damaged, or in a format we cannot open.",
        ),
    )
    UNSUPPORTED_MEDIA = (
        "unsupported_media",
        Guide(
            meaning="a format we do not process (e.g. HEIC without a decoder installed, an "
            "unusual pixel format)",
            resume_helps=False,
            action="convert it to JPEG, PNG, WebP or MP4 and add it again",
            words="This kind of file is not supported.",
        ),
    )
    NOT_VIDEO = (
        "not_video",
        Guide(
            meaning="a file that looked like a video has no video track (or holds a single image)",
            resume_helps=False,
            action="add it as a photo, or transcribe its sound with `conveyor records add`",
            words="The file is not a video we can play.",
        ),
    )
    TOO_MANY_PIXELS = (
        "too_many_pixels",
        Guide(
            meaning="the image declares more than `[media] max_pixels` pixels (the guard "
            "against decompression bombs)",
            resume_helps=False,
            action="scale the image down and add it again; or raise `[media] max_pixels`, "
            "restart the workers, and resume",
            words="The picture is too large to process; scale it down and add it again.",
        ),
    )
    # Transient: the item can go on once the cause is fixed.
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
