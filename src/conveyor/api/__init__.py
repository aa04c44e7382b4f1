"""The HTTP service: FastAPI routes over one :class:`~conveyor.runtime.Runtime`.

Modules: ``app`` (create_app, health, metrics), ``auth`` (bearer tokens → owner), ``errors``
(one JSON error shape), ``schemas`` (pydantic bodies for a precise OpenAPI), ``uploads``
(streamed multipart/raw bodies), ``objects`` (ETag, 304, byte ranges), ``sse`` (album events
from the outbox), ``routes_records``, ``routes_albums``, ``routes_files``, ``server`` (uvicorn).
"""

from conveyor.api.app import create_app

__all__ = ["create_app"]
