"""Objects: the store (bytes by key) and the object journal (one ``files`` row per object)."""

from conveyor.objects.queries import file_by_id, file_by_key, put_file_row
from conveyor.objects.store import LocalStore, StoredObject

__all__ = ["LocalStore", "StoredObject", "file_by_id", "file_by_key", "put_file_row"]
