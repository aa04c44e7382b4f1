"""Fixtures of the fault suite: a throwaway PostgreSQL cluster, and the report printed at the end.

The short version runs with the suite (and in CI); the long one only with ``-m faults_long``
(see docs/operations.md). Every measured recovery time is collected in ``fault_report.REPORT``,
printed after the run and written as JSON to ``CONVEYOR_FAULTS_REPORT`` when that is set.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cluster import ThrowawayCluster
from tests.support.fault_report import REPORT


@pytest.fixture(scope="session")
def cluster() -> Iterator[ThrowawayCluster]:
    """A PostgreSQL cluster of the suite's own (never the machine's shared service)."""
    made = ThrowawayCluster()
    try:
        yield made
    finally:
        made.destroy()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print what each fault cost, and write it as JSON when asked."""
    if not REPORT:
        return
    write = terminalreporter.write_line
    terminalreporter.section("fault suite report")
    for entry in REPORT:
        write(f"{entry['fault']}: {entry['summary']}")
        write(
            f"    records {entry['tally']['records']} (done {entry['tally']['done']}, "
            f"halted {entry['tally']['halted'] or 0}), provider operations "
            f"{entry['tally']['provider_operations']}, objects {entry['tally']['objects']} "
            f"(orphans swept {entry['tally']['orphans_swept']}), drained in "
            f"{entry['drain_seconds']:.1f} s; stale results refused "
            f"{entry['measured'].get('stale_results_refused', 0)}; violations: "
            f"{'; '.join(entry['tally']['violations']) or 'none'}"
        )
    target = os.environ.get("CONVEYOR_FAULTS_REPORT")
    if target:  # written after each run already (fault_report.record)
        write(f"report written to {target}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long fault runs are left out unless ``-m`` names ``faults_long``."""
    if "faults_long" in (config.option.markexpr or ""):
        return
    kept = [item for item in items if item.get_closest_marker("faults_long") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept
