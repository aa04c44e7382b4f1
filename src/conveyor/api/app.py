"""The HTTP service: :func:`create_app` builds the FastAPI app around one :class:`Runtime`.

One process can serve the API and run the worker pool (``conveyor serve``, the embedded
default), or serve the API only beside ``conveyor worker`` processes (``--no-workers``). The
pool starts with the app's lifespan and stops with it (running steps finish or are released).

Routes (all ``/api`` routes need ``Authorization: Bearer <token>``)::

    GET   /healthz                       database reachable (open, for probes)
    GET   /metrics                       Prometheus text (open, for scrapers)
    POST  /api/records                   upload a recording          201 400 401 413 415 422
    GET   /api/records                   list, cursor, stage/halted  200 400 401 422
    GET   /api/records/{id}              the card                    200 401 404
    PATCH /api/records/{id}              title, brief (P7)           200 400 401 404 413 422
    GET   /api/records/{id}/text         ?format=text|json|srt|vtt   200 401 404
    GET   /api/records/{id}/events       history (D14)               200 401 404
    GET   /api/records/{id}/original     the upload (Range)          200 206 304 401 404 416
    POST  /api/records/{id}/resume       resume a halted record      200 401 404 409
    PUT   /api/records/{id}/proofread    the owner's correction (D1) 200 400 401 404 409 422
    DELETE /api/records/{id}/proofread   drop the correction         204 401 404
    GET   /api/records/{id}/topics       topics (D9)                 200 401 404
    PUT   /api/records/{id}/topics       up to five topics           200 400 401 404 422
    GET   /api/topics                    the owner's dictionary      200 401
    POST  /api/albums                    create                      201 400 401 409 413 422
    GET   /api/albums                    list                        200 401
    GET   /api/albums/{id}               album + items + roles URLs  200 401 404
    POST  /api/albums/{id}/items         upload photo/video          201 400 401 404 413 415 422
    GET   /api/albums/{id}/events        Server-Sent Events (M5)     200 401 404
    GET   /api/items/{id}                an item                     200 401 404
    POST  /api/items/{id}/resume         resume a halted item        200 401 404 409
    GET   /api/files/{key}               an object (ETag, Range)     200 206 304 401 404 416
    POST  /v1/audio/transcriptions       OpenAI's route: transcribe  200 400 401 413 415 422 502 504
    GET   /v1/models                     OpenAI's route: models      200 401
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from starlette.responses import Response

from conveyor import __version__
from conveyor.api import (
    routes_admin,
    routes_albums,
    routes_files,
    routes_openai,
    routes_records,
    routes_shares,
    routes_texts,
    routes_vocabulary,
)
from conveyor.api.auth import AuthMiddleware
from conveyor.api.errors import RETRY_AFTER_OUTAGE, error_response, install_error_handlers
from conveyor.api.limits import BodyLimitMiddleware
from conveyor.api.live import TOKEN_CHECK, LiveHub
from conveyor.api.metrics import MetricsMiddleware
from conveyor.api.queries import ping
from conveyor.api.schemas import ErrorBody, Health, TextJson
from conveyor.api.security import SecurityHeadersMiddleware
from conveyor.api.state import ApiState, State
from conveyor.audio.recognizer_sweep import JobFolderSweeper
from conveyor.db import outage
from conveyor.db.album_signals import AlbumSignals
from conveyor.error_codes import ErrorCode
from conveyor.media.broadcast import AlbumBroadcast
from conveyor.objects import Sweeper
from conveyor.objects.outage import STORAGE
from conveyor.objects.store import CHUNK, StorageFull
from conveyor.pipeline import WorkerPool
from conveyor.pipeline.metrics import BACKLOG
from conveyor.processes import ProcessRegistry
from conveyor.runtime import Runtime

__all__ = ["FULL_BELOW", "create_app"]

#: A folder store with less room than this (bytes: one write chunk) is full to ``/healthz``:
#: no upload would fit.
FULL_BELOW = CHUNK

log = logging.getLogger("conveyor.api")

_DESCRIPTION = """\
Conveyor's HTTP API: upload recordings and read their cards and texts; upload photos and
videos into albums and watch them become ready.

Every `/api` route needs `Authorization: Bearer <token>` (`conveyor tokens create USER`).
Another owner's record, album, item or file answers 404, as one that does not exist.
Errors share one shape: `{"error": {"status", "code", "message"}}`.
"""


_ERROR_REF = "#/components/schemas/ErrorBody"
_EXTRA_MODELS = (TextJson,)
_UNAVAILABLE: dict[str, Any] = {
    "description": (
        "The database or the storage does not answer (`database_unavailable`, "
        "`storage_unavailable`; `Retry-After`)."
    ),
    "headers": {"Retry-After": {"schema": {"type": "integer"}}},
    "content": {"application/json": {"schema": {"$ref": _ERROR_REF}}},
}
_FASTAPI_422 = ("HTTPValidationError", "ValidationError")


def _document_one_error_shape(app: FastAPI) -> None:
    """Make ``/openapi.json`` say what the handlers send: every 422 is an ``ErrorBody``.

    FastAPI documents its own ``HTTPValidationError`` for every route with parameters, but
    :func:`~conveyor.api.errors.install_error_handlers` answers validation errors in the one
    error shape; the generated schema is corrected once, when first asked for.
    """
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = generate()
            for item in spec.get("paths", {}).values():
                for operation in item.values():
                    for response in operation.get("responses", {}).values():
                        for media in response.get("content", {}).values():
                            ref = media.get("schema", {}).get("$ref", "")
                            if ref.rsplit("/", 1)[-1] in _FASTAPI_422:
                                media["schema"] = {"$ref": _ERROR_REF}
            schemas = spec.setdefault("components", {}).setdefault("schemas", {})
            for name in _FASTAPI_422:
                schemas.pop(name, None)
            # Models named only in hand-written responses (the text route's JSON).
            for model in _EXTRA_MODELS:
                extra = model.model_json_schema(ref_template="#/components/schemas/{model}")
                schemas.update(extra.pop("$defs", {}))
                schemas[model.__name__] = extra
            for path, item in spec.get("paths", {}).items():
                if not path.startswith("/api"):
                    continue
                for operation in item.values():
                    responses = operation.setdefault("responses", {})
                    # Any /api route answers 503 while the database is down.
                    responses.setdefault("503", _UNAVAILABLE)
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def create_app(runtime: Runtime, *, run_workers: bool = True) -> FastAPI:
    """The FastAPI app over ``runtime`` (schema already migrated by the caller).

    Args:
        runtime: engine, store, notifier, domains and settings of this process.
        run_workers: start the worker pool with the app (the embedded default); False for an
            API-only process beside ``conveyor worker`` processes.
    """
    broadcast = AlbumBroadcast(runtime.engine, runtime.notifier)
    signals = AlbumSignals(runtime.engine)
    closing = threading.Event()
    live = LiveHub(
        broadcast,
        runtime.notifier,
        signals,
        runtime.engine,
        closing=closing,
        streams_per_token=runtime.settings.api.streams_per_token,
        # At least every heartbeat, at most every 5 s: one query for all open streams.
        token_check=min(runtime.settings.api.sse_heartbeat, TOKEN_CHECK),
    )
    state = ApiState(
        runtime=runtime,
        run_workers=run_workers,
        broadcast=broadcast,
        live=live,
        signals=signals,
        closing=closing,
    )
    # Backlog by domain and stage in /metrics (D3), also in an API-only process.
    BACKLOG.watch(runtime.engine, runtime.domains(), runtime.clock)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        signals.start()
        pool: WorkerPool | None = None
        sweeper: Sweeper | None = None
        job_sweeper: JobFolderSweeper | None = None
        registry: ProcessRegistry | None = None
        if run_workers:
            pool = runtime.pool()
            registry = runtime.registry(pool)  # a drain stops its claims; the API serves on
            registry.start()
            pool.start()
            sweeper = runtime.sweeper()
            sweeper.start()
            job_sweeper = runtime.job_sweeper()
            job_sweeper.start()
        try:
            yield
        finally:
            state.closing.set()
            signals.close()
            if job_sweeper is not None:
                job_sweeper.stop()
            if sweeper is not None:
                sweeper.stop()
            if pool is not None:
                await anyio.to_thread.run_sync(pool.stop)
            if registry is not None:
                await anyio.to_thread.run_sync(registry.stop)

    # The schema's pages (/docs, /redoc) with Swagger UI and ReDoc served from the package
    # itself: a self-hosted service may have no way to the CDN FastAPI's pages load them from.
    app = FastAPIOffline(
        static_url="/docs-assets",
        title="Conveyor",
        version=__version__,
        description=_DESCRIPTION,
        lifespan=lifespan,
        # Starlette's trailing-slash redirect builds its Location from the Host header (and
        # `//host/` paths make it point off-site). No redirect is ever built from a request:
        # a path with a trailing slash is simply no route (404).
        redirect_slashes=False,
    )
    app.state.conveyor = state
    _document_one_error_shape(app)
    install_error_handlers(app)
    # Outermost last: headers on every answer → metrics → authentication → body limit → routes.
    app.add_middleware(BodyLimitMiddleware)
    app.add_middleware(AuthMiddleware)  # before any body is read, even the limit's count
    app.add_middleware(MetricsMiddleware)
    app.add_middleware(SecurityHeadersMiddleware)
    app.include_router(routes_records.router)
    app.include_router(routes_texts.router)
    app.include_router(routes_vocabulary.router)
    app.include_router(routes_albums.router)
    app.include_router(routes_shares.router)
    app.include_router(routes_files.router)
    app.include_router(routes_admin.router)
    app.include_router(routes_openai.router)

    @app.get(
        "/healthz",
        response_model=Health,
        tags=["operations"],
        summary="Liveness, database and storage reachability",
        responses={
            503: {"model": ErrorBody, "description": "The database or the storage does not answer."}
        },
    )
    def healthz(state: State) -> Response:
        """200 when the database answers a query and the object store a listing (a bucket) or
        a write check (a folder) and, a folder, has at least :data:`FULL_BELOW` bytes free; 503
        ``unavailable`` otherwise, the message naming which (``the storage is full: ...``). No
        token needed."""
        try:
            with state.runtime.engine.connect() as conn:
                ping(conn)
        except Exception as exc:
            if not outage.DATABASE.failed(exc, "health check"):
                log.warning("health check: database unreachable: %s", exc)
            return error_response(
                ErrorCode.UNAVAILABLE,
                "the database does not answer",
                headers={"Retry-After": str(RETRY_AFTER_OUTAGE)},
            )
        outage.DATABASE.succeeded()
        store = state.runtime.store
        try:
            store.check()
            room = store.room()
        except OSError as exc:
            if not STORAGE.failed(exc, "health check"):
                log.warning("health check: storage cannot be used: %s", exc)
            return error_response(
                ErrorCode.UNAVAILABLE,
                "the storage does not answer",
                headers={"Retry-After": str(RETRY_AFTER_OUTAGE)},
            )
        if room is not None and room < FULL_BELOW:
            # Answering, but no upload fits: not healthy for a node that takes uploads, and
            # part of the outage (its end is not logged while the disk stays full).
            STORAGE.failed(
                StorageFull(errno.ENOSPC, "folder", store.describe_location()), "health check"
            )
            return error_response(
                ErrorCode.UNAVAILABLE,
                "the storage is full: it has no space left for uploads",
                headers={"Retry-After": str(RETRY_AFTER_OUTAGE)},
            )
        STORAGE.succeeded()
        body = Health(status="ok", database="ok", storage="ok", workers=state.run_workers)
        return JSONResponse(body.model_dump())

    @app.get(
        "/metrics",
        tags=["operations"],
        summary="Prometheus metrics",
        response_class=Response,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    def metrics() -> Response:
        """Step outcomes by domain and stage (D13), backlog by domain and stage (D3), HTTP
        requests by route. No token needed."""
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    return app
