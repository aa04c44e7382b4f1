"""Prometheus metrics of the engine, by domain, stage and outcome; never by worker (D13).

Backlog (D3: waiting is shown, never halted) is read from the database at scrape time by
:data:`BACKLOG`, for the domains an entry point asked it to :meth:`~BacklogCollector.watch`.
It is the database's figure, the same in every process that reports it, so its series carry
``scope="cluster"``: across scrape targets read them with ``max by (domain, stage)``, never
``sum`` (which would count the backlog once per process).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine

from conveyor.clock import Clock
from conveyor.pipeline import queries
from conveyor.pipeline.stages import Domain

__all__ = [
    "BACKLOG",
    "CLAIMS_LOST",
    "STEP_OUTCOMES",
    "STEP_SECONDS",
    "BacklogCollector",
    "backlog_of",
]

log = logging.getLogger("conveyor.pipeline")

STEP_OUTCOMES = Counter(
    "conveyor_step_outcomes",
    "Steps finished, by domain, stage left from, and outcome.",
    ["domain", "stage", "outcome"],
)

CLAIMS_LOST = Counter(
    "conveyor_claims_lost",
    "Step results refused because the claim token no longer held (P6).",
    ["domain", "stage"],
)

STEP_SECONDS = Histogram(
    "conveyor_step_seconds",
    "Wall time of one step, by domain and stage.",
    ["domain", "stage"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800),
)


def backlog_of(
    engine: Engine, domains: Sequence[Domain], clock: Clock
) -> list[tuple[str, str, int, float]]:
    """``(domain, stage, records waiting, age of the oldest in seconds)`` per open stage.

    Waiting: not halted and not held by a live claim; the age runs from ``state_entered_at``
    on the database's clock (D3, D17).
    """
    now = queries.now_of(clock)
    rows: list[tuple[str, str, int, float]] = []
    with engine.connect() as conn:
        for domain in domains:
            for stage, count, oldest in queries.backlog(conn, domain, now):
                rows.append((domain.name, stage, count, oldest))
    return rows


class BacklogCollector(Collector):
    """``conveyor_backlog_records`` and ``conveyor_backlog_oldest_seconds`` by domain and stage."""

    def __init__(self) -> None:
        self._source: tuple[Engine, Sequence[Domain], Clock] | None = None
        self._lock = threading.Lock()

    def watch(self, engine: Engine, domains: Sequence[Domain], clock: Clock) -> None:
        """Report the backlog of ``domains`` in ``engine`` from now on (one source a process)."""
        with self._lock:
            self._source = (engine, list(domains), clock)

    def forget(self) -> None:
        """Report nothing from now on (the watched engine is going away)."""
        with self._lock:
            self._source = None

    def collect(self) -> Iterator[Metric]:
        """Read the backlog now; nothing when no source is watched or the database is away."""
        with self._lock:
            source = self._source
        if source is None:
            return
        try:
            rows = backlog_of(*source)
        except Exception as exc:  # a scrape must not fail because the database is away
            log.warning("backlog metrics unavailable: %s", exc)
            return
        waiting = GaugeMetricFamily(
            "conveyor_backlog_records",
            "Records waiting for a worker or a retry, by domain and stage (not halted, "
            "unclaimed); cluster-wide, the same in every process: use max, not sum.",
            labels=["domain", "stage", "scope"],
        )
        oldest = GaugeMetricFamily(
            "conveyor_backlog_oldest_seconds",
            "Seconds the oldest waiting record has been in its stage, by domain and stage; "
            "cluster-wide, the same in every process: use max.",
            labels=["domain", "stage", "scope"],
        )
        for domain, stage, count, age in rows:
            waiting.add_metric([domain, stage, "cluster"], count)
            oldest.add_metric([domain, stage, "cluster"], age)
        yield waiting
        yield oldest


BACKLOG = BacklogCollector()
REGISTRY.register(BACKLOG)
