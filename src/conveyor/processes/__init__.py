"""Processes and the controls that span the cluster: each worker process's row
(:class:`ProcessRegistry`), lane pauses and drain requests (:mod:`conveyor.processes.control`)."""

from conveyor.processes.control import (
    HeldRecord,
    LaneState,
    ProcessView,
    drain,
    lane_states,
    list_processes,
    pause,
    resume,
    show_process,
)
from conveyor.processes.registry import ProcessRegistry

__all__ = [
    "HeldRecord",
    "LaneState",
    "ProcessRegistry",
    "ProcessView",
    "drain",
    "lane_states",
    "list_processes",
    "pause",
    "resume",
    "show_process",
]
