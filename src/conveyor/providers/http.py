"""What every remote provider does the same way: credentials, and sorting HTTP outcomes into
"nothing started" (:class:`ProviderBusy`), "maybe started" (:class:`SubmitOutcomeUnknown`) and
"refused" (:class:`ProviderRejected`) for D12.

A submit is a paid POST without an idempotency key, so its retry policy depends on where it
failed (ComfyUI#16204, riffado#269 in the design notes):

* before any byte was sent (DNS, connection refused, connect timeout) → nothing started;
* after sending (read timeout, reset, a malformed answer, a gateway's 502/504) → maybe started;
* 429 and 503 → the provider says it started nothing; wait ``Retry-After``;
* other 5xx → the provider failed the request itself; nothing is billed, retry later;
* 401/403 (credentials), 404 (address or model), 413 (too large), other 4xx → refused.

A poll or a download is a GET: every failure of it is simply "try later".
"""

from __future__ import annotations

import email.utils
import os
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from conveyor.errors import ConfigError
from conveyor.providers.base import ProviderBusy, ProviderRejected, SubmitOutcomeUnknown
from conveyor.providers.halts import ProviderHalt

__all__ = ["classify_submit", "get_or_busy", "read_secret", "retry_after", "scrub"]

_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)
_BODY_QUOTE = 300  # characters of an error body quoted in a halt text


def read_secret(env: str, file: Path | None, *, what: str, required: bool = True) -> str | None:
    """The credential from the file named in the config, else from the environment (D16).

    Args:
        env: the environment variable's name, e.g. ``OPENAI_API_KEY``.
        file: a file holding only the credential (surrounding whitespace is ignored), or None.
        what: what the credential is for, for the error text.
        required: raise when neither gives one.

    Raises:
        ConfigError: the file cannot be read or is empty, or nothing was found and ``required``.
            The text names the variable or the file, never the value.
    """
    if file is not None:
        try:
            value = file.expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"{what}: cannot read the key file {file}: {exc.strerror}") from exc
        if not value:
            raise ConfigError(f"{what}: the key file {file} is empty")
        return value
    value = os.environ.get(env, "").strip()
    if value:
        return value
    if required:
        raise ConfigError(
            f"{what}: no credential; set the environment variable {env} or name a key_file "
            "in the config (credentials are never read from the config itself)"
        )
    return None


def scrub(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``***`` (D16)."""
    if secret:
        text = text.replace(secret, "***")
    return text


def retry_after(response: httpx.Response, *, now: Callable[[], float] = time.time) -> float | None:
    """Seconds from ``Retry-After`` (delta-seconds or an HTTP date), or None when absent/bad."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    # ASCII only: str.isdigit accepts superscripts, which float() then refuses.
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


def _quote(response: httpx.Response, secret: str | None) -> str:
    try:
        body = response.text
    except (UnicodeDecodeError, httpx.ResponseNotRead):
        body = ""
    body = " ".join(body.split())[:_BODY_QUOTE]
    return scrub(f"HTTP {response.status_code}" + (f": {body}" if body else ""), secret)


def classify_submit(
    provider: str, send: Callable[[], httpx.Response], *, secret: str | None
) -> httpx.Response:
    """Run a paid POST and return its 2xx response, or raise what D12 needs to know.

    Raises:
        ProviderBusy: nothing was started; ``retry_after`` set from the response when given.
        SubmitOutcomeUnknown: the request may have started a paid operation.
        ProviderRejected: reasons ``provider_auth`` (401/403), ``provider_config`` (404),
            ``too_large`` (413), ``provider_rejected`` (other 4xx).
    """
    try:
        response = send()
    except _NOT_SENT as exc:
        raise ProviderBusy(f"{provider} is unreachable ({type(exc).__name__}: {exc})") from exc
    except httpx.TransportError as exc:
        raise SubmitOutcomeUnknown(
            scrub(f"{type(exc).__name__} after the request was sent: {exc}", secret)
        ) from exc
    status = response.status_code
    if status < 300:
        return response
    text = _quote(response, secret)
    if status in (429, 503):
        raise ProviderBusy(f"{provider} is busy: {text}", retry_after(response))
    if status in (502, 504):
        raise SubmitOutcomeUnknown(f"a gateway lost the provider's answer: {text}")
    if status >= 500:
        raise ProviderBusy(f"{provider} failed the request: {text}", retry_after(response))
    if status in (401, 403):
        raise ProviderRejected(
            ProviderHalt.PROVIDER_AUTH, f"{text}; check the credential (key_file or its variable)"
        )
    if status == 404:
        raise ProviderRejected(
            ProviderHalt.PROVIDER_CONFIG, f"{text}; check the endpoint URL and the model"
        )
    if status == 413:
        raise ProviderRejected(
            ProviderHalt.TOO_LARGE, f"{text}; the recording is larger than it accepts"
        )
    raise ProviderRejected(ProviderHalt.PROVIDER_REJECTED, text)


def get_or_busy(
    provider: str, send: Callable[[], httpx.Response], *, secret: str | None
) -> httpx.Response:
    """Run a GET (poll, download); transport failures, 429 and 5xx raise :class:`ProviderBusy`.

    Other statuses, 4xx included, are returned for the caller to read.
    """
    try:
        response = send()
    except httpx.TransportError as exc:
        raise ProviderBusy(
            scrub(f"{provider} could not be asked: {type(exc).__name__}: {exc}", secret)
        ) from exc
    if response.status_code == 429 or response.status_code >= 500:
        raise ProviderBusy(f"{provider} answered {_quote(response, secret)}", retry_after(response))
    return response
