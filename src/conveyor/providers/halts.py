"""Why a recognition provider's answer halts a recording (``docs/providers.md``).

A provider raises :class:`~conveyor.providers.base.ProviderRejected` or reports a
:class:`~conveyor.providers.base.PollResult` with one of these; the audio domain halts with it.
"""

from __future__ import annotations

from conveyor.halts import Guide, HaltReason

__all__ = ["ProviderHalt"]


class ProviderHalt(HaltReason):
    """The recognition providers' halt reasons; every one is transient (resume helps)."""

    PROVIDER_AUTH = (
        "provider_auth",
        Guide(
            meaning="the provider refused the credential (401/403: wrong, expired, or missing "
            "a role)",
            resume_helps=True,
            action="fix the key (`key_file` or the variable `key_env` names), then resume",
            words="The speech recognition service refused our credentials; an operator needs "
            "to fix them.",
        ),
    )
    PROVIDER_CONFIG = (
        "provider_config",
        Guide(
            meaning="the provider answered 404: a wrong endpoint or model name",
            resume_helps=True,
            action="fix `base_url` / `endpoint` / `model` of the provider's section, then resume",
            words="The speech recognition service is set up wrongly; an operator needs to fix it.",
        ),
    )
    TOO_LARGE = (
        "too_large",
        Guide(
            meaning="the provider refused the request as too large (413)",
            resume_helps=True,
            action="lower the provider's `max_request_bytes` or `bitrate`, then resume",
            words="The recording is larger than the speech recognition service accepts.",
        ),
    )
    PROVIDER_REJECTED = (
        "provider_rejected",
        Guide(
            meaning="the provider refused the request or reported an error for it",
            resume_helps=True,
            action="read the provider's answer quoted in the halt text; resume once the cause "
            "is fixed",
            words="The speech recognition service refused the recording.",
        ),
    )
    UNSUPPORTED_LANGUAGE = (
        "unsupported_language",
        Guide(
            meaning="the record's language is one the provider does not recognise",
            resume_helps=True,
            action="choose another `[transcription] provider` (or upload again without a "
            "language), then resume",
            words="The speech recognition service does not know the recording's language.",
        ),
    )
    PROVIDER_ERROR = (
        "provider_error",
        Guide(
            meaning="the provider's operation ended with an error",
            resume_helps=True,
            action="read the error in the halt text; resume submits again (billed again)",
            words="Speech recognition ended with an error.",
        ),
    )
    RESULT_EXPIRED = (
        "result_expired",
        Guide(
            meaning="the provider no longer keeps the result (SpeechKit keeps them 3 days)",
            resume_helps=True,
            action="resume submits again",
            words="The speech recognition service no longer keeps the transcript; it can be "
            "sent again.",
        ),
    )
