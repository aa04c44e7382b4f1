"""Object store outages, told once (as database outages are, :mod:`conveyor.db.outage`): the
bucket's endpoint refusing or dropping connections, timing out or answering 5xx; a local folder
on a mount that went away, or on a disk that is full (told as full, not as unreachable).

The API answers such failures with 503 ``storage_unavailable`` and ``Retry-After`` (507
``storage_full`` for a full disk), and ``/healthz`` reports the store beside the database.
"""

from __future__ import annotations

import errno
import logging

from conveyor.db.outage import Outage

__all__ = ["STORAGE", "is_storage_full", "is_storage_outage"]

#: errno values of a local folder that cannot be used right now (a lost network mount, a full
#: or read-only disk), as opposed to a missing object or a bad key.
_LOCAL_OUTAGE = frozenset(
    {errno.EIO, errno.ENOTCONN, errno.ESTALE, errno.ETIMEDOUT, errno.EHOSTDOWN, errno.ENOSPC}
    | {errno.EDQUOT, errno.EROFS, errno.EHOSTUNREACH, errno.ECONNREFUSED}
)
#: S3 error codes that say "try again later" rather than "this request is wrong".
_RETRYABLE_CODES = frozenset(
    {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "503", "500"}
)


def is_storage_outage(exc: BaseException) -> bool:
    """True when ``exc`` (or what it was raised from) says the object store cannot be reached
    or used right now: a connection refused, dropped or timed out, a 5xx or ``SlowDown`` answer,
    an I/O error of the folder (``EIO``, ``ESTALE``, ``ENOSPC``, ...). A missing object, a
    refused credential or a bad key is not an outage."""
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

    from conveyor.objects.store import StorageUnavailable

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, StorageUnavailable | ConnectionError | HTTPClientError):
            return True
        if isinstance(current, ClientError):
            error = current.response.get("Error", {})
            status = current.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            return status >= 500 or str(error.get("Code", "")) in _RETRYABLE_CODES
        if isinstance(current, OSError) and current.errno in _LOCAL_OUTAGE:
            return True
        current = current.__cause__ or current.__context__
    return False


def is_storage_full(exc: BaseException) -> bool:
    """True when ``exc`` says the store has no room (a full disk or quota,
    :class:`~conveyor.objects.store.StorageFull`), as opposed to not answering."""
    from conveyor.objects.store import full_storage

    full = full_storage(exc)
    return full is not None and full.no_room


#: The process's one outage state for its object store.
STORAGE = Outage(
    "storage", is_storage_outage, logging.getLogger("conveyor.objects"), is_full=is_storage_full
)
