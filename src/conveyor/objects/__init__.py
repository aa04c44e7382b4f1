"""Objects: the store (bytes by key) and the object journal (one ``files`` row per object)."""

from conveyor.objects.queries import delete_file_rows, file_by_id, file_by_key, put_file_row
from conveyor.objects.store import ListedObject, LocalStore, StoredObject
from conveyor.objects.sweep import Sweeper, SweepReport, discard_unjournaled, sweep_orphans

__all__ = [
    "ListedObject",
    "LocalStore",
    "StoredObject",
    "SweepReport",
    "Sweeper",
    "delete_file_rows",
    "discard_unjournaled",
    "file_by_id",
    "file_by_key",
    "put_file_row",
    "sweep_orphans",
]
