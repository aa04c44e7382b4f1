"""What each fault run measured, collected for the report printed after the suite."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

REPORT: list[dict[str, Any]] = []


def record(entry: dict[str, Any]) -> None:
    """Add one run's entry; rewrite ``CONVEYOR_FAULTS_REPORT`` at once when set, so an
    interrupted long run still leaves what it measured."""
    REPORT.append(entry)
    target = os.environ.get("CONVEYOR_FAULTS_REPORT")
    if target:
        Path(target).write_text(json.dumps(REPORT, indent=2))
