"""The object store backends, one module per ``[storage] url`` scheme (``file``, ``s3``).

Each module implements :class:`conveyor.objects.store.ObjectStore` and offers
``from_settings(settings: StorageSettings, work: WorkFolder) -> ObjectStore`` and
``SETTINGS_HINT``, the sentence telling a person which settings to fix when the store cannot be
used;
:func:`conveyor.objects.factory.open_store` picks the module the URL's scheme names, so a new
backend is one module here (and its row in ``docs/architecture.md``). A backend is imported only
when its scheme is used (boto3 for ``s3``).
"""
