"""Wiring: build the engine, store, notifier, domains and worker pool from one Settings.

Entry points (CLI, HTTP app) make one :class:`Runtime`; everything below receives what it needs
from it (config passed down, never read from a global).

What only running work needs (the worker pool, the process registry, providers, sweepers, the
steps with PyAV and pyvips) is imported by the method that builds it, so a command that reads
the database (``conveyor records list``) loads none of it.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from conveyor.audio.stages import AUDIO
from conveyor.clock import Clock, SystemClock
from conveyor.config import Settings
from conveyor.errors import ConfigError
from conveyor.halts import HaltReason
from conveyor.media.stages import MEDIA
from conveyor.pipeline.stages import Declaration

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from conveyor.audio.recognizer_sweep import JobFolderSweeper
    from conveyor.db.notify import Notifier
    from conveyor.objects import ObjectStore, Sweeper
    from conveyor.pipeline import Domain, Outcome, StepContext, WorkerPool
    from conveyor.processes import ProcessRegistry
    from conveyor.providers.base import RecognitionProvider
    from conveyor.providers.registry import ProviderBackend

__all__ = ["DECLARATIONS", "Runtime", "default_model_cache"]

DECLARATIONS: tuple[Declaration, ...] = (AUDIO, MEDIA)


def halt_reasons() -> tuple[type[HaltReason], ...]:
    """Every declared halt reason enum of every domain, the engine's last, each once."""
    return tuple(dict.fromkeys(h for d in DECLARATIONS for h in d.halt_reasons))


"""Every domain this build knows; lanes and their settings derive from these (D11)."""


def default_model_cache() -> Path:
    """Where the bundled Whisper model is assembled unless ``[transcription] model_cache`` says.

    ``$XDG_CACHE_HOME/conveyor/models`` (``~/.cache/conveyor/models``): shared by every storage
    root of the user, so the 143 MiB model is assembled once per machine, not per installation.
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "conveyor" / "models"


def _not_run(context: StepContext) -> Outcome:
    """The step of :meth:`Runtime.queues`' domains, which only read the queue."""
    raise RuntimeError("a domain from Runtime.queues() only reads the queue; it runs no step")


class Runtime:
    """Everything a Conveyor process needs, built lazily from ``settings``.

    Args:
        settings: the settings, read once by the entry point.
        clock: time source (a FakeClock in tests).
        engine: an existing engine to use instead of one built from ``[database] url``.
        provider: a recognition provider to use instead of the configured one (tests use
            :class:`conveyor.testing.FakeProvider`).
    """

    def __init__(
        self,
        settings: Settings,
        clock: Clock | None = None,
        *,
        engine: Engine | None = None,
        provider: RecognitionProvider | None = None,
    ) -> None:
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        if engine is not None:
            self.engine = engine
        if provider is not None:
            self.provider = provider

    @cached_property
    def engine(self) -> Engine:
        """The database engine (pool sized for every lane's workers)."""
        from conveyor.db.engine import make_engine

        s = self.settings
        workers = s.pipeline.workers + s.media.short_workers + s.media.long_workers
        return make_engine(s.database.url, pool_size=max(5, workers + 5))

    def migrate(self) -> None:
        """Bring the schema up to date (idempotent)."""
        from conveyor.db.migrate import upgrade

        upgrade(self.engine)

    @cached_property
    def store(self) -> ObjectStore:
        """The object store ``[storage] url`` names (a folder or an S3-compatible bucket).

        Raises:
            OSError: a ``file:`` folder cannot be created.
        """
        from conveyor.objects import open_store

        return open_store(self.settings.storage)

    @property
    def presign_expires(self) -> float | None:
        """Seconds a presigned download URL is valid, or None when ``[storage] presign`` is
        off (the API streams objects itself)."""
        storage = self.settings.storage
        return storage.presign_expires if storage.presign else None

    @cached_property
    def notifier(self) -> Notifier:
        """Wake-ups for this process's workers (and other processes on PostgreSQL)."""
        from conveyor.db.notify import Notifier

        return Notifier(self.engine)

    @cached_property
    def provider_backend(self) -> ProviderBackend:
        """The backend ``[transcription] provider`` names, chosen once for this process."""
        from conveyor.providers.registry import backend_for

        return backend_for(self.settings.transcription)

    @cached_property
    def provider(self) -> RecognitionProvider:
        """The recognition provider from ``[transcription] provider``.

        Raises:
            ConfigError: the provider's model or credential cannot be found.
        """
        from conveyor.providers.registry import ProviderPlace

        transcription = self.settings.transcription
        place = ProviderPlace(
            root=self.settings.storage.root,
            model_cache=transcription.model_cache or default_model_cache(),
            clock=self.clock,
        )
        return self.provider_backend.build(transcription, place)

    @cached_property
    def languages(self) -> frozenset[str]:
        """Language codes the configured recognizer accepts (without loading the model)."""
        return self.provider_backend.languages(self.settings.transcription)

    @cached_property
    def audio(self) -> Domain:
        """The audio domain, its steps bound to this runtime's services."""
        # The provider is built on first use, so processes without audio work never load it.
        from conveyor.audio.stages import build_audio_domain
        from conveyor.audio.steps import AudioSteps  # PyAV: loaded by what runs steps

        steps = AudioSteps(
            self.store,
            lambda: self.provider,
            self.settings.transcription,
            self.settings.pipeline,
        )
        return build_audio_domain(steps)

    @cached_property
    def media(self) -> Domain:
        """The photo/video domain, its steps bound to this runtime's store and settings."""
        from conveyor.media.domain import MediaSteps, build_media_domain  # pyvips, PyAV

        return build_media_domain(MediaSteps(self.store, self.settings.media))

    def domains(self) -> list[Domain]:
        """Every domain this process moves."""
        return [self.audio, self.media]

    def queues(self) -> list[Domain]:
        """Every domain as a queue to read: the table, stages and leases of :meth:`domains`,
        with a step that is never run in place of each real one.

        What reads a domain's backlog (``conveyor records stats``) needs no more, and so loads
        neither PyAV, pyvips nor the recognizer. Running a step of these raises RuntimeError.
        """
        return [
            declaration.bind({stage.name: _not_run for stage in declaration.stages[:-1]})
            for declaration in DECLARATIONS
        ]

    def lanes(self, serve: Collection[str] | None = None) -> dict[str, int]:
        """Lane → worker count, from each declared lane's settings key (D8, M7).

        Args:
            serve: the lanes this process serves (``conveyor worker --lanes``); the others are
                left out, so their records wait for a process that serves them. None: every lane.

        Raises:
            ConfigError: ``serve`` names a lane no domain declares.
        """
        counts: dict[str, int] = {}
        for declaration in DECLARATIONS:
            for lane in declaration.lanes:
                counts[lane.name] = lane.workers(self.settings)
        if serve is None:
            return counts
        unknown = sorted(set(serve) - set(counts))
        if unknown:
            raise ConfigError(
                f"unknown lane {', '.join(map(repr, unknown))}; the lanes are {', '.join(counts)}"
            )
        return {name: count for name, count in counts.items() if name in serve}

    def pool(self, lanes: dict[str, int] | None = None) -> WorkerPool:
        """A worker pool over every domain (not started)."""
        from conveyor.pipeline import WorkerPool

        return WorkerPool(
            self.engine,
            self.domains(),
            lanes if lanes is not None else self.lanes(),
            clock=self.clock,
            settings=self.settings.pipeline,
            notifier=self.notifier,
        )

    def registry(self, pool: WorkerPool) -> ProcessRegistry:
        """This process's row in ``worker_processes`` for ``pool`` (not started), wired so the
        pool claims only for lanes not paused and not while draining."""
        from conveyor import __version__
        from conveyor.processes import ProcessRegistry

        settings = self.settings.pipeline
        registry = ProcessRegistry(
            self.engine,
            self.clock,
            lanes=pool.lanes,
            version=__version__,
            poll_interval=settings.poll_interval,
            beat_interval=settings.beat_interval,
            busy=pool.busy,
            holding=pool.holding,
            holder=pool.holder,
        )
        pool.may_claim = registry.may_claim
        return registry

    def job_sweeper(self) -> JobFolderSweeper:
        """The periodic sweep for the local recognizer's job folders nothing will collect (not
        started), run beside the worker pool with the object sweep's interval and grace."""
        from conveyor.audio.recognizer_sweep import JobFolderSweeper

        storage = self.settings.storage
        return JobFolderSweeper(
            self.engine,
            lambda: self.provider,
            interval=storage.sweep_interval,
            grace=storage.sweep_grace,
        )

    def sweeper(self) -> Sweeper:
        """The periodic sweep for objects without a journal row (not started), run beside
        the worker pool: ``[storage] sweep_interval``, ``[storage] sweep_grace``."""
        from conveyor.objects import Sweeper

        storage = self.settings.storage
        return Sweeper(
            self.engine, self.store, interval=storage.sweep_interval, grace=storage.sweep_grace
        )
