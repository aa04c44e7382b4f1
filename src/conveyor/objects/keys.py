"""The object key layout, declared once: every key the project stores under is made here.

::

    uploads/<domain>/<32 hex>           an accepted original, stored before its record exists
    <domain>/<record id>/<name>         what a record's steps produced (claim-unique names)

A domain's layout is ``KeyLayout(<its declaration's name>)``; the sweep, the storage check and
a record's deletion read the same folders (:data:`OBJECT_PREFIXES`, :meth:`KeyLayout.record`).
Nothing else under a ``file:`` root is ever swept (the embedded SQLite database and the local
recognizer's work folder live there too).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

__all__ = ["DOMAIN_ROOTS", "OBJECT_PREFIXES", "UPLOADS", "KeyLayout", "new_key"]

UPLOADS = "uploads"
"""The folder of accepted originals, one subfolder per domain."""

DOMAIN_ROOTS = ("audio", "media")
"""The folders of the domains' generated objects: each domain's declared name."""

OBJECT_PREFIXES = (UPLOADS, *DOMAIN_ROOTS)
"""The folders of the store that hold journalled objects (the sweep's and the check's)."""


def new_key(prefix: str, suffix: str = "") -> str:
    """A fresh unique key under ``prefix``, e.g. ``uploads/audio/<32 hex>``."""
    return f"{prefix}/{uuid.uuid4().hex}{suffix}"


@dataclass(frozen=True)
class KeyLayout:
    """Where one domain's objects are stored.

    Args:
        domain: the domain's declared name (``audio``, ``media``), one of
            :data:`DOMAIN_ROOTS`.

    Raises:
        ValueError: a domain without a folder in :data:`DOMAIN_ROOTS` (its objects would
            never be swept).
    """

    domain: str

    def __post_init__(self) -> None:
        if self.domain not in DOMAIN_ROOTS:
            raise ValueError(f"domain {self.domain!r} has no object folder in DOMAIN_ROOTS")

    def upload(self) -> str:
        """A fresh key for an accepted original: ``uploads/<domain>/<32 hex>``."""
        return new_key(f"{UPLOADS}/{self.domain}")

    def record(self, record_id: int) -> str:
        """The folder of everything a record's steps produced: ``<domain>/<record id>``."""
        return f"{self.domain}/{record_id}"

    def produced(self, record_id: int, name: str) -> str:
        """The key of one produced object: ``<domain>/<record id>/<name>``."""
        return f"{self.record(record_id)}/{name}"
