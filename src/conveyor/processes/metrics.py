"""Prometheus metrics of this worker process's lanes, read at scrape time from its
:class:`~conveyor.processes.ProcessRegistry`:

* ``conveyor_lane_workers{lane}`` and ``conveyor_lane_busy{lane}``: this process's threads of
  each lane and those running a step now; per process, so a sum over scrape targets is the
  cluster's;
* ``conveyor_lane_paused{lane}``: 1 while the lane is paused cluster-wide (the same in every
  process: read it with ``max``);
* ``conveyor_process_draining``: 1 once this process was asked to drain.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["LANES", "LaneCollector"]


class LaneCollector(Collector):
    """The lane gauges of the process's one registry (none before a registry starts)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._source: (
            tuple[
                Mapping[str, int],
                Callable[[], Mapping[str, int]],
                Callable[[], frozenset[str]],
                threading.Event,
            ]
            | None
        ) = None

    def watch(
        self,
        lanes: Mapping[str, int],
        busy: Callable[[], Mapping[str, int]],
        paused: Callable[[], frozenset[str]],
        draining: threading.Event,
    ) -> None:
        """Report these lanes from now on (the registry that just started)."""
        with self._lock:
            self._source = (dict(lanes), busy, paused, draining)

    def collect(self) -> Iterator[Metric]:
        """The gauges now; nothing when no registry runs here."""
        with self._lock:
            source = self._source
        if source is None:
            return
        lanes, busy, paused, draining = source
        now_busy, now_paused = busy(), paused()
        workers = GaugeMetricFamily(
            "conveyor_lane_workers", "Worker threads of each lane in this process.", labels=["lane"]
        )
        running = GaugeMetricFamily(
            "conveyor_lane_busy",
            "Worker threads of each lane running a step now, in this process.",
            labels=["lane"],
        )
        stopped = GaugeMetricFamily(
            "conveyor_lane_paused",
            "1 while the lane is paused cluster-wide (same in every process: use max).",
            labels=["lane"],
        )
        for lane, count in lanes.items():
            workers.add_metric([lane], count)
            running.add_metric([lane], now_busy.get(lane, 0))
            stopped.add_metric([lane], 1 if lane in now_paused else 0)
        yield workers
        yield running
        yield stopped
        yield GaugeMetricFamily(
            "conveyor_process_draining",
            "1 once this process was asked to drain (it claims nothing more).",
            value=1 if draining.is_set() else 0,
        )


LANES = LaneCollector()
REGISTRY.register(LANES)
