"""Objects: the store (bytes by key, :class:`ObjectStore`) and the object journal (one
``files`` row per object)."""

from conveyor.objects.factory import open_store, settings_hint, work_folder
from conveyor.objects.keys import KeyLayout, new_key
from conveyor.objects.outage import STORAGE, is_storage_outage
from conveyor.objects.queries import (
    delete_file_rows,
    file_by_id,
    file_by_key,
    lock_content,
    put_file_row,
    put_file_rows,
)
from conveyor.objects.store import (
    ListedObject,
    ObjectMismatch,
    ObjectStore,
    Readable,
    StorageFull,
    StorageUnavailable,
    StoredObject,
    check_key,
    full_storage,
)
from conveyor.objects.stores.file import LocalStore
from conveyor.objects.sweep import Sweeper, SweepReport, discard_unjournaled, sweep_orphans
from conveyor.objects.work import WorkFolder

__all__ = [
    "STORAGE",
    "KeyLayout",
    "ListedObject",
    "LocalStore",
    "ObjectMismatch",
    "ObjectStore",
    "Readable",
    "StorageFull",
    "StorageUnavailable",
    "StoredObject",
    "SweepReport",
    "Sweeper",
    "WorkFolder",
    "check_key",
    "delete_file_rows",
    "discard_unjournaled",
    "file_by_id",
    "file_by_key",
    "full_storage",
    "is_storage_outage",
    "lock_content",
    "new_key",
    "open_store",
    "put_file_row",
    "put_file_rows",
    "settings_hint",
    "sweep_orphans",
    "work_folder",
]
