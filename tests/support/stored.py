"""Reading the object store in tests the way the code does: by key, never by path."""

from __future__ import annotations

from conveyor.objects import ObjectStore

__all__ = ["object_keys", "stored_bytes"]


def stored_bytes(store: ObjectStore, key: str) -> bytes:
    """The whole object under ``key``."""
    with store.open(key) as body:
        return body.read()


def object_keys(store: ObjectStore, prefix: str = "") -> list[str]:
    """Every object key under ``prefix``, sorted."""
    return sorted(o.key for o in store.list(prefix))
